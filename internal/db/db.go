// Package db owns connectd's rules for using Postgres while it misbehaves:
// every pool acquire and every statement made on behalf of a request has a
// deadline; a request waits for a pooled connection while the pool can
// still serve it within that deadline and is refused at once only when it
// cannot (admission by deadline, admission.go), with a cap on the number
// waiting that bounds memory; a pooled connection the server has closed is
// never handed out, and a read that fails on one that died under it is
// tried once more on a live one (live.go); and one function (Unavailable)
// says whether an error means "the database cannot serve now" — answered
// 503 database_unavailable with Retry-After — rather than a bug.
//
// The deadlines ride on the request's context (WithDeadlines, applied to
// every request by package web), and a tracer installed on the pool
// (Configure) applies them: no caller has to remember a timeout, and work
// that is not a request (migrations, River's jobs, sweeps, the CLI) keeps
// the deadlines of its own context.
//
// With tracing on, the same hooks make a span for each statement under a
// traced request or job (trace.go): never with a parameter's value.
//
// It must never import another connectd package, and never log: it only
// bounds, classifies and traces.
package db

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"
)

// Deadlines bound the database work of one request. A zero field takes its
// default.
type Deadlines struct {
	// Acquire bounds the wait for a pooled connection (default 2s).
	Acquire time.Duration
	// Query bounds one statement, begin and commit included (default 5s).
	Query time.Duration
	// MaxWaiting bounds how many requests of this process may wait for a
	// pooled connection at once, a bound on memory (admission.go): one more
	// is refused at once. 0 derives it from the pool and Acquire
	// (MaxWaitingFor); negative: no bound.
	MaxWaiting int
}

// Defaults of Deadlines. DefaultMaxWaiting, 0, means MaxWaitingFor the
// pool's size and the acquire deadline.
const (
	DefaultAcquire    = 2 * time.Second
	DefaultQuery      = 5 * time.Second
	DefaultMaxWaiting = 0
)

func (d Deadlines) withDefaults() Deadlines {
	if d.Acquire <= 0 {
		d.Acquire = DefaultAcquire
	}
	if d.Query <= 0 {
		d.Query = DefaultQuery
	}
	return d
}

type deadlinesKey struct{}

// WithDeadlines returns ctx carrying d: every acquire and statement made
// with it (or a context derived from it, detached ones included) on a pool
// set up by Configure is bounded by d.
func WithDeadlines(ctx context.Context, d Deadlines) context.Context {
	d = d.withDefaults()
	return context.WithValue(ctx, deadlinesKey{}, d)
}

// Without returns ctx without the deadlines WithDeadlines put on it: for
// the rare request that starts work bounded some other way.
func Without(ctx context.Context) context.Context {
	return context.WithValue(ctx, deadlinesKey{}, nil)
}

func deadlinesOf(ctx context.Context) (Deadlines, bool) {
	d, ok := ctx.Value(deadlinesKey{}).(Deadlines)
	return d, ok
}

// ErrShed is the cause of an acquire refused at once: the pool could not
// serve it within its deadline, or MaxWaiting requests were already waiting.
var ErrShed = errors.New("db: no database connection within the request's deadline")

// Configure installs the deadline tracer on pc, and the checks that keep a
// connection the server closed from being handed out (live.go). Every pool
// connectd opens (the server's, the CLI's, the tests') is configured by it.
func Configure(pc *pgxpool.Config) {
	t := &tracer{}
	pc.ConnConfig.Tracer = t
	pc.PrepareConn = prepareConn
	pc.ShouldPing = t.shouldPing
}

// Waiting reports how many requests wait for a pooled connection of pool
// now (0 for a pool Configure did not set up), for metrics.
func Waiting(pool *pgxpool.Pool) int64 {
	if t, ok := pool.Config().ConnConfig.Tracer.(*tracer); ok {
		return t.waiting.Load()
	}
	return 0
}

// Shed reports how many acquires of pool were refused at once since start
// (their deadline could not be met, or MaxWaiting).
func Shed(pool *pgxpool.Pool) uint64 {
	if t, ok := pool.Config().ConnConfig.Tracer.(*tracer); ok {
		return t.shed.Load()
	}
	return 0
}

