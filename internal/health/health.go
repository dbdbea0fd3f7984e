// Package health answers the liveness and readiness probes. Readiness means the
// database answers and its schema is at the version this binary expects; it
// never reports more than a short machine-readable reason.
package health

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/migrations"
)

// Checker serves /healthz and /readyz.
type Checker struct {
	pool    *pgxpool.Pool
	db      *sql.DB
	logger  *slog.Logger
	timeout time.Duration
}

// New returns a Checker over pool. timeout bounds each readiness check.
func New(pool *pgxpool.Pool, logger *slog.Logger, timeout time.Duration) *Checker {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	return &Checker{pool: pool, db: stdlib.OpenDBFromPool(pool), logger: logger, timeout: timeout}
}

// Close releases the database/sql wrapper (not the pool).
func (c *Checker) Close() error { return c.db.Close() }

type status struct {
	Status   string `json:"status"`
	Reason   string `json:"reason,omitempty"`
	Current  *int64 `json:"schema_version,omitempty"`
	Expected *int64 `json:"expected_schema_version,omitempty"`
}

// Healthz reports that the process is alive; it touches nothing else.
func (c *Checker) Healthz(w http.ResponseWriter, r *http.Request) {
	web.WriteJSON(w, http.StatusOK, status{Status: "ok"})
}

// Readyz reports 200 when the database is reachable and fully migrated, else 503
// with a reason: "database_unreachable", "pool_exhausted" (the database may
// be fine, but every pooled connection is taken and none came free within
// the check's timeout) or "schema_outdated". Each is said only when true: a
// check that timed out is never taken for an old schema.
func (c *Checker) Readyz(w http.ResponseWriter, r *http.Request) {
	// The check's own timeout, not a request's database deadlines.
	ctx, cancel := context.WithTimeout(db.Without(r.Context()), c.timeout)
	defer cancel()
	if err := c.pool.Ping(ctx); err != nil {
		c.unavailable(ctx, w, err)
		return
	}
	p, err := migrations.NewProvider(c.db)
	if err != nil {
		c.logger.ErrorContext(ctx, "readiness: migrations", slog.Any("error", err))
		web.WriteJSON(w, http.StatusServiceUnavailable, status{Status: "unavailable", Reason: "migrations_invalid"})
		return
	}
	current, target, err := p.GetVersions(ctx)
	if err != nil {
		// No version table yet counts as outdated; a database that cannot
		// answer says so.
		if db.Unavailable(err) || ctx.Err() != nil {
			c.unavailable(ctx, w, err)
			return
		}
		c.logger.WarnContext(ctx, "readiness: schema version", slog.Any("error", err))
		web.WriteJSON(w, http.StatusServiceUnavailable, status{Status: "unavailable", Reason: "schema_outdated", Expected: &target})
		return
	}
	// A newer schema (a newer replica migrated during a rolling upgrade) is fine:
	// migrations are written to stay compatible with the previous release.
	if current < target {
		web.WriteJSON(w, http.StatusServiceUnavailable, status{Status: "unavailable", Reason: "schema_outdated",
			Current: &current, Expected: &target})
		return
	}
	web.WriteJSON(w, http.StatusOK, status{Status: "ready", Current: &current})
}

// unavailable answers a check that could not reach the database: the pool
// had no connection to give (every one taken) or the database did not
// answer.
func (c *Checker) unavailable(ctx context.Context, w http.ResponseWriter, err error) {
	reason := "database_unreachable"
	if st := c.pool.Stat(); errors.Is(err, context.DeadlineExceeded) && st.AcquiredConns() >= st.MaxConns() {
		reason = "pool_exhausted"
	}
	c.logger.WarnContext(ctx, "readiness: database unavailable", slog.String("reason", reason), slog.Any("error", err))
	web.WriteJSON(w, http.StatusServiceUnavailable, status{Status: "unavailable", Reason: reason})
}
