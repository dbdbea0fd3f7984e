package vault_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/vault"
	"github.com/jackc/pgx/v5"
)

func TestPutGetListDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, pool(t), mustParse(t, keyLine(t, 1)), nil, 0)
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	cred := vault.Credential{AccessToken: "gho_1", RefreshToken: "ghr_1", TokenType: "bearer", Expiry: exp,
		Scopes: []string{"repo"}, AccountID: "42", AccountLabel: "octocat"}
	conn, err := s.Put(ctx, alice, "github", cred)
	if err != nil {
		t.Fatal(err)
	}
	if conn.ID == "" || conn.Status != vault.StatusActive || conn.KeyVersion != 1 {
		t.Fatalf("put: %+v", conn)
	}
	got, gotCred, err := s.Get(ctx, alice, "github", "")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != conn.ID || gotCred.AccessToken != "gho_1" || gotCred.RefreshToken != "ghr_1" ||
		!gotCred.Expiry.Equal(exp) || gotCred.AccountLabel != "octocat" || !slices.Equal(gotCred.Scopes, []string{"repo"}) {
		t.Fatalf("get: %+v %v", got, gotCred)
	}
	if _, err := s.Put(ctx, alice, "slack", vault.Credential{AccessToken: "xoxp"}); err != nil {
		t.Fatal(err)
	}
	bob := identity.User{Issuer: alice.Issuer, Subject: "bob"}
	if _, err := s.Put(ctx, bob, "github", vault.Credential{AccessToken: "gho_bob"}); err != nil {
		t.Fatal(err)
	}
	// Same subject at another issuer is another user.
	aliceElsewhere := identity.User{Issuer: "https://other-idp.example", Subject: "alice"}
	if _, _, err := s.Get(ctx, aliceElsewhere, "github", ""); !errors.Is(err, vault.ErrNotConnected) {
		t.Fatalf("another issuer's alice: %v", err)
	}
	list, err := s.List(ctx, alice)
	if err != nil || len(list) != 2 || list[0].Provider != "github" || list[1].Provider != "slack" ||
		!slices.Equal(list[0].Scopes, []string{"repo"}) {
		t.Fatalf("list: %+v %v", list, err)
	}
	d, err := s.Delete(ctx, alice, "github", "")
	if err != nil || d.Connection.ID != conn.ID || d.Revocation != vault.RevocationSkipped {
		t.Fatalf("delete: %+v %v", d, err)
	}
	if _, _, err := s.Get(ctx, alice, "github", ""); !errors.Is(err, vault.ErrNotConnected) {
		t.Fatalf("after delete: %v", err)
	}
	if _, err := s.Delete(ctx, alice, "github", ""); !errors.Is(err, vault.ErrNotConnected) {
		t.Fatalf("second delete: %v", err)
	}
	if _, _, err := s.Get(ctx, bob, "github", ""); err != nil {
		t.Fatalf("bob's connection went too: %v", err)
	}
}

func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	s := newStore(t, pool(t), mustParse(t, keyLine(t, 1)), nil, 0)
	ctx := context.Background()
	for _, tt := range []struct {
		user     identity.User
		provider string
		cred     vault.Credential
	}{
		{identity.User{Subject: "a"}, "github", vault.Credential{AccessToken: "x"}},
		{identity.User{Issuer: "i"}, "github", vault.Credential{AccessToken: "x"}},
		{alice, "", vault.Credential{AccessToken: "x"}},
		{alice, "Git Hub", vault.Credential{AccessToken: "x"}},
		{alice, "github", vault.Credential{}},
	} {
		if _, err := s.Put(ctx, tt.user, tt.provider, tt.cred); !errors.Is(err, vault.ErrInvalid) {
			t.Errorf("Put(%+v, %q): %v", tt.user, tt.provider, err)
		}
	}
}