// tracer applies the context's Deadlines. pgx hands the context a Start hook
// returns to everything that follows and to the matching End hook, so the
// deadline covers exactly one acquire or one statement, and End releases its
// timer.
type tracer struct {
	waiting atomic.Int64
	shed    atomic.Uint64
	admission
	live
}

type span struct {
	cancel  context.CancelFunc
	counted bool
	request bool // an acquire under a request's deadlines: its hold is sampled
}

type spanKey struct{}

func end(ctx context.Context, t *tracer) {
	if s, ok := ctx.Value(spanKey{}).(*span); ok {
		s.cancel()
		if s.counted {
			t.waiting.Add(-1)
		}
	}
}

func (t *tracer) TraceAcquireStart(ctx context.Context, pool *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	d, ok := deadlinesOf(ctx)
	if !ok {
		return ctx
	}
	s := &span{counted: true, request: true}
	n := t.waiting.Add(1)
	if !t.admit(pool, ctx, d, n) {
		// An acquire whose context is already over fails at once, with
		// nothing queued: the same answer a timeout would give later.
		t.shed.Add(1)
		var c context.Context
		c, s.cancel = context.WithDeadlineCause(ctx, time.Time{}, ErrShed)
		return context.WithValue(c, spanKey{}, s)
	}
	var c context.Context
	c, s.cancel = context.WithTimeout(ctx, d.Acquire)
	return context.WithValue(c, spanKey{}, s)
}

func (t *tracer) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, d pgxpool.TraceAcquireEndData) {
	if s, ok := ctx.Value(spanKey{}).(*span); ok && s.request && d.Conn != nil {
		t.acquired(d.Conn)
	}
	end(ctx, t)
}

func (t *tracer) TraceRelease(_ *pgxpool.Pool, d pgxpool.TraceReleaseData) {
	t.released(d.Conn)
	if d.Conn.IsClosed() {
		t.lost()
	}
}

func (t *tracer) statement(ctx context.Context) context.Context {
	d, ok := deadlinesOf(ctx)
	if !ok {
		return ctx
	}
	s := &span{}
	var c context.Context
	c, s.cancel = context.WithTimeout(ctx, d.Query)
	return context.WithValue(c, spanKey{}, s)
}

// The statement hooks also make the statement's span (trace.go) when the
// context is traced: the span is started first, so the deadline's context
// lies under it and End finds both.

func (t *tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return t.statement(startSpan(ctx, "", d.SQL))
}

func (t *tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	end(ctx, t)
	endSpan(ctx, d.Err)
}

func (t *tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return t.statement(startSpan(ctx, "batch", ""))
}

func (t *tracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (t *tracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchEndData) {
	end(ctx, t)
	endSpan(ctx, d.Err)
}

func (t *tracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	return t.statement(startSpan(ctx, "copy", ""))
}

func (t *tracer) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceCopyFromEndData) {
	end(ctx, t)
	endSpan(ctx, d.Err)
}

// Unavailable reports whether err means the database cannot serve now — it
// is unreachable, restarting, out of connections, too slow for the
// request's deadline, or this process has too many requests waiting — as
// opposed to a mistake in a query or its data. The answer to such an error
// is 503 with Retry-After; a caller that went away (context.Canceled) is not
// one.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return unavailableCode(pe.Code)
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err), errors.As(err, &ce),
		errors.Is(err, puddle.ErrClosedPool), errors.Is(err, net.ErrClosed),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.As(err, &ne):
		return true
	}
	// pgconn marks the failures that happened before anything was sent
	// (a dead connection found on first write, say).
	return pgconn.SafeToRetry(err)
}

// unavailableCode: SQLSTATEs that say the server cannot serve now rather
// than that the statement is wrong.
func unavailableCode(code string) bool {
	if len(code) == 5 && code[:2] == "08" { // connection exception
		return true
	}
	switch code {
	case "57P01", // admin_shutdown
		"57P02", // crash_shutdown
		"57P03", // cannot_connect_now (starting up, recovering)
		"57014", // query_canceled (statement_timeout)
		"55P03", // lock_not_available (lock_timeout)
		"53300", // too_many_connections
		"53400", // configuration_limit_exceeded
		"25006": // read_only_sql_transaction (connected to a standby after a failover)
		return true
	}
	return false
}
