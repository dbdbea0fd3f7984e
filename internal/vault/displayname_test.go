package vault_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/migrations"
)

// TestDisplayName (issue 33): an account's one name — the provider's label,
// else the provider's id for it, never an id connectd made up — is what a
// stored connection keeps in clear.
func TestDisplayName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, pool(t), mustParse(t, keyLine(t, 1)), nil, time.Minute)
	for i, tc := range []struct {
		name string
		cred vault.Credential
		want string
	}{
		{"a label", vault.Credential{AccountID: "1", AccountLabel: "octocat"}, "octocat"},
		{"only an id (an ID token's sub)", vault.Credential{AccountID: "248289761001"}, "248289761001"},
		{"an API key", vault.Credential{AccountID: vault.NewAccountID(vault.KeyAccount)}, ""},
		{"an account the provider did not name", vault.Credential{AccountID: vault.NewAccountID(vault.UnnamedAccount)}, ""},
		{"nothing", vault.Credential{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cred.DisplayName(); got != tc.want {
				t.Fatalf("DisplayName = %q, want %q", got, tc.want)
			}
			u := identity.User{Issuer: alice.Issuer, Subject: "user-" + string(rune('a'+i))}
			tc.cred.AccessToken = "at"
			c, err := s.Put(ctx, u, "github", tc.cred)
			if err != nil || c.DisplayName != tc.want {
				t.Fatalf("Put: %+v %v", c, err)
			}
			if c, err := s.Lookup(ctx, u, "github", c.ID); err != nil || c.DisplayName != tc.want {
				t.Fatalf("stored: %+v %v", c, err)
			}
		})
	}
	if !vault.MadeUpAccount(vault.NewAccountID(vault.KeyAccount)) || vault.MadeUpAccount("key") || vault.MadeUpAccount("12345") {
		t.Fatal("MadeUpAccount")
	}
}

// TestDisplayNameMigration (issue 33): rows stored when only the label was
// kept — "" for an account the provider names only by id — are named by the
// backfill after migration 00025, without anyone connecting again; an API
// key's stays "" and a label stays.
func TestDisplayNameMigration(t *testing.T) {
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
	if _, err := p.UpTo(ctx, 24); err != nil {
		t.Fatal(err)
	}
	keys := mustParse(t, keyLine(t, 1))
	other := pool(t)
	stage := newStore(t, other, keys, nil, time.Minute)
	var ids, want []string
	for i, w := range []struct {
		cred vault.Credential
		old  string // the display_name the code before stored
		want string
	}{
		{vault.Credential{AccessToken: "a", AccountID: "sub-1"}, "", "sub-1"},
		{vault.Credential{AccessToken: "b", AccountID: vault.NewAccountID(vault.KeyAccount)}, "", ""},
		{vault.Credential{AccessToken: "c", AccountID: "2", AccountLabel: "octocat"}, "octocat", "octocat"},
	} {
		u := identity.User{Issuer: alice.Issuer, Subject: "user-" + string(rune('a'+i))}
		c, err := stage.Put(ctx, u, "github", w.cred)
		if err != nil {
			t.Fatal(err)
		}
		var ct []byte
		if err := other.QueryRow(ctx, `SELECT ciphertext FROM connections WHERE id = $1`, c.ID).Scan(&ct); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO connections (id, issuer, subject, provider, key_version, ciphertext, scopes, account_hash, display_name)
			VALUES ($1, $2, $3, 'github', 1, $4, '{}', $5, $6)`, c.ID, u.Issuer, u.Subject, ct, c.AccountHash, w.old); err != nil {
			t.Fatal(err)
		}
		ids, want = append(ids, c.ID), append(want, w.want)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	s := newStore(t, pgtest.NewPool(t, dbURL), keys, nil, time.Minute)
	if n, err := s.BackfillAccounts(ctx, 10); err != nil || n != 2 {
		t.Fatalf("backfill: %d %v", n, err)
	}
	for i, id := range ids {
		u := identity.User{Issuer: alice.Issuer, Subject: "user-" + string(rune('a'+i))}
		if c, err := s.Lookup(ctx, u, "github", id); err != nil || c.DisplayName != want[i] {
			t.Fatalf("after the backfill: %+v %v, want %q", c, err, want[i])
		}
	}
}