// TestStoredCiphertextRefusals: a sealed credential opens only in its own row
// with the right key.
func TestStoredCiphertextRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := pool(t)
	keys := mustParse(t, keyLine(t, 1))
	s := newStore(t, p, keys, nil, 0)
	bob := identity.User{Issuer: alice.Issuer, Subject: "bob"}
	a, err := s.Put(ctx, alice, "github", vault.Credential{AccessToken: "alice-token"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Put(ctx, bob, "github", vault.Credential{AccessToken: "bob-token"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, alice, "gitlab", vault.Credential{AccessToken: "alice-gitlab"}); err != nil {
		t.Fatal(err)
	}
	aliceCT := storedCiphertext(t, p, a.ID)

	// Swap alice's ciphertext into bob's row: bob must not get alice's token.
	if _, err := p.Exec(ctx, `UPDATE connections SET ciphertext = $1 WHERE id = $2`, aliceCT, b.ID); err != nil {
		t.Fatal(err)
	}
	if _, c, err := s.Get(ctx, bob, "github", ""); !errors.Is(err, keyring.ErrDecrypt) {
		t.Fatalf("swapped ciphertext opened: %v %v", c, err)
	}
	if _, err := s.Token(ctx, bob, "github", "", nil); !errors.Is(err, keyring.ErrDecrypt) {
		t.Fatalf("Token on a swapped ciphertext: %v", err)
	}
	// Copy it into alice's gitlab row (same user, other provider).
	if _, err := p.Exec(ctx, `UPDATE connections SET ciphertext = $1 WHERE issuer = $2 AND subject = $3 AND provider = 'gitlab'`,
		aliceCT, alice.Issuer, alice.Subject); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, alice, "gitlab", ""); !errors.Is(err, keyring.ErrDecrypt) {
		t.Fatalf("ciphertext moved to another provider opened: %v", err)
	}
	// Tamper with alice's own ciphertext.
	tampered := bytes.Clone(aliceCT)
	tampered[len(tampered)-5] ^= 0x80
	if _, err := p.Exec(ctx, `UPDATE connections SET ciphertext = $1 WHERE id = $2`, tampered, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, alice, "github", ""); !errors.Is(err, keyring.ErrDecrypt) {
		t.Fatalf("tampered ciphertext opened: %v", err)
	}
	// Restore it: it opens again, but not with a different key of the same version.
	if _, err := p.Exec(ctx, `UPDATE connections SET ciphertext = $1 WHERE id = $2`, aliceCT, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, c, err := s.Get(ctx, alice, "github", ""); err != nil || c.AccessToken != "alice-token" {
		t.Fatalf("restored: %v", err)
	}
	wrong := newStore(t, p, mustParse(t, keyLine(t, 1)), nil, 0)
	if _, _, err := wrong.Get(ctx, alice, "github", ""); !errors.Is(err, keyring.ErrDecrypt) {
		t.Fatalf("wrong key opened: %v", err)
	}
	// A Put over a credential that no longer opens replaces it.
	if _, err := wrong.Put(ctx, alice, "github", vault.Credential{AccessToken: "fresh"}); err != nil {
		t.Fatal(err)
	}
	if _, c, err := wrong.Get(ctx, alice, "github", ""); err != nil || c.AccessToken != "fresh" {
		t.Fatalf("replaced: %v", err)
	}
}

func TestPutMergesScopes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, pool(t), mustParse(t, keyLine(t, 1)), nil, 0)
	put := func(cred vault.Credential) *vault.Connection {
		t.Helper()
		conn, err := s.Put(ctx, alice, "google", cred)
		if err != nil {
			t.Fatal(err)
		}
		_, c, err := s.Get(ctx, alice, "google", conn.ID)
		if err != nil || !slices.Equal(c.Scopes, conn.Scopes) {
			t.Fatalf("get %v, %v vs %v", err, c.Scopes, conn.Scopes)
		}
		return conn
	}
	first := put(vault.Credential{AccessToken: "t1", Scopes: []string{"email"}, AccountID: "g-1", AccountLabel: "alice@work"})
	if got := put(vault.Credential{AccessToken: "t2", Scopes: []string{"drive", "email"}, AccountID: "g-1"}); !slices.Equal(got.Scopes, []string{"email", "drive"}) || got.ID != first.ID {
		t.Fatalf("incremental grant: %v %s", got.Scopes, got.ID)
	}
	if got := put(vault.Credential{AccessToken: "t3", AccountID: "g-1"}); !slices.Equal(got.Scopes, []string{"email", "drive"}) || got.DisplayName != "alice@work" {
		t.Fatalf("a response without scopes (or label) must not drop them: %v %q", got.Scopes, got.DisplayName)
	}
	// Another account at the same provider is another connection, with
	// only its own grant; the first keeps its own.
	second := put(vault.Credential{AccessToken: "t4", Scopes: []string{"calendar"}, AccountID: "g-2", AccountLabel: "alice@home"})
	if second.ID == first.ID || !slices.Equal(second.Scopes, []string{"calendar"}) || second.DisplayName != "alice@home" {
		t.Fatalf("another account: %+v", second)
	}
	if conn, c, err := s.Get(ctx, alice, "google", first.ID); err != nil || c.AccessToken != "t3" || !slices.Equal(conn.Scopes, []string{"email", "drive"}) {
		t.Fatalf("the first account changed: %v %v", conn, err)
	}
	if _, _, err := s.Get(ctx, alice, "google", ""); !errors.Is(err, vault.ErrAccountRequired) {
		t.Fatalf("no connection named with two there: %v", err)
	}
	list, err := s.List(ctx, alice)
	if err != nil || len(list) != 2 || list[0].ID != first.ID || list[1].ID != second.ID {
		t.Fatalf("list: %+v %v", list, err)
	}
}

