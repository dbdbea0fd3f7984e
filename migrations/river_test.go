package migrations_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/connectd/connectd/migrations"
)

// TestRiverSchemaIsCurrent: River's schema is applied by goose (00012_river.sql
// and any later river migration), so a River upgrade that brings schema
// versions must bring a migration too. Every version River knows past 001
// must appear, in order, exactly as rivermigrate renders it for the public
// schema, in the embedded migrations.
func TestRiverSchemaIsCurrent(t *testing.T) {
	t.Parallel()
	m, err := rivermigrate.New[pgx.Tx](riverpgxv5.New(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	entries, err := migrations.FS.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := migrations.FS.ReadFile(e.Name())
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	sql := all.String()
	at := 0
	for _, v := range m.AllVersions() {
		if v.Version == 1 {
			continue // river_migration: River's own bookkeeping, left out on purpose
		}
		up := strings.TrimRight(strings.ReplaceAll(v.SQLUp, "/* TEMPLATE: schema */", ""), "\n")
		i := strings.Index(sql[at:], up)
		if i < 0 {
			t.Fatalf("River schema version %d (%s) is not in the migrations, in order: add a goose migration with "+
				"its SQL (rivermigrate's SQLUp, schema template removed)", v.Version, v.Name)
		}
		at += i + len(up)
	}
}
