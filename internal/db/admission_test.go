package db_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/internal/pgtest"
)

// TestNoShedWithinDeadline is the bench's 256 callers on one pool (issue
// 35): a burst the pool serves well within the acquire deadline waits for
// it, and none of it is refused — a count of 64 waiters refused 190 of them.
func TestNoShedWithinDeadline(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPoolWith(t, pgtest.URL(t), func(pc *pgxpool.Config) { pc.MaxConns = 4 })
	req := db.WithDeadlines(context.Background(), db.Deadlines{Acquire: 10 * time.Second})
	const callers = 256
	var failed atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range callers {
		wg.Go(func() {
			<-start
			for range 4 {
				var one int
				if err := pool.QueryRow(req, "SELECT 1").Scan(&one); err != nil {
					failed.Add(1)
					once.Do(func() { first = err })
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d reads failed (%d shed), the first: %v", n, callers*4, db.Shed(pool), first)
	}
	if db.Hold(pool) == 0 {
		t.Fatal("no hold sampled")
	}
}

// TestShedWhenDeadlineCannotBeMet: a request that would wait behind more
// holds than its deadline lasts is refused at once, and one that can be
// served in time waits.
func TestShedWhenDeadlineCannotBeMet(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPoolWith(t, pgtest.URL(t), func(pc *pgxpool.Config) { pc.MaxConns = 1 })
	bg := context.Background()
	// One request holding its connection for half a second sets the
	// pool's hold (the first sample is taken whole).
	if _, err := pool.Exec(db.WithDeadlines(bg, db.Deadlines{}), "SELECT pg_sleep(0.5)"); err != nil {
		t.Fatal(err)
	}
	if h := db.Hold(pool); h < 500*time.Millisecond || h > 1500*time.Millisecond {
		t.Fatalf("hold %s after one statement of 0.5 s", h)
	}
	held, err := pool.Acquire(bg) // not a request's: not sampled
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release() // released below; here too if the test fails first
	// Waiting behind k others at a hold of about 0.5 s costs k × 0.5 s;
	// the deadline (2.4 s) covers 4 ahead, not 5.
	req := db.WithDeadlines(bg, db.Deadlines{Acquire: 2400 * time.Millisecond})
	errs := make(chan error, 5)
	for i := range 5 {
		go func() { _, err := pool.Exec(req, "SELECT 1"); errs <- err }()
		for db.Waiting(pool) < int64(i+1) {
			time.Sleep(time.Millisecond)
		}
	}
	if n := db.Shed(pool); n != 0 {
		t.Fatalf("%d of 5 waiters that could be served in time refused", n)
	}
	_, err = pool.Exec(req, "SELECT 1")
	if !db.Unavailable(err) || db.Shed(pool) != 1 {
		t.Fatalf("the sixth waiter: %v (shed %d), want refused at once", err, db.Shed(pool))
	}
	held.Release()
	for range 5 {
		if err := <-errs; err != nil {
			t.Fatalf("waiter: %v", err)
		}
	}
}

func TestMaxWaitingFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		conns   int32
		acquire time.Duration
		want    int
	}{
		{20, 2 * time.Second, 1000},
		{10, 2 * time.Second, 500},
		{2, 2 * time.Second, 100},
		{1, 100 * time.Millisecond, 64},
	} {
		if got := db.MaxWaitingFor(tc.conns, tc.acquire); got != tc.want {
			t.Errorf("MaxWaitingFor(%d, %s) = %d, want %d", tc.conns, tc.acquire, got, tc.want)
		}
	}
}

// TestDeadConnections: backends the server ended (pg_terminate_backend, as
// a restart does to all of them) under reads fail no read — idle ones are
// not handed out, and a read whose connection dies under it runs again.
func TestDeadConnections(t *testing.T) {
	t.Parallel()
	kill := pgtest.NewTerminator(t, pgtest.URL(t))
	pool := kill.Pool(t, 4)
	bg := context.Background()
	req := db.WithDeadlines(bg, db.Deadlines{Acquire: 5 * time.Second})
	read := func(ctx context.Context) error {
		var one int
		return pool.QueryRow(ctx, "SELECT 1").Scan(&one)
	}
	warm := func(t *testing.T) {
		t.Helper()
		var conns []*pgxpool.Conn
		for range 4 {
			c, err := pool.Acquire(bg)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			c.Release()
		}
	}

	t.Run("idle connections the server ended are not handed out", func(t *testing.T) {
		warm(t)
		if n := kill.Terminate(t, 4); n != 4 {
			t.Fatalf("terminated %d backends, want the pool's 4", n)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() { errs <- read(req) }) // a plain read: no retry
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("read after the backends were ended: %v", err)
			}
		}
	})
	t.Run("reads under terminations all answer", func(t *testing.T) {
		warm(t)
		// One backend at a time, whichever, every 20 ms: a read whose
		// connection is ended under it runs again on another. On two busy
		// cores the next termination may end that one too (a read and its
		// retry 6 ms apart, in one run of four); Read tries once more, not
		// twice, so that read fails, and is counted apart.
		var twice atomic.Int64
		got := kill.ReadsUnderTerminations(t, req, 8, 40, func(ctx context.Context) error {
			ended := 0 // tries whose connection was ended under them
			err := db.Read(ctx, func(ctx context.Context) error {
				err := read(ctx)
				if db.ConnLost(err) {
					ended++
				}
				return err
			})
			if ended == 2 { // its retry's connection was ended too
				twice.Add(1)
				return nil
			}
			return err
		})
		if got.Killed == 0 {
			t.Fatal("no backend was terminated under the reads")
		}
		if got.Failed > 0 {
			t.Fatalf("%d of %d reads failed over %d terminated backends, the first: %v", got.Failed, got.Reads, got.Killed, got.First)
		}
		// Bounded by the terminations, not by one: how often a retry lands
		// on the next backend to be ended is the machine's timing (2 of
		// 1578 over 38 in a loaded CI run); a dead connection handed out
		// again would fail most retries.
		if n := twice.Load(); n > int64(got.Killed/4) {
			t.Fatalf("%d of %d reads had their retry's connection ended too over %d terminated backends", n, got.Reads, got.Killed)
		}
		t.Logf("%d reads, %d backends terminated under them, none failed (%d ended twice)", got.Reads, got.Killed, twice.Load())
	})
}

func TestConnLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false}, // a frozen database: not again
		{fmt.Errorf("read: %w", &pgconn.PgError{Code: "57P01"}), true}, // terminated (restart, pg_terminate_backend)
		{&pgconn.PgError{Code: "57P02"}, true},                         // crash shutdown
		{&pgconn.PgError{Code: "08006"}, true},                         // connection failure
		{&pgconn.PgError{Code: "57P03"}, false},                        // starting up: another connection fails alike
		{&pgconn.PgError{Code: "23505"}, false},
		{&pgconn.PgError{Code: "57014"}, false}, // statement timeout
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{syscall.ECONNRESET, true},
		{&pgconn.ConnectError{}, false}, // no database to try again on
		{errors.New("something else"), false},
	} {
		if got := db.ConnLost(tc.err); got != tc.want {
			t.Errorf("ConnLost(%v) = %t, want %t", tc.err, got, tc.want)
		}
	}
}
