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
)

// Dead pooled connections. When Postgres restarts, or a backend is
// terminated (pg_terminate_backend, an idle timeout, a failover), the
// server sends a FATAL error on each connection it ends and closes it; a
// connection idle in the pool has not read that yet. Handed out as it is,
// its next statement fails, and the request with it: 15 of 4,069 token
// reads over four restarts did so (issue 35).
//
// Two rules keep that from reaching a request:
//
//   - Before a pooled connection is handed out (PrepareConn), its socket is
//     peeked without waiting: an idle connection has nothing to read, so
//     anything there — the server's FATAL, or its close — means the server
//     has ended it, and it is destroyed and another taken (a new one when
//     none is left). One non-blocking system call per acquire.
//   - A read that failed because its connection died under it — after the
//     peek, before any byte of its answer (Read) — is run once more, on a
//     connection pinged first. Only reads: a statement that changes
//     something may have been executed before its connection died, and
//     running it again would do it twice.
//
// Besides, a connection released before the pool last saw one of its
// connections closed (a restart ends them all) is pinged before it is
// handed out, as pgxpool pings one idle for more than a second: that finds
// the dead ones whose close has not arrived yet (a network that dropped
// them), at the cost of a round trip after each loss.

// live is the tracer's state for the rules above.
type live struct {
	lostAt atomic.Int64 // when a pooled connection was last found closed, since epoch (0: never)
}

// lost notes that a pooled connection was found closed.
func (l *live) lost() { l.lostAt.Store(int64(time.Since(epoch))) }

type retryKey struct{}

// shouldPing is the pool's ShouldPing: pgxpool's own rule (idle for more
// than a second), a retry of Read, and a connection released before the
// last loss.
func (l *live) shouldPing(ctx context.Context, p pgxpool.ShouldPingParams) bool {
	if p.IdleDuration > time.Second || ctx.Value(retryKey{}) != nil {
		return true
	}
	at := l.lostAt.Load()
	return at != 0 && p.IdleDuration > time.Since(epoch)-time.Duration(at)
}

// prepareConn is the pool's PrepareConn: a connection the server has ended
// is destroyed, not handed out.
func prepareConn(_ context.Context, c *pgx.Conn) (bool, error) {
	return !endedByServer(c.PgConn().Conn()), nil
}

// Read runs read, which must change nothing (SELECTs), and once more when
// it failed because its connection died before it answered (ConnLost),
// its context still live. read must hand no row to anyone before it
// returns — QueryRow and Scan, or rows collected whole — so that what the
// second run returns is all its caller sees.
func Read(ctx context.Context, read func(context.Context) error) error {
	err := read(ctx)
	if err == nil || !ConnLost(err) || ctx.Err() != nil {
		return err
	}
	return read(context.WithValue(ctx, retryKey{}, true))
}

// ConnLost reports whether err says the connection a statement was sent
// on died under it: the server ended the session (admin or crash
// shutdown, a connection exception), or the connection was closed, reset
// or found closed before anything was sent. Not a timeout (the database
// may be frozen: trying again would double the wait), not a failure to
// connect (there is no database to try again on), not a statement's error.
func ConnLost(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "57P01" || pe.Code == "57P02" || (len(pe.Code) == 5 && pe.Code[:2] == "08")
	}
	return pgconn.SafeToRetry(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
