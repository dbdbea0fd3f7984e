// Package keepalive is the connection health job: for providers whose
// refresh tokens lapse when unused (a template's refresh_idle_lifetime), it
// refreshes the connections nobody has used for half that time, so they stay
// usable without traffic; a provider that refuses marks the connection
// reauthorization_required, and its clients hear of it once
// (connection.reauthorization_required, through vault.Config.OnReauth).
//
// River runs it periodically, on one replica at a time (its leader); each
// refresh goes through the vault under the connection's row lock and skips a
// connection refreshed since it was picked, so it holds to refresh-once
// however many replicas run it at once.
//
// It covers every organization (issue 34): the vault's Idle is per
// organization, so each run lists the organizations (org.Store.List) and
// renews each one's idle connections through the vault's handle on it,
// whose refresh uses the app the connection was obtained with. Batch bounds
// each (organization, provider).
package keepalive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/vault"
)

// Args is the periodic job.
type Args struct{}

// Kind names the job in River.
func (Args) Kind() string { return "connection_health" }

// Worker runs the job.
type Worker struct {
	river.WorkerDefaults[Args]
	vault   *vault.Store
	orgs    *org.Store
	catalog *provider.Catalog
	logger  *slog.Logger
	now     func() time.Time
	// Batch bounds the connections renewed per organization, provider and
	// run (default 500); the rest wait for the next run, the longest idle
	// first.
	Batch int
}

// NewWorker returns the job's worker, renewing the connections of every
// organization orgs lists.
func NewWorker(v *vault.Store, orgs *org.Store, c *provider.Catalog, logger *slog.Logger, now func() time.Time) *Worker {
	if now == nil {
		now = time.Now
	}
	return &Worker{vault: v, orgs: orgs, catalog: c, logger: logger, now: now, Batch: 500}
}

// Timeout lets one run take its time: every refresh is bounded by the
// vault's provider timeout.
func (w *Worker) Timeout(*river.Job[Args]) time.Duration { return 30 * time.Minute }

// Work renews, in every organization and for each provider whose refresh
// tokens lapse, the connections idle for half the provider's idle lifetime.
func (w *Worker) Work(ctx context.Context, _ *river.Job[Args]) error {
	orgs, err := w.orgs.List(ctx)
	if err != nil {
		return fmt.Errorf("keepalive: %w", err)
	}
	for _, o := range orgs {
		if err := w.renewIn(ctx, w.vault.In(o.ID)); err != nil {
			return err
		}
	}
	return nil
}

// renewIn renews the idle connections of v's organization.
func (w *Worker) renewIn(ctx context.Context, v *vault.Store) error {
	for _, name := range w.catalog.Names() {
		p, err := w.catalog.Get(name)
		if err != nil {
			continue
		}
		life := p.Info().RefreshIdleLifetime
		if life <= 0 {
			continue
		}
		idleSince := w.now().Add(-life / 2)
		idle, err := v.Idle(ctx, name, idleSince, w.Batch)
		if err != nil {
			return fmt.Errorf("keepalive: %w", err)
		}
		var renewed, refused, failed int
		for _, c := range idle {
			if ctx.Err() != nil {
				return ctx.Err() // stopping: the rest waits for the next run
			}
			switch err := v.Renew(ctx, c.User, name, c.ID, idleSince); {
			case err == nil:
				renewed++
			case errors.Is(err, vault.ErrReauthorizationRequired):
				refused++
			default:
				failed++ // provider_unavailable and the like: on record, tried again next run
			}
		}
		if len(idle) > 0 {
			w.logger.InfoContext(ctx, "connection health: idle connections renewed", slog.String("org", v.Org()),
				slog.String("provider", name),
				slog.Int("idle", len(idle)), slog.Int("renewed", renewed), slog.Int("refused", refused),
				slog.Int("failed", failed))
		}
	}
	return nil
}