// TestAccountLimit: past Config.MaxAccounts connections at one provider a
// new account is refused; the same accounts again, and other providers,
// are not.
func TestAccountLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := vault.New(vault.Config{Pool: pool(t), Keyring: mustParse(t, keyLine(t, 1)), MaxAccounts: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, acct := range []string{"a", "b", "a", "b"} {
		if _, err := s.Put(ctx, alice, "github", vault.Credential{AccessToken: "t-" + acct, AccountID: acct}); err != nil {
			t.Fatalf("%s: %v", acct, err)
		}
	}
	if _, err := s.Put(ctx, alice, "github", vault.Credential{AccessToken: "t-c", AccountID: "c"}); !errors.Is(err, vault.ErrTooManyAccounts) {
		t.Fatalf("a third account: %v", err)
	}
	if _, err := s.Put(ctx, alice, "gitlab", vault.Credential{AccessToken: "t-c", AccountID: "c"}); err != nil {
		t.Fatalf("another provider: %v", err)
	}
}

// TestTargetReplacedOnlyByAnUnnamedAccount: a credential naming an account
// of its own goes to that account's connection, whatever connection the
// caller meant; one naming an account with no connection yet replaces the
// target (a reauthorization the provider cannot say the account of).
func TestTargetReplacedOnlyByAnUnnamedAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, pool(t), mustParse(t, keyLine(t, 1)), nil, 0)
	a, _ := s.Put(ctx, alice, "github", vault.Credential{AccessToken: "ta", AccountID: "octocat"})
	b, _ := s.Put(ctx, alice, "github", vault.Credential{AccessToken: "tb", AccountID: "monalisa"})
	// Reauthorizing a, the user signs in as monalisa: b is updated, a untouched.
	got, err := s.PutWith(ctx, alice, "github", vault.Target{ID: a.ID}, vault.Credential{AccessToken: "tb2", AccountID: "monalisa"}, nil)
	if err != nil || got.ID != b.ID {
		t.Fatalf("put: %v %v", got, err)
	}
	if _, c, _ := s.Get(ctx, alice, "github", a.ID); c.AccessToken != "ta" {
		t.Fatalf("the target took another named account's credential: %s", c.AccessToken)
	}
	// An account with no connection yet replaces the target, as another account.
	var ch vault.Change
	got, err = s.PutWith(ctx, alice, "github", vault.Target{ID: a.ID, Unnamed: true}, vault.Credential{AccessToken: "tk", AccountID: "key-1"},
		func(_ context.Context, _ pgx.Tx, _ vault.Connection, c vault.Change) error { ch = c; return nil })
	if err != nil || got.ID != a.ID || !ch.AccountChanged || ch.Created {
		t.Fatalf("replace target: %v %+v %v", got, ch, err)
	}
	if bytes.Equal(got.AccountHash, a.AccountHash) {
		t.Fatal("the replaced target kept its account hash")
	}
}

func TestConcurrentPutsMakeOneConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := pool(t)
	s := newStore(t, p, mustParse(t, keyLine(t, 1)), nil, 0)
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for i := range 10 {
		wg.Go(func() {
			_, err := s.Put(ctx, alice, "github", vault.Credential{AccessToken: fmt.Sprint("t", i), Scopes: []string{fmt.Sprint("s", i)}})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := p.QueryRow(ctx, `SELECT count(*) FROM connections`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d rows, %v", n, err)
	}
	if _, c, err := s.Get(ctx, alice, "github", ""); err != nil || len(c.Scopes) != 10 {
		t.Fatalf("merged scopes %v %v", c, err)
	}
}

func TestToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		opts   providertest.Options
		quirks providertest.Quirks
		// lifetime of the stored access token; refresh happens when < skew (1m)
		lifetime time.Duration
		noRT     bool
		revoked  bool // the grant was revoked at the provider before the call
		required []string
		check    func(t *testing.T, srv *providertest.Server, before providertest.Tokens, got *vault.Credential, err error, stored *vault.Credential, conn *vault.Connection)
	}{
		{name: "valid token is returned without a provider call", lifetime: time.Hour,
			check: func(t *testing.T, srv *providertest.Server, before providertest.Tokens, got *vault.Credential, err error, _ *vault.Credential, _ *vault.Connection) {
				if err != nil || got.AccessToken != before.AccessToken || srv.Counts().Refresh != 0 {
					t.Fatalf("%v %v %+v", got, err, srv.Counts())
				}
			}},
		{name: "expiring token is refreshed and stored", lifetime: 30 * time.Second, opts: providertest.Options{RotateRefreshTokens: true},
			check: func(t *testing.T, srv *providertest.Server, before providertest.Tokens, got *vault.Credential, err error, stored *vault.Credential, conn *vault.Connection) {
				if err != nil || got.AccessToken == before.AccessToken || !srv.Valid(got.AccessToken) {
					t.Fatalf("%v %v", got, err)
				}
				if stored.AccessToken != got.AccessToken || stored.RefreshToken == before.RefreshToken ||
					time.Until(stored.Expiry) < 50*time.Minute || conn.RefreshedAt.IsZero() {
					t.Fatalf("stored %v, conn %+v", stored, conn)
				}
				if !slices.Equal(stored.Scopes, []string{"files.read"}) {
					t.Fatalf("scopes %v", stored.Scopes)
				}
			}},
		{name: "refresh without new refresh token keeps the old one", lifetime: 30 * time.Second,
			quirks: providertest.Quirks{NoRefreshTokenOnRefresh: true},
			check: func(t *testing.T, srv *providertest.Server, before providertest.Tokens, got *vault.Credential, err error, stored *vault.Credential, _ *vault.Connection) {
				if err != nil || stored.RefreshToken != before.RefreshToken || got.RefreshToken != before.RefreshToken {
					t.Fatalf("%v %v", stored, err)
				}
			}},
		{name: "token without expiry is never refreshed", quirks: providertest.Quirks{NoExpiresIn: true},
			check: func(t *testing.T, srv *providertest.Server, before providertest.Tokens, got *vault.Credential, err error, _ *vault.Credential, _ *vault.Connection) {
				if err != nil || got.AccessToken != before.AccessToken || !got.Expiry.IsZero() || srv.Counts().Refresh != 0 {
					t.Fatalf("%v %v", got, err)
				}
			}},
		{name: "invalid_grant marks reauthorization required", lifetime: 30 * time.Second, revoked: true,
			check: func(t *testing.T, srv *providertest.Server, before providertest.Tokens, got *vault.Credential, err error, stored *vault.Credential, conn *vault.Connection) {
				if !errors.Is(err, vault.ErrReauthorizationRequired) || conn.Status != vault.StatusReauthorizationRequired {
					t.Fatalf("%v, status %s", err, conn.Status)
				}
			}},
		{name: "provider outage leaves the connection untouched", lifetime: -time.Second,
			quirks: providertest.Quirks{ServerError: true},
			check: func(t *testing.T, srv *providertest.Server, before providertest.Tokens, got *vault.Credential, err error, stored *vault.Credential, conn *vault.Connection) {
				if !errors.Is(err, vault.ErrProviderUnavailable) || errors.Is(err, vault.ErrReauthorizationRequired) {
					t.Fatalf("%v", err)
				}
				if conn.Status != vault.StatusActive || stored.AccessToken != before.AccessToken ||
					stored.RefreshToken != before.RefreshToken || !conn.RefreshedAt.IsZero() {
					t.Fatalf("connection changed: %+v %v", conn, stored)
				}
			}},
		{name: "provider outage: a token still valid is answered", lifetime: 30 * time.Second,
			quirks: providertest.Quirks{ServerError: true},
			check: func(t *testing.T, srv *providertest.Server, before providertest.Tokens, got *vault.Credential, err error, stored *vault.Credential, conn *vault.Connection) {
				if err != nil || got.AccessToken != before.AccessToken || srv.Counts().Refresh != 1 {
					t.Fatalf("%v %v %+v", got, err, srv.Counts())
				}
				if conn.Status != vault.StatusActive || stored.RefreshToken != before.RefreshToken || conn.LastError != "provider_unavailable" {
					t.Fatalf("connection changed: %+v", conn)
				}
			}},
		{name: "expired token without refresh token needs reauthorization", lifetime: -time.Second, noRT: true,
			check: func(t *testing.T, srv *providertest.Server, _ providertest.Tokens, _ *vault.Credential, err error, _ *vault.Credential, conn *vault.Connection) {
				if !errors.Is(err, vault.ErrReauthorizationRequired) || conn.Status != vault.StatusReauthorizationRequired || srv.Counts().Refresh != 0 {
					t.Fatalf("%v %s", err, conn.Status)
				}
			}},
		{name: "expiring but still valid token without refresh token is returned", lifetime: 30 * time.Second, noRT: true,
			check: func(t *testing.T, srv *providertest.Server, before providertest.Tokens, got *vault.Credential, err error, _ *vault.Credential, _ *vault.Connection) {
				if err != nil || got.AccessToken != before.AccessToken {
					t.Fatalf("%v %v", got, err)
				}
			}},
		{name: "missing scopes", lifetime: time.Hour, required: []string{"files.read", "files.write", "admin"},
			check: func(t *testing.T, srv *providertest.Server, _ providertest.Tokens, _ *vault.Credential, err error, _ *vault.Credential, _ *vault.Connection) {
				var ms *vault.MissingScopesError
				if !errors.As(err, &ms) || !slices.Equal(ms.Missing, []string{"files.write", "admin"}) || ms.Provider != "fake" {
					t.Fatalf("%v", err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv, p := fakeProvider(t, tt.opts)
			s := newStore(t, pool(t), mustParse(t, keyLine(t, 1)), p, time.Minute)
			srv.SetQuirks(providertest.Quirks{NoExpiresIn: tt.quirks.NoExpiresIn})
			tok := srv.Grant([]string{"files.read"}, tt.lifetime)
			if tt.lifetime < 0 {
				tok.Expiry = time.Now().Add(tt.lifetime)
			}
			if tt.noRT {
				tok.RefreshToken = ""
			}
			if tt.revoked {
				if err := revoker(p)(ctx, vault.App{Provider: "fake"}, &vault.Credential{RefreshToken: tok.RefreshToken}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Put(ctx, alice, "fake", credOf(tok)); err != nil {
				t.Fatal(err)
			}
			srv.SetQuirks(tt.quirks)
			got, err := s.Token(ctx, alice, "fake", "", append([]string{"files.read"}, tt.required...))
			conn, stored, gerr := s.Get(ctx, alice, "fake", "")
			if gerr != nil {
				t.Fatal(gerr)
			}
			tt.check(t, srv, tok, got, err, stored, conn)
		})
	}
}

func TestReauthorizationStatusSticksUntilReconnect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, p := fakeProvider(t, providertest.Options{})
	s := newStore(t, pool(t), mustParse(t, keyLine(t, 1)), p, time.Minute)
	if _, err := s.Put(ctx, alice, "fake", vault.Credential{AccessToken: "x", RefreshToken: "rt_unknown",
		Expiry: time.Now().Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.Token(ctx, alice, "fake", "", nil); !errors.Is(err, vault.ErrReauthorizationRequired) {
			t.Fatalf("got %v", err)
		}
	}
	if n := srv.Counts().Refresh; n != 1 {
		t.Fatalf("%d refresh attempts: a dead grant must be tried once", n)
	}
	if _, err := s.Put(ctx, alice, "fake", credOf(srv.Grant(nil, time.Hour))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Token(ctx, alice, "fake", "", nil); err != nil {
		t.Fatalf("after reconnecting: %v", err)
	}
}

// TestRefreshRace: 50 concurrent Token calls from two Stores on two pools (two
// replicas) on an expiring connection whose provider rotates refresh tokens
// and rejects reuse: exactly one refresh reaches the provider and every caller
// gets the new token.
func TestRefreshRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, p := fakeProvider(t, providertest.Options{RotateRefreshTokens: true, TokenDelay: 50 * time.Millisecond})
	dbURL := pgtest.URL(t)
	keys := mustParse(t, keyLine(t, 1))
	replicas := []*vault.Store{
		newStore(t, pgtest.NewPool(t, dbURL), keys, p, time.Minute),
		newStore(t, pgtest.NewPool(t, dbURL), keys, p, time.Minute),
	}
	old := srv.Grant([]string{"files.read"}, 20*time.Second)
	if _, err := replicas[0].Put(ctx, alice, "fake", credOf(old)); err != nil {
		t.Fatal(err)
	}

	const callers = 50
	start := make(chan struct{})
	results := make([]*vault.Credential, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			<-start
			results[i], errs[i] = replicas[i%2].Token(ctx, alice, "fake", "", []string{"files.read"})
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
	fresh := results[0].AccessToken
	if fresh == old.AccessToken || !srv.Valid(fresh) {
		t.Fatal("callers did not get a new, valid token")
	}
	for i, r := range results {
		if r.AccessToken != fresh {
			t.Fatalf("caller %d got a different token", i)
		}
	}
	_, stored, err := replicas[1].Get(ctx, alice, "fake", "")
	if err != nil || stored.AccessToken != fresh || stored.RefreshToken == old.RefreshToken {
		t.Fatalf("stored %v %v", stored, err)
	}
	if srv.Revoked(stored.RefreshToken) {
		t.Fatal("the provider saw refresh-token reuse")
	}
}

// TestRefreshRacePerConnection (issue 24): alice's two accounts at one
// rotating provider are refreshed by 60 racing callers on two replicas:
// exactly one refresh per connection reaches the provider, each caller gets
// its own account's new token, and neither refresh token is presented
// twice.
func TestRefreshRacePerConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, p := fakeProvider(t, providertest.Options{RotateRefreshTokens: true, TokenDelay: 50 * time.Millisecond})
	dbURL := pgtest.URL(t)
	keys := mustParse(t, keyLine(t, 1))
	replicas := []*vault.Store{
		newStore(t, pgtest.NewPool(t, dbURL), keys, p, time.Minute),
		newStore(t, pgtest.NewPool(t, dbURL), keys, p, time.Minute),
	}
	var conns []*vault.Connection
	var olds []string
	for _, acct := range []string{"work", "home"} {
		tok := srv.Grant([]string{"files.read"}, 20*time.Second)
		cred := credOf(tok)
		cred.AccountID = acct
		c, err := replicas[0].Put(ctx, alice, "fake", cred)
		if err != nil {
			t.Fatal(err)
		}
		conns, olds = append(conns, c), append(olds, tok.AccessToken)
	}
	if conns[0].ID == conns[1].ID {
		t.Fatal("two accounts, one connection")
	}
	const callers = 60
	start := make(chan struct{})
	results := make([]*vault.Credential, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			<-start
			results[i], errs[i] = replicas[i%2].Token(ctx, alice, "fake", conns[(i/2)%2].ID, []string{"files.read"})
		})
	}
	close(start)
	wg.Wait()
	if n := srv.Counts().Refresh; n != 2 {
		t.Fatalf("%d refresh requests reached the provider, want one per connection", n)
	}
	fresh := map[int]string{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
		k := (i / 2) % 2
		if results[i].AccountID != []string{"work", "home"}[k] || results[i].AccessToken == olds[k] {
			t.Fatalf("caller %d got %s's token %v", i, results[i].AccountID, results[i].AccessToken == olds[k])
		}
		if f, ok := fresh[k]; ok && f != results[i].AccessToken {
			t.Fatalf("caller %d got another token of the same connection", i)
		} else {
			fresh[k] = results[i].AccessToken
		}
	}
	if fresh[0] == fresh[1] {
		t.Fatal("the two accounts share a token")
	}
	for k, c := range conns {
		_, stored, err := replicas[1].Get(ctx, alice, "fake", c.ID)
		if err != nil || stored.AccessToken != fresh[k] || srv.Revoked(stored.RefreshToken) {
			t.Fatalf("connection %d stored %v %v", k, stored, err)
		}
	}
}

func TestDeleteRevokesAtProvider(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		authStyle string
		quirks    providertest.Quirks
		noRevoke  bool
		want      vault.Revocation
		wantAuth  string
	}{
		{name: "client_secret_basic", want: vault.Revoked, wantAuth: "basic"},
		{name: "Basic-only provider", quirks: providertest.Quirks{BasicAuthOnly: true}, want: vault.Revoked, wantAuth: "basic"},
		{name: "client_secret_post", authStyle: "params", want: vault.Revoked, wantAuth: "post"},
		{name: "provider down: deleted anyway", quirks: providertest.Quirks{ServerError: true}, want: vault.RevocationFailed},
		{name: "no revocation endpoint", noRevoke: true, want: vault.RevocationNoSupport},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := providertest.New(t, providertest.Options{})
			entry := srv.ProviderConfig("fake", "S")
			if tt.authStyle != "" {
				entry["auth_style"] = tt.authStyle
			}
			if tt.noRevoke {
				delete(entry, "revocation_url")
			}
			p := oauthFromEntry(t, srv, entry)
			s := newStore(t, pool(t), mustParse(t, keyLine(t, 1)), p, time.Minute)
			tok := srv.Grant([]string{"files.read"}, time.Hour)
			if _, err := s.Put(ctx, alice, "fake", credOf(tok)); err != nil {
				t.Fatal(err)
			}
			srv.SetQuirks(tt.quirks)
			d, err := s.Delete(ctx, alice, "fake", "")
			if err != nil {
				t.Fatal(err)
			}
			if d.Revocation != tt.want || (tt.want == vault.RevocationFailed) != (d.RevokeErr != nil) {
				t.Fatalf("deletion %+v", d)
			}
			if _, _, err := s.Get(ctx, alice, "fake", ""); !errors.Is(err, vault.ErrNotConnected) {
				t.Fatalf("still stored: %v", err)
			}
			if tt.want != vault.Revoked {
				return
			}
			want := []providertest.Revocation{
				{Token: tok.RefreshToken, Hint: "refresh_token", ClientAuth: tt.wantAuth, ClientID: srv.ClientID, Known: true},
				{Token: tok.AccessToken, Hint: "access_token", ClientAuth: tt.wantAuth, ClientID: srv.ClientID, Known: true},
			}
			if got := srv.Revocations(); !slices.Equal(got, want) {
				t.Fatalf("revocations\n got %+v\nwant %+v", got, want)
			}
			if srv.Valid(tok.AccessToken) || !srv.Revoked(tok.RefreshToken) {
				t.Fatal("the grant still works at the provider")
			}
		})
	}
}

