package vault_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/vault"
)

// slowProvider is the fake provider behind a front that can hold token
// requests: with hold set, each waits until release is closed (a provider
// that hangs); with lateFirst, the first answers only after the work is
// done and delay has passed (a provider whose answer arrives too late).
type slowProvider struct {
	*providertest.Server
	hold      atomic.Bool
	release   chan struct{}
	arrived   chan struct{} // a held request arrived
	lateFirst atomic.Int32  // how many of the next answers come late
	delay     time.Duration
	garbage   atomic.Int32 // how many of the next answers are garbage (the work done all the same)
}

func newSlowProvider(t *testing.T, opts providertest.Options, delay time.Duration) (*slowProvider, *providertest.Server) {
	t.Helper()
	sp := &slowProvider{release: make(chan struct{}), arrived: make(chan struct{}, 100), delay: delay}
	front := httptest.NewUnstartedServer(nil)
	srv, h := providertest.NewHandler("http://"+front.Listener.Addr().String(), opts)
	sp.Server = srv
	front.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/token" {
			h.ServeHTTP(w, r)
			return
		}
		if sp.hold.Load() {
			sp.arrived <- struct{}{}
			<-sp.release
		}
		if sp.garbage.Add(-1) >= 0 {
			h.ServeHTTP(httptest.NewRecorder(), r) // done at the provider: the refresh token is rotated
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte("<html>not json{"))
			return
		}
		if sp.lateFirst.Add(-1) >= 0 {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r) // done at the provider: the refresh token is rotated
			time.Sleep(sp.delay)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
			return
		}
		h.ServeHTTP(w, r)
	})
	front.Start()
	t.Cleanup(func() {
		if sp.hold.Load() {
			sp.hold.Store(false)
		}
		select {
		case <-sp.release:
		default:
			close(sp.release)
		}
		front.Close()
	})
	return sp, srv
}

