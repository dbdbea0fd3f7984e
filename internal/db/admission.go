package db

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Admission by deadline. A request waits for a pooled connection while the
// pool can still hand it one within its acquire deadline, and is refused at
// once (ErrShed: 503 database_unavailable with Retry-After) only when it
// cannot: when the requests already waiting ahead of it, served MaxConns at
// a time, would take longer than its deadline at the pool's recent hold
// time — how long a request keeps a connection, acquire to release, as a
// moving average of the last few dozen. So a burst the database serves in
// time waits for it (256 callers on a pool of 20 holding a connection for
// 3 ms each wait about 40 ms, and none is refused), and a pool whose holds
// have grown (a slow or frozen database: a stuck statement's hold ends at
// its deadline) refuses at once the requests that would only time out
// later.
//
// The count of waiters is capped too, but only as a bound on memory
// (MaxWaitingFor): a waiting request holds its goroutine, its HTTP
// connection's buffers and its request, about 20 KB.

// typicalHold is the hold MaxWaitingFor sizes the waiter cap for: ten times
// the longest average hold the bench measured on its busiest level (about
// 4 ms at 256 callers with the credential cache off, the pool the
// bottleneck). Holds shorter than this serve more waiters within the
// deadline than the cap lets wait; the cap is then what refuses, as a bound
// on memory.
const typicalHold = 40 * time.Millisecond

// minMaxWaiting is the least waiter cap MaxWaitingFor derives.
const minMaxWaiting = 64

// maxSampledHold caps one hold sample, so that one request's long
// transaction cannot make the average refuse everyone for a while.
const maxSampledHold = DefaultQuery

// MaxWaitingFor is the waiter cap of a pool of maxConns connections under
// an acquire deadline of acquire when Deadlines.MaxWaiting is 0: as many as
// the pool serves within the deadline at typicalHold, maxConns × acquire ÷
// 40 ms (1000 for the default pool of 20 and 2 s), at least 64.
func MaxWaitingFor(maxConns int32, acquire time.Duration) int {
	return max(int(int64(maxConns)*int64(acquire)/int64(typicalHold)), minMaxWaiting)
}

// admission is the tracer's state for admit: the pool's size and its
// requests' average hold.
type admission struct {
	maxConns atomic.Int32 // the pool's MaxConns, read once
	hold     atomic.Int64 // moving average of requests' holds, ns (0: none yet)
}

// epoch makes the hold's timestamps monotonic.
var epoch = time.Now()

// heldSince is where a connection keeps when a request acquired it.
const heldSince = "connectd/db.heldSince"

// admit decides whether the acquire of a request, the n-th in the pool's
// acquire now, may wait for a connection.
func (a *admission) admit(pool *pgxpool.Pool, ctx context.Context, d Deadlines, n int64) bool {
	size := a.maxConns.Load()
	if size == 0 {
		size = max(pool.Config().MaxConns, 1) // a copy of the config: once
		a.maxConns.Store(size)
	}
	limit := d.MaxWaiting
	if limit == 0 {
		limit = MaxWaitingFor(size, d.Acquire)
	}
	if limit > 0 && n > int64(limit) {
		return false
	}
	hold := a.hold.Load()
	if hold == 0 || n <= int64(size) {
		return true
	}
	budget := d.Acquire
	if dl, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(dl))
	}
	// The n-1 ahead of it leave maxConns at a time, one hold apart.
	return time.Duration(hold*(n-1)/int64(size)) <= budget
}

// acquired notes when a request took c.
func (a *admission) acquired(c *pgx.Conn) {
	m := c.PgConn().CustomData()
	at, _ := m[heldSince].(*int64)
	if at == nil {
		at = new(int64)
		m[heldSince] = at
	}
	*at = int64(time.Since(epoch))
}

// released samples the hold of c if a request acquired it.
func (a *admission) released(c *pgx.Conn) {
	at, _ := c.PgConn().CustomData()[heldSince].(*int64)
	if at == nil || *at == 0 {
		return
	}
	sample := min(int64(time.Since(epoch))-*at, int64(maxSampledHold))
	*at = 0
	// An average over about the last 16 holds; concurrent updates may lose
	// a sample, which an average can spare.
	old := a.hold.Load()
	if old == 0 {
		a.hold.Store(max(sample, 1))
		return
	}
	a.hold.Store(max(old+(sample-old)/16, 1))
}

// Hold reports the pool's recent average hold of a connection by a request
// (0 before any), for metrics and tests.
func Hold(pool *pgxpool.Pool) time.Duration {
	if t, ok := pool.Config().ConnConfig.Tracer.(*tracer); ok {
		return time.Duration(t.hold.Load())
	}
	return 0
}
