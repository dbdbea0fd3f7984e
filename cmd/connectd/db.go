package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// startupPing bounds serve's first look at the database.
const startupPing = 3 * time.Second

// checkDatabase tells the operator at once, in one line, when serve starts
// without a database it can reach (issue 38 item 6): which variable to
// check, where it points (host, port, database and user — never the
// password) and why. serve goes on (its /readyz answers 503
// database_unreachable until the database answers), as a replica started
// before its database must.
func checkDatabase(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) {
	pctx, cancel := context.WithTimeout(ctx, startupPing)
	defer cancel()
	err := pool.Ping(pctx)
	if err == nil {
		return
	}
	cc := pool.Config().ConnConfig
	why := "no answer within " + startupPing.String()
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe):
		why = pe.Code + " " + pe.Message // e.g. 28P01 password authentication failed for user "u"
	case errors.As(err, &ce) && ce.Unwrap() != nil:
		why = strings.ReplaceAll(ce.Unwrap().Error(), "\n", "; ") // e.g. dial tcp 127.0.0.1:1: connect: connection refused
	}
	logger.ErrorContext(ctx, "database unreachable at start: check CONNECTD_DATABASE_URL; serving, /readyz answers 503 until it is reachable",
		slog.String("host", net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))), slog.String("database", cc.Database),
		slog.String("user", cc.User), slog.String("error", why))
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
