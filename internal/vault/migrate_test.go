package vault_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/migrations"
)

// TestAccountsMigration (issue 24): a database with today's rows — one
// connection per user and provider, approvals keyed by (user, provider,
// client), a row from before account hashes were kept, an approval whose
// connection is gone — migrated to several accounts per provider: every
// connection is that user's one account there with its approvals, a client
// that names no account reads it as before, and the backfill names the
// accounts without anyone connecting again.
func TestAccountsMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.EmptyURL(t)
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := migrations.NewProvider(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 17); err != nil {
		t.Fatal(err)
	}
	// Today's rows, written as today's code wrote them: the vault seals
	// credentials the same way (sealing did not change), so seal them with
	// a store over a migrated copy and move the rows over.
	keys := mustParse(t, keyLine(t, 1))
	other := pool(t)
	stage := newStore(t, other, keys, nil, time.Minute)
	bob := identity.User{Issuer: alice.Issuer, Subject: "bob"}
	var ids []string
	for _, w := range []struct {
		u     identity.User
		prov  string
		cred  vault.Credential
		clear bool // from before 00017: no account hash
	}{
		{alice, "github", vault.Credential{AccessToken: "gho-alice", Scopes: []string{"repo"}, AccountID: "1", AccountLabel: "octocat"}, false},
		{bob, "github", vault.Credential{AccessToken: "gho-bob", Scopes: []string{"repo"}, AccountID: "2", AccountLabel: "monalisa"}, true},
	} {
		c, err := stage.Put(ctx, w.u, w.prov, w.cred)
		if err != nil {
			t.Fatal(err)
		}
		var ct []byte
		if err := other.QueryRow(ctx, `SELECT ciphertext FROM connections WHERE id = $1`, c.ID).Scan(&ct); err != nil {
			t.Fatal(err)
		}
		var hash any = c.AccountHash
		if w.clear {
			hash = nil
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO connections (id, issuer, subject, provider, key_version, ciphertext, scopes, account_hash)
			VALUES ($1, $2, $3, $4, 1, $5, $6, $7)`, c.ID, w.u.Issuer, w.u.Subject, w.prov, ct, "{repo}", hash); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO clients (id, name, resources) VALUES ('cli_a', 'A', '{https://mcp.example/}')`); err != nil {
		t.Fatalf("client: %v", err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO consents (issuer, subject, client_id, provider, scopes, account_hash, granted_at, updated_at)
		SELECT issuer, subject, 'cli_a', provider, scopes, coalesce(account_hash, $1), now(), now() FROM connections`,
		vault.AccountHash("2")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO consents (issuer, subject, client_id, provider, scopes, granted_at, updated_at)
		VALUES ('https://idp.example', 'carol', 'cli_a', 'github', '{repo}', now(), now())`); err != nil { // no connection
		t.Fatal(err)
	}

	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	live := pgtest.NewPool(t, dbURL)
	s := newStore(t, live, keys, nil, time.Minute)
	cs := consent.NewStore(live, 0, 0, nil)
	for i, u := range []identity.User{alice, bob} {
		appr, err := cs.For(ctx, u, "cli_a", "github")
		if err != nil || len(appr) != 1 || appr[0].ConnectionID != ids[i] {
			t.Fatalf("%s's approvals: %+v %v", u.Subject, appr, err)
		}
		// A client that names no account reads the one there, as before.
		if c, err := s.Token(ctx, u, "github", "", nil); err != nil || c.AccountID == "" {
			t.Fatalf("%s's token: %v", u.Subject, err)
		}
	}
	var orphans int
	if err := live.QueryRow(ctx, `SELECT count(*) FROM consents WHERE subject = 'carol'`).Scan(&orphans); err != nil || orphans != 0 {
		t.Fatalf("an approval without a connection survived: %d %v", orphans, err)
	}
	// The backfill names both accounts and keeps the old row's hash.
	if n, err := s.BackfillAccounts(ctx, 10); err != nil || n != 2 {
		t.Fatalf("backfill: %d %v", n, err)
	}
	if n, err := s.BackfillAccounts(ctx, 10); err != nil || n != 0 {
		t.Fatalf("backfill again: %d %v", n, err)
	}
	for i, want := range []string{"octocat", "monalisa"} {
		c, err := s.Lookup(ctx, []identity.User{alice, bob}[i], "github", ids[i])
		if err != nil || c.DisplayName != want || c.AccountHash == nil {
			t.Fatalf("after the backfill: %+v %v", c, err)
		}
	}
	// Connecting the same account again updates that connection; another
	// account is a second one.
	if c, err := s.Put(ctx, bob, "github", vault.Credential{AccessToken: "gho-bob-2", AccountID: "2"}); err != nil || c.ID != ids[1] {
		t.Fatalf("bob again: %v %v", c, err)
	}
	if c, err := s.Put(ctx, bob, "github", vault.Credential{AccessToken: "gho-bob-work", AccountID: "3"}); err != nil || c.ID == ids[1] {
		t.Fatalf("bob's second account: %v %v", c, err)
	}
	if _, err := s.Token(ctx, bob, "github", "", nil); !errors.Is(err, vault.ErrAccountRequired) {
		t.Fatalf("two accounts, none named: %v", err)
	}
}