// leaseStore is a Store on pool for the slow provider, with the given
// provider timeout and reuse grace; reasons records what OnReauth is told.
func leaseStore(t *testing.T, pool *pgxpool.Pool, keys *keyring.Keyring, sp *slowProvider, timeout, grace time.Duration,
	reasons *sync.Map) *vault.Store {
	t.Helper()
	p := oauthFromEntry(t, sp.Server, sp.ProviderConfig("fake", "FAKE_SECRET"))
	s, err := vault.New(vault.Config{Pool: pool, Keyring: keys, Skew: time.Minute, ProviderTimeout: timeout,
		Refresh: refresher(p), RefreshScoped: scopedRefresher(p), Revoke: revoker(p),
		ReuseGrace: func(string) time.Duration { return grace },
		OnReauth: func(_ context.Context, _ pgx.Tx, c vault.Connection, reason string) error {
			if reasons != nil {
				reasons.Store(c.ID, reason)
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRefreshHoldsNoConnection (issue 22): refreshes waiting on a provider
// that hangs hold no pooled connection, so with a pool of two and three
// refreshes in flight, other requests still get the database at once.
// Before, each in-flight refresh held a connection in an open FOR UPDATE
// transaction and the pool drained.
func TestRefreshHoldsNoConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sp, _ := newSlowProvider(t, providertest.Options{}, 0)
	p := pgtest.NewPoolWith(t, pgtest.URL(t), func(pc *pgxpool.Config) { pc.MaxConns = 2 })
	s := leaseStore(t, p, mustParse(t, keyLine(t, 1)), sp, 30*time.Second, 0, nil)
	users := []identity.User{{Issuer: alice.Issuer, Subject: "u1"}, {Issuer: alice.Issuer, Subject: "u2"},
		{Issuer: alice.Issuer, Subject: "u3"}}
	for _, u := range users {
		if _, err := s.Put(ctx, u, "fake", expiredCred(sp.Grant([]string{"files.read"}, time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(ctx, alice, "fake", credOf(sp.Grant([]string{"files.read"}, time.Hour))); err != nil {
		t.Fatal(err)
	}
	sp.hold.Store(true)
	errs := make(chan error, len(users))
	for _, u := range users {
		go func() { _, err := s.Token(ctx, u, "fake", "", nil); errs <- err }()
	}
	for range users {
		<-sp.arrived // every refresh is at the provider now
	}
	// A request's database work, bounded as a request's is.
	req, cancel := context.WithTimeout(db.WithDeadlines(ctx, db.Deadlines{Acquire: time.Second}), 3*time.Second)
	defer cancel()
	if _, err := s.Token(req, alice, "fake", "", nil); err != nil {
		t.Fatalf("a token read while refreshes hang: %v", err)
	}
	if _, err := s.List(req, alice); err != nil {
		t.Fatalf("a listing while refreshes hang: %v", err)
	}
	sp.hold.Store(false)
	close(sp.release)
	for range users {
		if err := <-errs; err != nil {
			t.Fatalf("refresh after the provider answered: %v", err)
		}
	}
}

// TestLostAnswerRetriedWithinGrace (issue 22): the provider rotated the
// refresh token but its answer came after connectd's deadline. Where the
// provider keeps a reuse grace, the next refresh presents the same refresh
// token and the connection lives on; the chain of refresh tokens stays
// intact (a later refresh works, no reuse detection tripped). The late call
// is not retried at once: the same slow provider would only make its caller
// wait twice. Before, the next refresh presented the rotated-away token and
// killed the grant.
func TestLostAnswerRetriedWithinGrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sp, srv := newSlowProvider(t, providertest.Options{RotateRefreshTokens: true, ReuseGrace: time.Minute}, 1500*time.Millisecond)
	s := leaseStore(t, pool(t), mustParse(t, keyLine(t, 1)), sp, 500*time.Millisecond, time.Minute, nil)
	if _, err := s.Put(ctx, alice, "fake", expiredCred(srv.Grant([]string{"files.read"}, time.Hour))); err != nil {
		t.Fatal(err)
	}
	sp.lateFirst.Store(1)
	if _, err := s.Token(ctx, alice, "fake", "", nil); !errors.Is(err, vault.ErrProviderUnavailable) {
		t.Fatalf("the late answer: %v, want provider unavailable", err)
	}
	if n := srv.Counts().Refresh; n != 1 {
		t.Fatalf("%d refresh requests, want 1 (a timed-out call is not retried at once)", n)
	}
	got, err := s.Token(ctx, alice, "fake", "", nil)
	if err != nil || !srv.Valid(got.AccessToken) {
		t.Fatalf("token after a lost answer: %v", err)
	}
	// The stored refresh token is the live one: expire the access token and
	// refresh again.
	expireStored(t, s, ctx)
	again, err := s.Token(ctx, alice, "fake", "", nil)
	if err != nil || again.AccessToken == got.AccessToken || !srv.Valid(again.AccessToken) {
		t.Fatalf("refresh after the recovery: %v", err)
	}
}

// TestGarbledAnswerRetriedAtOnce (issue 22): the provider rotated the
// refresh token and answered garbage. Within its reuse grace the same
// refresh token is presented once more at once, and the caller gets a token
// from this one request.
func TestGarbledAnswerRetriedAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sp, srv := newSlowProvider(t, providertest.Options{RotateRefreshTokens: true, ReuseGrace: time.Minute}, 0)
	s := leaseStore(t, pool(t), mustParse(t, keyLine(t, 1)), sp, 5*time.Second, time.Minute, nil)
	if _, err := s.Put(ctx, alice, "fake", expiredCred(srv.Grant([]string{"files.read"}, time.Hour))); err != nil {
		t.Fatal(err)
	}
	sp.garbage.Store(1)
	got, err := s.Token(ctx, alice, "fake", "", nil)
	if err != nil || !srv.Valid(got.AccessToken) || srv.Counts().Refresh != 2 {
		t.Fatalf("token after a garbled answer: %v (%d refreshes)", err, srv.Counts().Refresh)
	}
	expireStored(t, s, ctx)
	if again, err := s.Token(ctx, alice, "fake", "", nil); err != nil || !srv.Valid(again.AccessToken) {
		t.Fatalf("refresh after the recovery: %v", err)
	}
}

// TestDeadLeaseIsNotWaitedForLong (issue 22): a lease left by a replica that
// died keeps others out until it lapses, but a caller does not wait that
// long: after at most the provider timeout it is answered
// provider_unavailable, to retry.
func TestDeadLeaseIsNotWaitedForLong(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sp, srv := newSlowProvider(t, providertest.Options{}, 0)
	p := pool(t)
	s := leaseStore(t, p, mustParse(t, keyLine(t, 1)), sp, time.Second, 0, nil)
	conn, err := s.Put(ctx, alice, "fake", expiredCred(srv.Grant([]string{"files.read"}, time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, `UPDATE connections SET refresh_lease = 'dead',
		refresh_lease_until = now() + interval '1 hour' WHERE id = $1`, conn.ID); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := s.Token(ctx, alice, "fake", "", nil); !errors.Is(err, vault.ErrProviderUnavailable) {
		t.Fatalf("behind a dead lease: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("waited %s behind a dead lease", d)
	}
	if srv.Counts().Refresh != 0 {
		t.Fatal("the lease was broken")
	}
}

// TestLostAnswerWithoutGrace (issue 22): at a provider without a reuse
// grace nothing can recover a rotated refresh token whose answer was lost;
// the refusal that follows is reported as refresh_answer_lost, so the user
// and the operator learn why, instead of a plain invalid_grant.
func TestLostAnswerWithoutGrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sp, srv := newSlowProvider(t, providertest.Options{RotateRefreshTokens: true}, 1500*time.Millisecond)
	var reasons sync.Map
	s := leaseStore(t, pool(t), mustParse(t, keyLine(t, 1)), sp, 500*time.Millisecond, 0, &reasons)
	conn, err := s.Put(ctx, alice, "fake", expiredCred(srv.Grant([]string{"files.read"}, time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	sp.lateFirst.Store(1)
	if _, err := s.Token(ctx, alice, "fake", "", nil); !errors.Is(err, vault.ErrProviderUnavailable) {
		t.Fatalf("lost answer: %v, want provider unavailable", err)
	}
	if c, _, _ := s.Get(ctx, alice, "fake", ""); c.Status != vault.StatusActive || c.LastError != "provider_unavailable" {
		t.Fatalf("after the lost answer: %+v", c)
	}
	if _, err := s.Token(ctx, alice, "fake", "", nil); !errors.Is(err, vault.ErrReauthorizationRequired) {
		t.Fatalf("next refresh: %v, want reauthorization required", err)
	}
	if r, _ := reasons.Load(conn.ID); r != "refresh_answer_lost" {
		t.Fatalf("reason %v, want refresh_answer_lost", r)
	}
}

// TestDeadHolderTakenOver (issue 22): a replica killed mid-refresh leaves
// its lease behind; once the lease lapses the next caller takes it over.
// The dead replica's call reached the provider and rotated the refresh
// token: with a reuse grace the connection survives, without one the
// refusal says refresh_answer_lost.
func TestDeadHolderTakenOver(t *testing.T) {
	t.Parallel()
	for _, grace := range []time.Duration{time.Minute, 0} {
		t.Run("grace "+grace.String(), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			sp, srv := newSlowProvider(t, providertest.Options{RotateRefreshTokens: true, ReuseGrace: grace}, 0)
			var reasons sync.Map
			p := pool(t)
			s := leaseStore(t, p, mustParse(t, keyLine(t, 1)), sp, 5*time.Second, grace, &reasons)
			tok := srv.Grant([]string{"files.read"}, time.Hour)
			conn, err := s.Put(ctx, alice, "fake", expiredCred(tok))
			if err != nil {
				t.Fatal(err)
			}
			// The dead replica: it took the lease and its call rotated the
			// refresh token at the provider; nothing came back.
			if _, err := p.Exec(ctx, `UPDATE connections SET refresh_lease = 'dead',
				refresh_lease_until = now() - interval '1 second' WHERE id = $1`, conn.ID); err != nil {
				t.Fatal(err)
			}
			oauth := oauthFromEntry(t, sp.Server, sp.ProviderConfig("fake", "FAKE_SECRET"))
			if _, err := oauth.Refresh(ctx, tok.RefreshToken); err != nil {
				t.Fatal(err)
			}
			got, err := s.Token(ctx, alice, "fake", "", nil)
			if grace > 0 {
				if err != nil || !srv.Valid(got.AccessToken) {
					t.Fatalf("take-over within the grace: %v", err)
				}
				return
			}
			if !errors.Is(err, vault.ErrReauthorizationRequired) {
				t.Fatalf("take-over without a grace: %v", err)
			}
			if r, _ := reasons.Load(conn.ID); r != "refresh_answer_lost" {
				t.Fatalf("reason %v, want refresh_answer_lost", r)
			}
		})
	}
}

// TestLeaseInForceWaits: a lease another replica holds is waited for, not
// broken: the caller gets that replica's answer, and the provider sees one
// refresh.
func TestLeaseInForceWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sp, srv := newSlowProvider(t, providertest.Options{RotateRefreshTokens: true}, 0)
	dbURL := pgtest.URL(t)
	keys := mustParse(t, keyLine(t, 1))
	a := leaseStore(t, pgtest.NewPool(t, dbURL), keys, sp, 10*time.Second, 0, nil)
	b := leaseStore(t, pgtest.NewPool(t, dbURL), keys, sp, 10*time.Second, 0, nil)
	if _, err := a.Put(ctx, alice, "fake", expiredCred(srv.Grant([]string{"files.read"}, time.Hour))); err != nil {
		t.Fatal(err)
	}
	sp.hold.Store(true)
	first := make(chan *vault.Credential, 1)
	go func() {
		c, err := a.Token(ctx, alice, "fake", "", nil)
		if err != nil {
			t.Errorf("holder: %v", err)
		}
		first <- c
	}()
	<-sp.arrived // a holds the lease and is at the provider
	second := make(chan *vault.Credential, 1)
	go func() {
		c, err := b.Token(ctx, alice, "fake", "", nil)
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		second <- c
	}()
	time.Sleep(300 * time.Millisecond) // b polls the lease meanwhile
	sp.hold.Store(false)
	close(sp.release)
	x, y := <-first, <-second
	if x == nil || y == nil || x.AccessToken != y.AccessToken || srv.Counts().Refresh != 1 {
		t.Fatalf("holder and waiter: %v %v, %d refreshes", x, y, srv.Counts().Refresh)
	}
}

// TestReconnectDuringRefresh: a reconnect (Put) while a refresh is at the
// provider is not blocked by it, and the refresh's answer — of the replaced
// grant — does not overwrite the new credential.
func TestReconnectDuringRefresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sp, srv := newSlowProvider(t, providertest.Options{}, 0)
	s := leaseStore(t, pool(t), mustParse(t, keyLine(t, 1)), sp, 10*time.Second, 0, nil)
	if _, err := s.Put(ctx, alice, "fake", expiredCred(srv.Grant([]string{"files.read"}, time.Hour))); err != nil {
		t.Fatal(err)
	}
	sp.hold.Store(true)
	done := make(chan error, 1)
	go func() { _, err := s.Token(ctx, alice, "fake", "", nil); done <- err }()
	<-sp.arrived
	fresh := srv.Grant([]string{"files.read", "files.write"}, time.Hour)
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := s.Put(pctx, alice, "fake", credOf(fresh)); err != nil {
		t.Fatalf("reconnect while a refresh is in flight: %v", err)
	}
	sp.hold.Store(false)
	close(sp.release)
	<-done
	_, stored, err := s.Get(ctx, alice, "fake", "")
	if err != nil || stored.AccessToken != fresh.AccessToken {
		t.Fatalf("the reconnect's credential was overwritten: %v", err)
	}
}

// expireStored makes the stored access token of alice's connection expired,
// by storing it again with a past expiry.
func expireStored(t *testing.T, s *vault.Store, ctx context.Context) {
	t.Helper()
	_, c, err := s.Get(ctx, alice, "fake", "")
	if err != nil {
		t.Fatal(err)
	}
	c.Expiry = time.Now().Add(-time.Second)
	if _, err := s.Put(ctx, alice, "fake", *c); err != nil {
		t.Fatal(err)
	}
}

// expiredCred is tok as a credential whose access token has expired (the
// fake's own tokens always live a while).
func expiredCred(tok providertest.Tokens) vault.Credential {
	c := credOf(tok)
	c.Expiry = time.Now().Add(-time.Second)
	return c
}
