package pgtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Terminator ends backends for real (pg_terminate_backend, as a restart
// does to all of them: the server sends FATAL 57P01 and closes), from a
// connection of its own: those of the pools it made (Pool).
type Terminator struct {
	admin *pgxpool.Pool
	url   string
	app   string // the application_name of its pools' connections
}

// NewTerminator returns a Terminator of backends on dbURL.
func NewTerminator(t testing.TB, dbURL string) *Terminator {
	t.Helper()
	return &Terminator{admin: NewPool(t, dbURL), url: dbURL, app: fmt.Sprintf("pgtest-terminated-%d-%d", os.Getpid(), terminators.Add(1))}
}

var terminators atomic.Int64

// Pool is NewPool on the Terminator's database with at most conns
// connections, each of which Terminate may end.
func (k *Terminator) Pool(t testing.TB, conns int32) *pgxpool.Pool {
	t.Helper()
	return NewPoolWith(t, k.url, func(pc *pgxpool.Config) {
		pc.MaxConns = conns
		pc.ConnConfig.RuntimeParams["application_name"] = k.app
	})
}

// Terminate ends at most limit of the backends, whichever, and returns once
// they are gone (their FATAL and close were sent), with how many it ended.
func (k *Terminator) Terminate(t testing.TB, limit int) int {
	t.Helper()
	bg := context.Background()
	var pids []int32
	if err := k.admin.QueryRow(bg, `SELECT coalesce(array_agg(pid), '{}') FROM (SELECT pid FROM pg_stat_activity
		WHERE application_name = $1 ORDER BY random() LIMIT $2) s`, k.app, limit).Scan(&pids); err != nil {
		t.Fatal(err)
	}
	if _, err := k.admin.Exec(bg, `SELECT pg_terminate_backend(p) FROM unnest($1::int4[]) p`, pids); err != nil {
		t.Fatal(err)
	}
	for {
		var left int
		if err := k.admin.QueryRow(bg, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, pids).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			return len(pids)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Terminations is what ReadsUnderTerminations saw.
type Terminations struct {
	Reads, Failed, Killed int
	First                 error // the first failure
}

// ReadsUnderTerminations runs read from readers goroutines, over and over,
// while kills backends are ended one at a time, every 20 ms; a read that
// ends with its context (the run's end) is not a failure.
func (k *Terminator) ReadsUnderTerminations(t testing.TB, ctx context.Context, readers, kills int,
	read func(context.Context) error) Terminations {
	t.Helper()
	ctx, stop := context.WithCancel(ctx)
	var reads, failed atomic.Int64
	var mu sync.Mutex
	var out Terminations
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := read(ctx); err != nil && ctx.Err() == nil {
					failed.Add(1)
					mu.Lock()
					if out.First == nil {
						out.First = err
					}
					mu.Unlock()
				}
				reads.Add(1)
			}
		})
	}
	for range kills {
		time.Sleep(20 * time.Millisecond)
		out.Killed += k.Terminate(t, 1)
	}
	stop()
	wg.Wait()
	out.Reads, out.Failed = int(reads.Load()), int(failed.Load())
	return out
}

// Check fails t when no backend was ended, or when more than a quarter of
// the terminations failed a read: a read whose connection is ended under it
// runs once more (db.Read), but not twice, so one whose retry's connection
// is ended too fails (0–3 in 40 on two busy cores under -race), while
// without the retry about one read fails per termination. what names the
// reads.
func (r Terminations) Check(t testing.TB, what string) {
	t.Helper()
	if r.Killed == 0 {
		t.Fatal("no backend was terminated under the reads")
	}
	if r.Failed > r.Killed/4 {
		t.Fatalf("%d of %d %s failed over %d terminated backends, the first: %v", r.Failed, r.Reads, what, r.Killed, r.First)
	}
	t.Logf("%d %s, %d backends terminated under them, %d failed (the first: %v)", r.Reads, what, r.Killed, r.Failed, r.First)
}
