// Package migrations holds connectd's goose SQL migrations, embedded into the
// binary, and the one constructor every caller (the CLI, start-up, tests) uses
// to apply them. It never edits an applied migration: schema changes are new files.
package migrations

import (
	"database/sql"
	"embed"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// FS holds the SQL migration files.
//
//go:embed *.sql
var FS embed.FS

// NewProvider returns a goose provider over the embedded migrations. It holds a
// Postgres session (advisory) lock while migrating, so several replicas that
// start at once with auto-migrate apply each migration exactly once.
func NewProvider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("migrations: session locker: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, FS, goose.WithSessionLocker(locker))
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}
