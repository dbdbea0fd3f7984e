package migrations_test

import (
	"context"
	"database/sql"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/migrations"
)

// TestRoundTrip applies every migration, rolls each back, and applies them
// again: every Down must undo its Up exactly.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sql.Open("pgx", pgtest.EmptyURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := migrations.NewProvider(db)
	if err != nil {
		t.Fatal(err)
	}
	n := len(p.ListSources())
	if n == 0 {
		t.Fatal("no migrations embedded")
	}
	up, err := p.Up(ctx)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	if len(up) != n {
		t.Fatalf("up applied %d migrations, want %d", len(up), n)
	}
	schema := dumpSchema(t, db)
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("down to 0: %v", err)
	}
	if left := dumpSchema(t, db); left != "" {
		t.Fatalf("after down, tables remain:\n%s", left)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if again := dumpSchema(t, db); again != schema {
		t.Fatalf("schema after up→down→up differs:\nfirst:\n%s\nagain:\n%s", schema, again)
	}
	cur, target, err := p.GetVersions(ctx)
	if err != nil || cur != target {
		t.Fatalf("versions: current %d target %d err %v", cur, target, err)
	}
}

// dumpSchema lists the public schema's columns (goose's own table excluded).
func dumpSchema(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.Query(`SELECT table_name, column_name, data_type, is_nullable, coalesce(column_default, '')
		FROM information_schema.columns
		WHERE table_schema = 'public' AND table_name <> 'goose_db_version'
		ORDER BY table_name, ordinal_position`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out string
	for rows.Next() {
		var tbl, col, typ, null, def string
		if err := rows.Scan(&tbl, &col, &typ, &null, &def); err != nil {
			t.Fatal(err)
		}
		out += tbl + "." + col + " " + typ + " " + null + " " + def + "\n"
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
