// Package pgtest hands each test a fresh, fully migrated PostgreSQL database,
// cloned by pgtestdb from a template built once with connectd's own migrations.
// Tests may run in parallel. It is imported only from _test.go files; a test
// that needs Postgres and finds none fails with instructions and never skips.
package pgtest

import (
	"context"
	"database/sql"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver pgtestdb uses.
	"github.com/peterldowns/pgtestdb"
	"github.com/peterldowns/pgtestdb/migrators/common"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/migrations"
)

// EnvURL names the variable holding a superuser URL of the test cluster.
const EnvURL = "CONNECTD_TEST_DATABASE_URL"

// Migrator applies connectd's embedded goose migrations, exactly as
// `connectd migrate up` does, to build the template database.
type Migrator struct{}

// Hash identifies the migrated schema by the contents of the migration files.
func (Migrator) Hash() (string, error) {
	return common.HashDirs(migrations.FS, "*.sql", ".")
}

// Migrate applies every migration.
func (Migrator) Migrate(ctx context.Context, db *sql.DB, _ pgtestdb.Config) error {
	p, err := migrations.NewProvider(db)
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

// Config returns the pgtestdb configuration for the cluster named by
// CONNECTD_TEST_DATABASE_URL, failing t when it is not set.
func Config(t testing.TB) pgtestdb.Config {
	t.Helper()
	raw := os.Getenv(EnvURL)
	if raw == "" {
		t.Fatalf("%s is not set: this test needs PostgreSQL. Run `make test`, which starts a private cluster "+
			"(or set %s to a superuser URL).", EnvURL, EnvURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s is not a valid URL", EnvURL)
	}
	pw, _ := u.User.Password()
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	opts := u.Query()
	if opts.Get("sslmode") == "" {
		opts.Set("sslmode", "disable")
	}
	return pgtestdb.Config{
		DriverName:                "pgx",
		Host:                      u.Hostname(),
		Port:                      port,
		User:                      u.User.Username(),
		Password:                  pw,
		Database:                  "postgres",
		Options:                   opts.Encode(),
		ForceTerminateConnections: true,
	}
}

// URL returns the connection URL of a fresh, migrated database for this test.
// The database is dropped when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	return pgtestdb.Custom(t, Config(t), Migrator{}).URL()
}

// EmptyURL returns the URL of a fresh database with no migrations applied.
func EmptyURL(t testing.TB) string {
	t.Helper()
	return pgtestdb.Custom(t, Config(t), pgtestdb.NoopMigrator{}).URL()
}

// Pool returns a pgx pool on a fresh, migrated database, closed when the test
// ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return NewPool(t, URL(t))
}

// NewPool opens a pool on dbURL, closed when the test ends, set up as
// connectd's own (db.Configure: requests' database deadlines apply).
func NewPool(t testing.TB, dbURL string) *pgxpool.Pool {
	t.Helper()
	return NewPoolWith(t, dbURL, nil)
}

// NewPoolWith is NewPool with adjust (if not nil) applied to the pool's
// configuration first: a pool of two connections, say.
func NewPoolWith(t testing.TB, dbURL string, adjust func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	pc, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("pgxpool: %v", err)
	}
	db.Configure(pc)
	if adjust != nil {
		adjust(pc)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatalf("pgxpool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Listen keeps sub fresh in a package's own tests as the process does in
// production: a cache.Hub with sub as its one subscriber, on a connection of
// its own (from pool's settings), run until the test ends. It returns once
// sub is live.
func Listen(t testing.TB, pool *pgxpool.Pool, sub cache.Subscriber) {
	t.Helper()
	live := make(chan struct{})
	var once sync.Once
	setLive := sub.SetLive
	sub.SetLive = func(v bool) {
		setLive(v)
		if v {
			once.Do(func() { close(live) })
		}
	}
	hub := cache.NewHub(pool.Config().ConnConfig, slog.New(slog.DiscardHandler))
	hub.Add(sub)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { hub.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-live:
	case <-time.After(10 * time.Second):
		t.Fatal("pgtest: the notification hub did not start listening within 10s")
	}
}