// BenchmarkToken measures Token on a connection that needs no refresh: one
// indexed SELECT and one open.
func BenchmarkToken(b *testing.B) {
	ctx := context.Background()
	s := newStore(b, pool(b), mustParse(b, keyLine(b, 1)), nil, time.Minute)
	cred := vault.Credential{AccessToken: "gho_" + fmt.Sprint(time.Now().UnixNano()), RefreshToken: "ghr_x",
		Expiry: time.Now().Add(24 * time.Hour), Scopes: []string{"repo"}}
	if _, err := s.Put(ctx, alice, "github", cred); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Token(ctx, alice, "github", "", []string{"repo"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTokenParallel is Token from many goroutines on one pool.
func BenchmarkTokenParallel(b *testing.B) {
	ctx := context.Background()
	s := newStore(b, pool(b), mustParse(b, keyLine(b, 1)), nil, time.Minute)
	if _, err := s.Put(ctx, alice, "github", vault.Credential{AccessToken: "gho_x", Expiry: time.Now().Add(24 * time.Hour)}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Token(ctx, alice, "github", "", nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestLegacyRowTakenOnlyWhenAsked: a connection from before accounts were
// named (its credential names nobody) is not the account of whatever is
// connected next: a request for another account, or about another
// connection, adds one; only a request about it (by id, or naming none while
// it is the user's only one there) puts the new credential in it — as
// another account, nothing of the old grant or the user's label carried over.
func TestLegacyRowTakenOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, pool(t), mustParse(t, keyLine(t, 1)), nil, 0)
	legacy, err := s.Put(ctx, alice, "github", vault.Credential{AccessToken: "gho-work", Scopes: []string{"repo", "admin:org"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetLabel(ctx, alice, "github", legacy.ID, "work"); err != nil {
		t.Fatal(err)
	}
	personal, err := s.PutWith(ctx, alice, "github", vault.Target{New: true},
		vault.Credential{AccessToken: "gho-personal", AccountID: "99", AccountLabel: "me-personal", Scopes: []string{"repo"}}, nil)
	if err != nil || personal.ID == legacy.ID {
		t.Fatalf("another account went into the old connection: %v %v", personal, err)
	}
	if _, c, _ := s.Get(ctx, alice, "github", legacy.ID); c.AccessToken != "gho-work" {
		t.Fatal("the old credential was replaced")
	}
	third, err := s.PutWith(ctx, alice, "github", vault.Target{ID: personal.ID},
		vault.Credential{AccessToken: "gho-7", AccountID: "7"}, nil)
	if err != nil || third.ID == legacy.ID || third.ID == personal.ID {
		t.Fatalf("a request about another connection: %v %v", third, err)
	}
	var ch vault.Change
	got, err := s.PutWith(ctx, alice, "github", vault.Target{ID: legacy.ID},
		vault.Credential{AccessToken: "gho-work-2", AccountID: "42", AccountLabel: "me-work", Scopes: []string{"repo"}},
		func(_ context.Context, _ pgx.Tx, _ vault.Connection, c vault.Change) error { ch = c; return nil })
	if err != nil || got.ID != legacy.ID || !ch.AccountChanged || !slices.Equal(got.Scopes, []string{"repo"}) {
		t.Fatalf("the request about it: %+v %+v %v", got, ch, err)
	}
	if c, _ := s.Lookup(ctx, alice, "github", legacy.ID); c.Label != "work" || c.DisplayName != "me-work" {
		t.Fatalf("asked for by id, it keeps the user's label: %+v", c)
	}
	// Without a request about it, and not the only one: a new connection.
	if c, err := s.Put(ctx, bob, "github", vault.Credential{AccessToken: "b1"}); err != nil {
		t.Fatal(err)
	} else if err := s.SetLabel(ctx, bob, "github", c.ID, "old"); err != nil {
		t.Fatal(err)
	} else if got, err := s.Put(ctx, bob, "github", vault.Credential{AccessToken: "b2", AccountID: "5"}); err != nil || got.ID != c.ID || got.Label != "" {
		t.Fatalf("bob's only connection, a request naming none: %+v %v (the label named the old account)", got, err)
	}
}
