package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/migrations"
)

// openPool connects to Postgres with the configured pool settings. It does not
// wait for the database to be reachable: /readyz reports that.
func openPool(ctx context.Context, cfg *Config) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		// pgx's message may echo the URL, password included: keep it out.
		return nil, &ConfigError{Var: "CONNECTD_DATABASE_URL", Problem: "is not a valid PostgreSQL connection URL"}
	}
	pc.MaxConns = cfg.DB.MaxConns
	pc.MinConns = cfg.DB.MinConns
	pc.MaxConnLifetime = cfg.DB.MaxConnLifetime
	pc.MaxConnIdleTime = cfg.DB.MaxConnIdleTime
	db.Configure(pc) // requests' database deadlines (CONNECTD_DB_*_TIMEOUT) apply
	if pc.ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
		// The description cache serves only the cache_describe mode (chosen
		// in the URL, e.g. behind pgbouncer); in the default mode it would
		// be an unused 512-entry map on every connection.
		pc.ConnConfig.DescriptionCacheCapacity = 0
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("database pool: %w", err)
	}
	return pool, nil
}

// migrateUp applies pending migrations under goose's Postgres session lock, so
// replicas starting together do not race.
func migrateUp(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := migrations.NewProvider(db)
	if err != nil {
		return err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	for _, r := range results {
		logger.InfoContext(ctx, "migration applied", slog.Int64("version", r.Source.Version),
			slog.String("file", r.Source.Path), slog.Duration("duration", r.Duration))
	}
	return nil
}

// openDatabase is how every database subcommand starts: the configuration
// (with the database settings required, and what else n says the command
// uses), a logger on stderr, and a pool the caller closes.
func openDatabase(ctx context.Context, getenv func(string) string, stderr io.Writer, n needs) (*Config, *slog.Logger, *pgxpool.Pool, error) {
	n.db = true
	cfg, err := loadConfig(getenv, n)
	if err != nil {
		return nil, nil, nil, err
	}
	logger := web.NewLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, logger, pool, nil
}
