package vault_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/vault"
)

func countNarrowed(t *testing.T, p *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := p.QueryRow(context.Background(), `SELECT count(*) FROM narrowed_tokens`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestNarrowedOnceAcrossReplicas: many callers on two replicas asking for
// the same narrowed token cause exactly one scoped refresh; the token carries
// only the asked scopes, the rotated refresh token is stored in the
// connection (so the connection's own refresh still works), and the token is
// kept until it expires.
func TestNarrowedOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, p := fakeProvider(t, providertest.Options{RotateRefreshTokens: true, TokenDelay: 50 * time.Millisecond})
	dbURL := pgtest.URL(t)
	keys := mustParse(t, keyLine(t, 1))
	db := pgtest.NewPool(t, dbURL)
	replicas := []*vault.Store{newStore(t, db, keys, p, time.Minute), newStore(t, pgtest.NewPool(t, dbURL), keys, p, time.Minute)}
	full := srv.Grant([]string{"read", "write", "admin"}, 20*time.Second) // within the skew: the main token refreshes too
	if _, err := replicas[0].Put(ctx, alice, "fake", credOf(full)); err != nil {
		t.Fatal(err)
	}

	const callers = 40
	start := make(chan struct{})
	results := make([]*vault.Credential, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			<-start
			results[i], errs[i] = replicas[i%2].Narrowed(ctx, alice, "fake", "", []string{"read"}, "")
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	if n := srv.Counts().Refresh; n != 1 {
		t.Fatalf("%d refresh requests reached the provider, want exactly 1", n)
	}
	narrow := results[0].AccessToken
	for i, r := range results {
		if r.AccessToken != narrow || !slices.Equal(r.Scopes, []string{"read"}) || r.RefreshToken != "" {
			t.Fatalf("caller %d got %v", i, r)
		}
	}
	if got, _ := srv.TokenScopes(narrow); narrow == full.AccessToken || !slices.Equal(got, []string{"read"}) {
		t.Fatalf("the narrowed token carries %v at the provider", got)
	}
	_, stored, err := replicas[1].Get(ctx, alice, "fake", "")
	if err != nil || stored.RefreshToken == full.RefreshToken || stored.AccessToken != full.AccessToken ||
		len(stored.Scopes) != 3 {
		t.Fatalf("connection after narrowing: %v %v", stored, err)
	}
	// Kept: no second request while it is valid.
	if again, err := replicas[1].Narrowed(ctx, alice, "fake", "", []string{"read", "read"}, ""); err != nil || again.AccessToken != narrow {
		t.Fatalf("second read: %v %v", again, err)
	}
	if n := srv.Counts().Refresh; n != 1 {
		t.Fatalf("a kept narrowed token was fetched again (%d refreshes)", n)
	}
	// The connection's own refresh uses the rotated refresh token: no reuse.
	main, err := replicas[0].Token(ctx, alice, "fake", "", nil)
	if err != nil || main.AccessToken == full.AccessToken || srv.Revoked(main.RefreshToken) {
		t.Fatalf("the connection's refresh after narrowing: %v %v", main, err)
	}
	if got, _ := srv.TokenScopes(main.AccessToken); len(got) != 3 {
		t.Fatalf("the connection's token carries %v", got)
	}
	if countNarrowed(t, db) != 1 {
		t.Fatal("the narrowed token is not stored")
	}
}

// TestNarrowedGoesWithTheConnection: a narrowed token never outlives or
// widens past its connection: a replaced credential (Put) and a deleted
// connection take it along, and it is sealed for its connection and scope
// set only.
func TestNarrowedGoesWithTheConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, p := fakeProvider(t, providertest.Options{})
	db := pool(t)
	s := newStore(t, db, mustParse(t, keyLine(t, 1)), p, time.Minute)
	put := func() {
		t.Helper()
		if _, err := s.Put(ctx, alice, "fake", credOf(srv.Grant([]string{"read", "write"}, 0))); err != nil {
			t.Fatal(err)
		}
	}
	put()
	first, err := s.Narrowed(ctx, alice, "fake", "", []string{"read"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Narrowed(ctx, alice, "fake", "", []string{"write"}, ""); err != nil {
		t.Fatal(err)
	}
	// A ciphertext moved to another scope set does not open there: it is
	// fetched again rather than handed out.
	if _, err := db.Exec(ctx, `UPDATE narrowed_tokens SET ciphertext = (SELECT ciphertext FROM narrowed_tokens
		WHERE scopes = '{read}') WHERE scopes = '{write}'`); err != nil {
		t.Fatal(err)
	}
	before := srv.Counts().Refresh
	w, err := s.Narrowed(ctx, alice, "fake", "", []string{"write"}, "")
	if err != nil || w.AccessToken == first.AccessToken || srv.Counts().Refresh != before+1 {
		t.Fatalf("a moved ciphertext: %v %v", w, err)
	}
	if _, err := s.Narrowed(ctx, alice, "fake", "", []string{"delete"}, ""); !errors.As(err, new(*vault.MissingScopesError)) {
		t.Fatalf("a scope the connection lacks: %v", err)
	}
	put() // reconnect: a new grant
	if n := countNarrowed(t, db); n != 0 {
		t.Fatalf("%d narrowed tokens outlived the credential they came from", n)
	}
	if again, err := s.Narrowed(ctx, alice, "fake", "", []string{"read"}, ""); err != nil || again.AccessToken == first.AccessToken {
		t.Fatalf("after a reconnect: %v %v", again, err)
	}
	// A caller approved for another provider account gets none, whether the
	// token is stored or fetched under the lock; so does one whose account
	// was replaced by a reconnect racing the call.
	if _, err := s.Narrowed(ctx, alice, "fake", "", []string{"read"}, "someone-else"); !errors.Is(err, vault.ErrAccountChanged) {
		t.Fatalf("a stored token for another account: %v", err)
	}
	other := credOf(srv.Grant([]string{"read", "write"}, 0))
	other.AccountID = "account-b"
	if _, err := s.Put(ctx, alice, "fake", other); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Narrowed(ctx, alice, "fake", "", []string{"read"}, ""); !errors.Is(err, vault.ErrAccountChanged) {
		t.Fatalf("a token cut from account-b for a caller approved for the first account: %v %v", n, err)
	}
	if n, err := s.Narrowed(ctx, alice, "fake", "", []string{"read"}, "account-b"); err != nil || n.AccountID != "account-b" {
		t.Fatalf("account-b's own narrowed token: %v %v", n, err)
	}
	if _, err := s.Delete(ctx, alice, "fake", ""); err != nil {
		t.Fatal(err)
	}
	if n := countNarrowed(t, db); n != 0 {
		t.Fatalf("%d narrowed tokens outlived their connection", n)
	}
	if _, err := s.Narrowed(ctx, alice, "fake", "", []string{"read"}, ""); !errors.Is(err, vault.ErrNotConnected) {
		t.Fatalf("after delete: %v", err)
	}
}

// TestNarrowedRefusals: a provider that ignores scope, or refuses the
// subset, yields ErrCannotNarrow and stores nothing (but keeps a rotated
// refresh token); a dead grant marks the connection as the main refresh
// does.
func TestNarrowedRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, p := fakeProvider(t, providertest.Options{RotateRefreshTokens: true})
	db := pool(t)
	s := newStore(t, db, mustParse(t, keyLine(t, 1)), p, time.Minute)
	tok := srv.Grant([]string{"read", "write"}, 0)
	cred := credOf(tok)
	cred.Scopes = []string{"read", "write", "ghost"} // the stored set claims one the grant lacks
	if _, err := s.Put(ctx, alice, "fake", cred); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Narrowed(ctx, alice, "fake", "", []string{"ghost"}, ""); !errors.Is(err, vault.ErrCannotNarrow) {
		t.Fatalf("invalid_scope: %v", err)
	}
	srv.SetQuirks(providertest.Quirks{IgnoreRefreshScope: true})
	if _, err := s.Narrowed(ctx, alice, "fake", "", []string{"read"}, ""); !errors.Is(err, vault.ErrCannotNarrow) {
		t.Fatalf("a provider that ignores scope: %v", err)
	}
	if n := countNarrowed(t, db); n != 0 {
		t.Fatal("a token wider than asked was stored")
	}
	_, stored, err := s.Get(ctx, alice, "fake", "")
	if err != nil || stored.RefreshToken == tok.RefreshToken || srv.Revoked(stored.RefreshToken) {
		t.Fatalf("the rotated refresh token was not kept: %v %v", stored, err)
	}
	srv.SetQuirks(providertest.Quirks{})
	if _, err := s.Narrowed(ctx, alice, "fake", "", nil, ""); !errors.Is(err, vault.ErrInvalid) {
		t.Fatalf("no scopes: %v", err)
	}
	// Revoke the grant at the provider: invalid_grant.
	if err := p.Revoke(ctx, stored.RefreshToken, "refresh_token"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Narrowed(ctx, alice, "fake", "", []string{"read"}, ""); !errors.Is(err, vault.ErrReauthorizationRequired) {
		t.Fatalf("dead grant: %v", err)
	}
	if conn, _, err := s.Get(ctx, alice, "fake", ""); err != nil || conn.Status != vault.StatusReauthorizationRequired {
		t.Fatalf("after invalid_grant: %v %v", conn, err)
	}
}
