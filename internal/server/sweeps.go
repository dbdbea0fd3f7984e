package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/connectd/connectd/internal/admin"
	"github.com/connectd/connectd/internal/receipt"
)

// The periodic sweeps of the database run on River, like every other
// periodic job (DESIGN "Events and background work"): one replica does each
// run, whichever River's leader hands it to, instead of every replica on a
// ticker of its own. What each replica must do itself (writing the sampled
// audit counts it holds in memory) stays in api's Run.

// connectSweepArgs: expired elicitations, states, used request_state ids,
// browser sessions and spent client assertions (Server.sweepDatabase).
type connectSweepArgs struct{}

func (connectSweepArgs) Kind() string { return "connect_sweep" }

// auditSweepArgs: audit events past CONNECTD_AUDIT_RETENTION
// (admin.Store.SweepAudit).
type auditSweepArgs struct{}

func (auditSweepArgs) Kind() string { return "audit_retention" }

// receiptsSweepArgs: access receipts past CONNECTD_RECEIPTS_RETENTION
// (receipt.Sweep).
type receiptsSweepArgs struct{}

func (receiptsSweepArgs) Kind() string { return "receipts_retention" }

// accountsBackfillArgs: connections from before several accounts per
// provider whose display name (and account hash) the vault has not read yet
// (vault.Store.BackfillAccounts).
type accountsBackfillArgs struct{}

func (accountsBackfillArgs) Kind() string { return "accounts_backfill" }

// sweepWorker runs one sweep.
type sweepWorker[A river.JobArgs] struct {
	river.WorkerDefaults[A]
	sweep  func(ctx context.Context) (int64, error)
	what   string
	logger *slog.Logger
}

func (w *sweepWorker[A]) Timeout(*river.Job[A]) time.Duration { return 10 * time.Minute }

func (w *sweepWorker[A]) Work(ctx context.Context, _ *river.Job[A]) error {
	n, err := w.sweep(ctx)
	if err != nil {
		w.logger.WarnContext(ctx, "sweep failed", slog.String("sweep", w.what), slog.Any("error", err))
		return err
	}
	if n > 0 {
		w.logger.InfoContext(ctx, "sweep done", slog.String("sweep", w.what), slog.Int64("count", n))
	}
	return nil
}

// addSweeps registers the sweeps' workers and their periodic jobs.
func (s *Server) addSweeps(workers *river.Workers) []*river.PeriodicJob {
	logger := s.cfg.Logger
	river.AddWorker(workers, &sweepWorker[connectSweepArgs]{what: "connect", logger: logger,
		sweep: s.sweepDatabase})
	river.AddWorker(workers, &sweepWorker[auditSweepArgs]{what: "audit retention", logger: logger,
		sweep: s.sweepAudit})
	river.AddWorker(workers, &sweepWorker[receiptsSweepArgs]{what: "receipts retention", logger: logger,
		sweep: s.sweepReceipts})
	river.AddWorker(workers, &sweepWorker[accountsBackfillArgs]{what: "accounts backfill", logger: logger,
		sweep: s.backfillAccounts})
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(10*time.Minute),
			func() (river.JobArgs, *river.InsertOpts) { return accountsBackfillArgs{}, nil }, &river.PeriodicJobOpts{RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(time.Minute),
			func() (river.JobArgs, *river.InsertOpts) { return connectSweepArgs{}, nil }, &river.PeriodicJobOpts{RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
			func() (river.JobArgs, *river.InsertOpts) { return auditSweepArgs{}, nil }, &river.PeriodicJobOpts{RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
			func() (river.JobArgs, *river.InsertOpts) { return receiptsSweepArgs{}, nil }, &river.PeriodicJobOpts{RunOnStart: true}),
	}
}

// sweepAudit deletes the audit events past CONNECTD_AUDIT_RETENTION.
func (s *Server) sweepAudit(ctx context.Context) (int64, error) {
	retention := s.cfg.Admin.AuditRetention
	if retention <= 0 {
		retention = admin.DefaultRetention
	}
	return s.store.SweepAudit(ctx, retention)
}

// sweepReceipts deletes the access receipts past
// CONNECTD_RECEIPTS_RETENTION.
func (s *Server) sweepReceipts(ctx context.Context) (int64, error) {
	retention := s.cfg.Connect.ReceiptsRetention
	if retention <= 0 {
		retention = receipt.DefaultRetention
	}
	retention = min(retention, receipt.MaxRetention)
	now := time.Now
	if s.cfg.Now != nil {
		now = s.cfg.Now
	}
	return receipt.Sweep(ctx, s.cfg.Pool, now().Add(-retention))
}

// SweepReceipts runs the receipts retention sweep at once (tests; in
// service it is a periodic job).
func (s *Server) SweepReceipts(ctx context.Context) (int64, error) { return s.sweepReceipts(ctx) }

// backfillAccounts reads the display names of up to 500 connections from
// before several accounts per provider.
func (s *Server) backfillAccounts(ctx context.Context) (int64, error) {
	return s.vault.BackfillAccounts(ctx, 500)
}
