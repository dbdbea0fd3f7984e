package db_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/internal/pgtest"
)

// TestDeadlines: a request's acquire and statements are bounded, work that
// is not a request is not, and a request that would queue behind
// MaxWaiting others is refused at once — each against a real Postgres.
func TestDeadlines(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPoolWith(t, pgtest.URL(t), func(pc *pgxpool.Config) { pc.MaxConns = 1 })
	bg := context.Background()
	req := db.WithDeadlines(bg, db.Deadlines{Acquire: 200 * time.Millisecond, Query: 300 * time.Millisecond, MaxWaiting: 2})

	t.Run("a statement past its deadline fails as unavailable", func(t *testing.T) {
		_, err := pool.Exec(req, "SELECT pg_sleep(5)")
		if !db.Unavailable(err) {
			t.Fatalf("slow statement: %v (unavailable %t)", err, db.Unavailable(err))
		}
	})
	t.Run("work that is not a request keeps its own deadline", func(t *testing.T) {
		if _, err := pool.Exec(bg, "SELECT pg_sleep(0.5)"); err != nil {
			t.Fatalf("unmarked statement: %v", err)
		}
		if _, err := pool.Exec(db.Without(req), "SELECT pg_sleep(0.5)"); err != nil {
			t.Fatalf("statement of a context without deadlines: %v", err)
		}
	})
	t.Run("a transaction's statements are each bounded", func(t *testing.T) {
		tx, err := pool.Begin(req)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(bg)
		if _, err := tx.Exec(req, "SELECT pg_sleep(0.1)"); err != nil {
			t.Fatalf("quick statement in a transaction: %v", err)
		}
		if _, err := tx.Exec(req, "SELECT pg_sleep(5)"); !db.Unavailable(err) {
			t.Fatalf("slow statement in a transaction: %v", err)
		}
	})

	// The one connection is taken: a request waits Acquire, then gives up.
	held, err := pool.Acquire(bg)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("acquire past its deadline fails as unavailable", func(t *testing.T) {
		start := time.Now()
		_, err := pool.Exec(req, "SELECT 1")
		if !db.Unavailable(err) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("acquire on a full pool: %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("acquire gave up after %s", d)
		}
	})
	t.Run("past MaxWaiting an acquire is refused at once", func(t *testing.T) {
		long := db.WithDeadlines(bg, db.Deadlines{Acquire: time.Minute, MaxWaiting: 2})
		errs := make(chan error, 2)
		for range 2 {
			go func() { _, err := pool.Exec(long, "SELECT 1"); errs <- err }()
		}
		for db.Waiting(pool) < 2 {
			time.Sleep(5 * time.Millisecond)
		}
		before := db.Shed(pool)
		_, err := pool.Exec(long, "SELECT 1")
		if !db.Unavailable(err) || db.Shed(pool) != before+1 {
			t.Fatalf("third waiter: %v (shed %d → %d)", err, before, db.Shed(pool))
		}
		held.Release() // the two waiters get the connection in turn
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("waiter: %v", err)
			}
		}
		if n := db.Waiting(pool); n != 0 {
			t.Fatalf("%d still counted as waiting", n)
		}
	})
}

func TestUnavailable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{fmt.Errorf("wrapped: %w", context.Canceled), false},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("vault: read connection: %w", context.DeadlineExceeded), true},
		{&pgconn.PgError{Code: "57P01"}, true},  // admin_shutdown
		{&pgconn.PgError{Code: "57P03"}, true},  // cannot_connect_now
		{&pgconn.PgError{Code: "08006"}, true},  // connection_failure
		{&pgconn.PgError{Code: "53300"}, true},  // too_many_connections
		{&pgconn.PgError{Code: "23505"}, false}, // unique_violation: a bug or a race, not an outage
		{&pgconn.PgError{Code: "22021"}, false}, // bad input
		{errors.New("something else"), false},
	} {
		if got := db.Unavailable(tc.err); got != tc.want {
			t.Errorf("Unavailable(%v) = %t, want %t", tc.err, got, tc.want)
		}
	}
}

// TestUnreachable: a database that is not there (nothing listens) is
// unavailable, not a bug.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	p, url := pgtest.NewProxy(t, pgtest.URL(t))
	pool := pgtest.NewPool(t, url)
	req := db.WithDeadlines(context.Background(), db.Deadlines{Acquire: time.Second, Query: time.Second})
	if _, err := pool.Exec(req, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	_, err := pool.Exec(req, "SELECT 1")
	if !db.Unavailable(err) {
		t.Fatalf("cut: %v", err)
	}
	p.Restore()
	p.Freeze()
	start := time.Now()
	_, err = pool.Exec(req, "SELECT 1")
	if !db.Unavailable(err) || time.Since(start) > 10*time.Second {
		t.Fatalf("frozen: %v after %s", err, time.Since(start))
	}
	p.Restore()
	if _, err := pool.Exec(req, "SELECT 1"); err != nil {
		t.Fatalf("after the fault: %v", err)
	}
}
