package vault_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/vault"
)

// TestRotationRewrapUnderLoad: key 2 becomes primary, and rewrap runs while
// 20 goroutines on two replicas keep reading and refreshing connections.
// Every read succeeds throughout, and every connection ends under key 2.
func TestRotationRewrapUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Refreshed tokens live 1s and are refreshed when less than 800ms remain.
	srv, p := fakeProvider(t, providertest.Options{RotateRefreshTokens: true, TokenLifetime: time.Second})
	dbURL := pgtest.URL(t)
	l1, l2 := keyLine(t, 1), keyLine(t, 2)
	const skew = 800 * time.Millisecond

	// Before the rotation: key 1 only.
	old := newStore(t, pgtest.NewPool(t, dbURL), mustParse(t, l1), p, skew)
	const n = 60
	users := make([]identity.User, n)
	for i := range users {
		users[i] = identity.User{Issuer: alice.Issuer, Subject: fmt.Sprint("user-", i)}
		lifetime := time.Hour
		if i%2 == 0 {
			// Falls due between 0.1s and 1s from now, so first refreshes
			// (which write under key 2) overlap the rewrap; then again and
			// again, every 200ms.
			lifetime = 900*time.Millisecond + time.Duration(i)*15*time.Millisecond
		}
		if _, err := old.Put(ctx, users[i], "fake", credOf(srv.Grant([]string{"files.read"}, lifetime))); err != nil {
			t.Fatal(err)
		}
	}

	// Rotation step 2: every replica runs with key 2 as primary (key 1 still known).
	rotated := l1 + ",*" + l2
	replicas := []*vault.Store{
		newStore(t, pgtest.NewPool(t, dbURL), mustParse(t, rotated), p, skew),
		newStore(t, pgtest.NewPool(t, dbURL), mustParse(t, rotated), p, skew),
	}
	var (
		stop  = make(chan struct{})
		reads atomic.Int64
		wg    sync.WaitGroup
		errMu sync.Mutex
		errs  []error
	)
	for g := range 20 {
		wg.Go(func() {
			for k := g; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				u := users[k%n]
				cred, err := replicas[g%2].Token(ctx, u, "fake", "", []string{"files.read"})
				if err == nil && !srv.Valid(cred.AccessToken) {
					err = fmt.Errorf("%s got a token the provider does not accept", u.Subject)
				}
				if err != nil {
					errMu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", u.Subject, err))
					errMu.Unlock()
					return
				}
				reads.Add(1)
			}
		})
	}
	time.Sleep(150 * time.Millisecond)
	refreshesBefore := srv.Counts().Refresh

	// Step 3: rewrap, in small batches spread out so that it overlaps the load.
	rewrapper := newStore(t, pgtest.NewPool(t, dbURL), mustParse(t, rotated), nil, 0)
	batches := 0
	res, err := rewrapper.Rewrap(ctx, vault.RewrapOptions{Batch: 5, Progress: func(vault.RewrapResult) {
		batches++
		time.Sleep(20 * time.Millisecond)
	}})
	readsDuringRewrap := reads.Load()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()

	if err != nil {
		t.Fatalf("rewrap: %v (%+v)", err, res)
	}
	for _, e := range errs {
		t.Error(e)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	t.Logf("rewrapped %d rows in %d batches; %d reads, %d refreshes (%d during and after the rewrap)",
		res.Rewrapped, batches, reads.Load(), srv.Counts().Refresh, srv.Counts().Refresh-refreshesBefore)
	if readsDuringRewrap == 0 || srv.Counts().Refresh <= refreshesBefore || batches < 2 {
		t.Fatal("the load did not overlap the rewrap")
	}
	st, err := rewrapper.KeyStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].KeyVersion != 2 || st[0].Rows != n || !st[0].Primary || st[0].Status != vault.StatusActive {
		t.Fatalf("key status %+v", st)
	}
	// Step 5: key 1 can go.
	onlyKey2 := newStore(t, pgtest.NewPool(t, dbURL), mustParse(t, l2), nil, 0)
	for _, u := range users {
		if _, _, err := onlyKey2.Get(ctx, u, "fake", ""); err != nil {
			t.Fatalf("%s without key 1: %v", u.Subject, err)
		}
	}
}

func TestRewrapResumesAndReportsFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	l1, l2, l3 := keyLine(t, 1), keyLine(t, 2), keyLine(t, 3)
	under1 := newStore(t, pgtest.NewPool(t, dbURL), mustParse(t, l1), nil, 0)
	under3 := newStore(t, pgtest.NewPool(t, dbURL), mustParse(t, l3), nil, 0)
	for i := range 12 {
		u := identity.User{Issuer: alice.Issuer, Subject: fmt.Sprint("u", i)}
		if _, err := under1.Put(ctx, u, "github", vault.Credential{AccessToken: fmt.Sprint("t", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		u := identity.User{Issuer: alice.Issuer, Subject: fmt.Sprint("lost", i)}
		if _, err := under3.Put(ctx, u, "github", vault.Credential{AccessToken: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	s := newStore(t, pgtest.NewPool(t, dbURL), mustParse(t, l1+",*"+l2), nil, 0)

	// Interrupted after the first batch…
	cctx, cancel := context.WithCancel(ctx)
	res, err := s.Rewrap(cctx, vault.RewrapOptions{Batch: 5, Wait: 200 * time.Millisecond,
		Progress: func(vault.RewrapResult) { cancel() }})
	if !errors.Is(err, context.Canceled) || res.Rewrapped == 0 || res.Rewrapped >= 12 {
		t.Fatalf("interrupted run: %+v %v", res, err)
	}
	first := res.Rewrapped
	// …and resumed: only what is left is done; rows under a key the keyring
	// lacks are reported, not lost.
	res, err = s.Rewrap(ctx, vault.RewrapOptions{Batch: 5, Wait: 200 * time.Millisecond})
	if !errors.Is(err, vault.ErrRewrapIncomplete) || first+res.Rewrapped != 12 || len(res.Failed) != 2 || res.Remaining != 2 {
		t.Fatalf("resumed run: %+v %v", res, err)
	}
	st, err := s.KeyStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []vault.KeyCount{
		{KeyVersion: 2, Status: vault.StatusActive, Rows: 12, Primary: true, InKeyring: true},
		{KeyVersion: 3, Status: vault.StatusActive, Rows: 2, Primary: false, InKeyring: false},
	}
	if fmt.Sprint(st) != fmt.Sprint(want) {
		t.Fatalf("status %+v", st)
	}
}
