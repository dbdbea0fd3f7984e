package approval_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/approval"
	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/pgtest"
)

// store is an approval Store on pool, its standing-grant cache fed by a
// listener of its own, with alice's connection cn_alice for client cli_a.
func store(t *testing.T, pool *pgxpool.Pool) *approval.Store {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO clients (id, name, resources, providers, created_at, org_id) VALUES ('cli_a', 'alpha', '{https://mcp.example/a}', '{fake}', now(), 'default')`,
		`INSERT INTO connections (id, issuer, subject, provider, key_version, ciphertext, org_id) VALUES ('cn_alice', 'https://idp', 'alice', 'fake', 1, '\x00', 'default')`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	logger := slog.New(slog.DiscardHandler)
	els, err := elicitation.New(elicitation.Config{Pool: pool, Logger: logger, Hub: cache.NewHub(pool.Config().ConnConfig, logger)})
	if err != nil {
		t.Fatal(err)
	}
	k, err := keyring.New(map[uint32][]byte{1: make([]byte, 32)}, 1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := approval.New(approval.Config{Pool: pool, Elicitations: els, Keyring: k, TTL: 10 * time.Minute, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	pgtest.Listen(t, pool, s.CacheSubscriber())
	return s
}

func call(body string) *approval.Call {
	rule, _ := clientauth.ParseRule(`POST /issues ask:1h "open issues"`)
	return &approval.Call{ClientID: "cli_a", User: identity.User{Issuer: "https://idp", Subject: "alice"}, Provider: "fake",
		ConnectionID: "cn_alice", Rule: rule, Method: "POST", Path: "/issues", Body: []byte(body)}
}

// decided asks c and answers d.
func decided(t *testing.T, s *approval.Store, c *approval.Call, d approval.Decision) {
	t.Helper()
	r := httptest.NewRequest("POST", "/", nil)
	e, created, err := s.Ask(r, c)
	if err != nil || !created {
		t.Fatalf("ask: %v %v", created, err)
	}
	if ok, err := s.Decide(r, e, "default", d); err != nil || !ok {
		t.Fatalf("decide: %v %v", ok, err)
	}
}

// TestStandingNeedsNoDatabase (issue 36, performance): a call under a
// standing approval is answered from memory on a warm path — with the
// database gone — while a single approval is always a database round trip.
func TestStandingNeedsNoDatabase(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	pool := pgtest.NewPool(t, url)
	s := store(t, pool)
	ctx := context.Background()
	decided(t, s, call(`{"n":1}`), approval.Standing)
	if ok, err := s.Allowed(ctx, call(`{"n":2}`)); err != nil || !ok {
		t.Fatalf("under the standing approval: %v %v", ok, err)
	}
	pool.Close() // no database from here on
	for _, b := range []string{`{"n":3}`, `{"n":4}`} {
		if ok, err := s.Allowed(ctx, call(b)); err != nil || !ok {
			t.Fatalf("warm, without the database: %v %v", ok, err)
		}
	}
	other := call(`{}`)
	other.Rule.Pattern = "/other"
	if _, err := s.Allowed(ctx, other); err == nil {
		t.Fatal("another rule was answered without the database")
	}
}

// TestOnceIsOnce (issue 36): a single approval passes exactly its call,
// once, however many racers ask on however many Stores (replicas).
func TestOnceIsOnce(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := store(t, pgtest.NewPool(t, url))
	other := func() *approval.Store {
		logger := slog.New(slog.DiscardHandler)
		pool := pgtest.NewPool(t, url)
		els, _ := elicitation.New(elicitation.Config{Pool: pool, Logger: logger, Hub: cache.NewHub(pool.Config().ConnConfig, logger)})
		k, _ := keyring.New(map[uint32][]byte{1: make([]byte, 32)}, 1)
		s, err := approval.New(approval.Config{Pool: pool, Elicitations: els, Keyring: k, TTL: 10 * time.Minute, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}()
	ctx := context.Background()
	decided(t, s, call(`{"n":1}`), approval.Once)
	if ok, err := s.Allowed(ctx, call(`{"n":2}`)); err != nil || ok {
		t.Fatalf("another body passed: %v %v", ok, err)
	}
	var mu sync.Mutex
	passed := 0
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := s
			if i%2 == 1 {
				st = other
			}
			ok, err := st.Allowed(ctx, call(`{"n":1}`))
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				passed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if passed != 1 {
		t.Fatalf("one approval passed %d calls", passed)
	}
}

// TestAskSeesAnAnswerGivenMeanwhile (issue 36): the user's answer to an
// earlier link for exactly this call, committed after the caller's Allowed,
// is seen by Ask, which then asks nothing — no link, no approval row, so no
// approval.requested webhook for a link nobody would see (it used to be
// created, sent, then deleted) — and the grant is still there for Allowed.
// A standing grant of the rule given meanwhile counts the same way.
func TestAskSeesAnAnswerGivenMeanwhile(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	s := store(t, pool)
	ctx := context.Background()
	r := httptest.NewRequest("POST", "/", nil)
	count := func() (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM elicitations WHERE kind = 'approval'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	decided(t, s, call(`{"n":1}`), approval.Once) // the caller's Allowed came before this answer
	before := count()
	if _, _, err := s.Ask(r, call(`{"n":1}`)); !errors.Is(err, approval.ErrAllowed) {
		t.Fatalf("Ask after the answer: %v, want ErrAllowed", err)
	}
	if n := count(); n != before {
		t.Fatalf("%d approval links after Ask, want %d: one was asked of a call the user had allowed", n, before)
	}
	if ok, err := s.Allowed(ctx, call(`{"n":1}`)); err != nil || !ok {
		t.Fatalf("the grant Ask saw: %v %v", ok, err)
	}
	// Used up: the same call is asked again.
	if _, created, err := s.Ask(r, call(`{"n":1}`)); err != nil || !created {
		t.Fatalf("Ask after the grant was used: %v %v", created, err)
	}
	// Another body: a single grant does not cover it, a standing one does.
	if _, created, err := s.Ask(r, call(`{"n":2}`)); err != nil || !created {
		t.Fatalf("Ask for another body: %v %v", created, err)
	}
	decided(t, s, call(`{"n":3}`), approval.Standing)
	if _, _, err := s.Ask(r, call(`{"n":4}`)); !errors.Is(err, approval.ErrAllowed) {
		t.Fatalf("Ask under a standing grant: %v, want ErrAllowed", err)
	}
}
