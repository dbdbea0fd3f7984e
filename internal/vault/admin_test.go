package vault_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/vault"
)

// TestRefreshOutcomesAreAudited: the vault records every refresh that changes
// a connection in the audit trail, in the refresh's own transaction, without
// a token in the row.
func TestRefreshOutcomesAreAudited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pool(t)
	srv, p := fakeProvider(t, providertest.Options{RotateRefreshTokens: true})
	keys := mustParse(t, keyLine(t, 1))
	s := newStore(t, db, keys, p, time.Minute)

	tok := srv.Grant([]string{"files.read"}, 30*time.Second) // within the skew: refreshed on read
	conn, err := s.Put(ctx, alice, "fake", credOf(tok))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Token(ctx, alice, "fake", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ kind, actor, issuer, subject, provider, target, detail string }
	rows := func() []row {
		t.Helper()
		rs, err := db.Query(ctx, `SELECT kind, actor, issuer, subject, provider, target, detail::text FROM audit_events ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rs, func(r pgx.CollectableRow) (row, error) {
			var x row
			return x, r.Scan(&x.kind, &x.actor, &x.issuer, &x.subject, &x.provider, &x.target, &x.detail)
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	rs := rows()
	if len(rs) != 1 || rs[0].kind != "connection.refreshed" || rs[0].actor != "vault" || rs[0].issuer != alice.Issuer ||
		rs[0].subject != "alice" || rs[0].provider != "fake" || rs[0].target != conn.ID ||
		!strings.Contains(rs[0].detail, `"new_refresh_token": true`) {
		t.Fatalf("after a refresh: %+v", rs)
	}
	for _, secret := range []string{tok.AccessToken, tok.RefreshToken, got.AccessToken, got.RefreshToken} {
		if strings.Contains(rs[0].detail, secret) {
			t.Fatal("a token reached the audit trail")
		}
	}

	// The grant dies at the provider: the next refresh (by a store whose skew
	// makes the fresh token due) marks the connection and says why.
	revokeAtProvider(t, srv, got)
	if _, err := newStore(t, db, keys, p, 2*time.Hour).Token(ctx, alice, "fake", "", nil); !errors.Is(err, vault.ErrReauthorizationRequired) {
		t.Fatalf("after the grant died: %v", err)
	}
	rs = rows()
	if len(rs) != 2 || rs[1].kind != "connection.reauthorization_required" || !strings.Contains(rs[1].detail, "invalid_grant") {
		t.Fatalf("after invalid_grant: %+v", rs)
	}
}

// revokeAtProvider kills cred's grant at the fake provider, behind the
// vault's back.
func revokeAtProvider(t *testing.T, srv *providertest.Server, cred *vault.Credential) {
	t.Helper()
	p := oauthFromEntry(t, srv, srv.ProviderConfig("fake", "FAKE_SECRET"))
	if err := revoker(p)(context.Background(), vault.App{Provider: "fake"}, cred); err != nil {
		t.Fatal(err)
	}
}

func TestDeleteWithHook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pool(t)
	srv, p := fakeProvider(t, providertest.Options{})
	s := newStore(t, db, mustParse(t, keyLine(t, 1)), p, time.Minute)
	tok := srv.Grant([]string{"files.read"}, time.Hour)
	cred := credOf(tok)
	cred.AccountID, cred.AccountLabel = "u-1", "Alice's workspace"
	conn, err := s.Put(ctx, alice, "fake", cred)
	if err != nil {
		t.Fatal(err)
	}
	acct, err := s.Account(ctx, alice, "fake", "")
	if err != nil || acct != (vault.Account{ID: "u-1", Label: "Alice's workspace"}) {
		t.Fatalf("account: %+v %v", acct, err)
	}

	// A failing hook rolls the deletion back and nothing reaches the provider.
	boom := errors.New("boom")
	if _, err := s.DeleteWith(ctx, alice, "fake", "", func(ctx context.Context, tx pgx.Tx, c vault.Connection) error {
		if c.ID != conn.ID {
			t.Errorf("hook got %s", c.ID)
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("failing hook: %v", err)
	}
	if _, _, err := s.Get(ctx, alice, "fake", ""); err != nil || srv.Counts().Revoke != 0 {
		t.Fatalf("after a failing hook: %v, %d revocations", err, srv.Counts().Revoke)
	}

	// A hook's writes commit with the deletion.
	d, err := s.DeleteWith(ctx, alice, "fake", "", func(ctx context.Context, tx pgx.Tx, c vault.Connection) error {
		_, err := tx.Exec(ctx, `INSERT INTO audit_events (kind, target) VALUES ('test.deleted', $1)`, c.ID)
		return err
	})

	if err != nil || d.Revocation != vault.Revoked || srv.Valid(tok.AccessToken) {
		t.Fatalf("delete: %+v %v", d, err)
	}
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE kind = 'test.deleted' AND target = $1`, conn.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("hook write: %d %v", n, err)
	}
	if _, err := s.Account(ctx, alice, "fake", ""); !errors.Is(err, vault.ErrNotConnected) {
		t.Fatalf("account after delete: %v", err)
	}
}
