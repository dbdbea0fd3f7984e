package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	noopmetric "go.opentelemetry.io/otel/metric/noop"

	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/keepalive"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/webhook"
)

// jobs is the process's River client: the queue its background jobs
// (webhook delivery and retention, the connection health job) run on,
// shared with every replica through the database.
type jobs struct {
	river *river.Client[pgx.Tx]
}

// newEnqueuer builds the webhook service, which enqueues the events of a
// change in the change's transaction, on an insert-only River client (as
// the CLI's, NewWebhooks): it needs nothing else built, so it comes before
// the vault and everyone who emits; the process's working client (newJobs)
// delivers what it enqueues, like every replica's.
func (s *Server) newEnqueuer() error {
	cfg := s.cfg
	wcfg, err := webhookConfig(cfg, cfg.Pool, s.keyring)
	if err != nil {
		return err
	}
	wcfg.OnAttempt = s.metrics.Webhook
	rc, err := river.NewClient(riverpgxv5.New(cfg.Pool), &river.Config{Logger: riverLogger(cfg.Logger), Middleware: jobTracing(cfg)})
	if err != nil {
		return err
	}
	if s.webhooks, err = webhook.NewService(wcfg, rc); err != nil {
		return err
	}
	s.wcfg = wcfg
	return nil
}

// newJobs builds the River client with every worker and periodic job. It
// starts nothing: Run does.
func (s *Server) newJobs() error {
	cfg := s.cfg
	wcfg := s.wcfg
	workers := river.NewWorkers()
	river.AddWorker(workers, webhook.NewWorker(wcfg))
	river.AddWorker(workers, webhook.NewCleanupWorker(wcfg))
	river.AddWorker(workers, keepalive.NewWorker(s.vault, s.orgs, s.catalog, cfg.Logger, cfg.Now))
	sweeps := s.addSweeps(workers)
	n := cfg.Jobs.Workers
	if n <= 0 {
		n = 8
	}
	healthEvery := cfg.Jobs.HealthInterval
	if healthEvery <= 0 {
		healthEvery = time.Hour
	}
	rescue := cfg.Jobs.RescueAfter
	if rescue <= 0 {
		rescue = 5 * time.Minute
	}
	rc, err := river.NewClient(riverpgxv5.New(cfg.Pool), &river.Config{
		Logger:  riverLogger(cfg.Logger),
		Workers: workers,
		Queues: map[string]river.QueueConfig{
			webhook.Queue:      {MaxWorkers: n},
			river.QueueDefault: {MaxWorkers: 2},
		},
		PeriodicJobs: append([]*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
				func() (river.JobArgs, *river.InsertOpts) { return webhook.CleanupArgs{}, nil }, nil),
			river.NewPeriodicJob(river.PeriodicInterval(healthEvery),
				func() (river.JobArgs, *river.InsertOpts) { return keepalive.Args{}, nil }, nil),
		}, sweeps...),
		RescueStuckJobsAfter: rescue,
		// River wants the default job timeout within the rescue time; the
		// delivery worker sets its own (webhook.Worker.Timeout).
		JobTimeout: min(30*time.Second, rescue),
		Middleware: jobTracing(cfg),
	})
	if err != nil {
		return err
	}
	s.jobs = &jobs{river: rc}
	return nil
}

// webhookConfig is the webhook package's configuration from cfg: deliveries
// through the egress client (or cfg.HTTPClient in tests).
func webhookConfig(cfg Config, pool *pgxpool.Pool, keys *keyring.Keyring) (webhook.Config, error) {
	client, err := outboundClientWith(cfg, egress.Config{Class: egress.ClassWebhooks})
	if err != nil {
		return webhook.Config{}, err
	}
	return webhook.Config{Pool: pool, Keyring: keys, HTTPClient: client, AllowHTTP: cfg.Dev,
		Backoff: cfg.Jobs.WebhookBackoff, Retention: cfg.Jobs.WebhookRetention, Logger: cfg.Logger, Now: cfg.Now}, nil
}

// NewWebhooks is the webhook service on pool for the CLI (registering
// endpoints, listing and redelivering deliveries, the events of an admin
// revocation): its River client only enqueues; the replicas deliver.
func NewWebhooks(cfg Config, pool *pgxpool.Pool, keys *keyring.Keyring) (*webhook.Service, error) {
	wcfg, err := webhookConfig(cfg, pool, keys)
	if err != nil {
		return nil, err
	}
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: riverLogger(cfg.Logger), Middleware: jobTracing(cfg)})
	if err != nil {
		return nil, err
	}
	return webhook.NewService(wcfg, rc)
}

// riverLogger passes River's own lines on at warning and above: its
// start/stop and maintenance chatter stays out of the log.
func riverLogger(l *slog.Logger) *slog.Logger {
	return slog.New(minLevel{l.Handler(), slog.LevelWarn}).With(slog.String("component", "river"))
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}

// run starts the River client and stops it when ctx ends, letting running
// jobs finish for a few seconds (then cancelling them: River retries them).
func (j *jobs) run(ctx context.Context, logger *slog.Logger) {
	if err := j.river.Start(ctx); err != nil {
		logger.ErrorContext(ctx, "job queue did not start; webhooks are not delivered by this replica", slog.Any("error", err))
		return
	}
	<-ctx.Done()
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := j.river.Stop(stop); err != nil {
		hard, cancel2 := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel2()
		_ = j.river.StopAndCancel(hard)
	}
}

// reauthHook is vault.Config.OnReauth.
type reauthHook = func(ctx context.Context, tx pgx.Tx, c vault.Connection, reason string) error

// jobTracing is River's OpenTelemetry middleware when tracing is on (none
// otherwise): a span for each insert (under the request that enqueued) and
// each job worked ("river.work/<kind>"), with the statements and outbound
// calls of the job under it. The inserting span's context rides in the
// job's metadata (a traceparent, no secret), so the work span links back to
// it. Its spans carry the job's kind, queue, attempt, id and tags — never its
// arguments. River's metrics stay off: Prometheus has connectd's.
func jobTracing(cfg Config) []rivertype.Middleware {
	if cfg.Tracing == nil {
		return nil
	}
	return []rivertype.Middleware{otelriver.NewMiddleware(&otelriver.MiddlewareConfig{
		TracerProvider:              cfg.Tracing,
		MeterProvider:               noopmetric.NewMeterProvider(),
		EnableTracePropagation:      true,
		EnableWorkSpanJobKindSuffix: true,
	})}
}
