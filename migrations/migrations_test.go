package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
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

// TestContract: after the contract step (00033) a client or a connection
// written without org_id is refused instead of landing in the default
// organization, while an audit row without one is still filed by the
// audit_events_org trigger (its client's organization, else its
// connection's, else the default one); rolled back, the defaults are there
// again, and the step applies once more.
func TestContract(t *testing.T) {
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
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	exec := func(q string, args ...any) error { _, err := db.ExecContext(ctx, q, args...); return err }
	for _, q := range []string{
		`INSERT INTO organizations (id, name) VALUES ('acme', 'Acme')`,
		`INSERT INTO clients (id, name, resources, org_id) VALUES ('cli_acme', 'A', '{https://a.example/mcp}', 'acme')`,
		`INSERT INTO connections (id, issuer, subject, provider, key_version, ciphertext, org_id)
			VALUES ('cn_acme', 'https://idp.example', 'alice', 'github', 1, '\x00', 'acme')`,
	} {
		if err := exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	forgets := map[string]string{
		"clients": `INSERT INTO clients (id, name, resources) VALUES ('cli_x', 'X', '{https://x.example/mcp}')`,
		"connections": `INSERT INTO connections (id, issuer, subject, provider, key_version, ciphertext)
			VALUES ('cn_x', 'https://idp.example', 'bob', 'github', 1, '\x00')`,
	}
	refused := func(phase string) {
		t.Helper()
		for table, q := range forgets {
			var pe *pgconn.PgError
			err := exec(q)
			if !errors.As(err, &pe) || pe.Code != "23502" || pe.ColumnName != "org_id" {
				t.Errorf("%s: %s written without org_id: %v, want not_null_violation on org_id", phase, table, err)
			}
		}
	}
	refused("after up")
	audited := func(phase, kind, clientID, target, want string) {
		t.Helper()
		var got string
		err := db.QueryRowContext(ctx, `INSERT INTO audit_events (kind, actor, client_id, target) VALUES ($1, 'test', $2, $3)
			RETURNING org_id`, kind, clientID, target).Scan(&got)
		if err != nil || got != want {
			t.Errorf("%s: audit row %s without org_id: org %q, %v; want %q", phase, kind, got, err, want)
		}
	}
	for _, phase := range []string{"after up", "after down", "after up again"} {
		switch phase {
		case "after down":
			if _, err := p.DownTo(ctx, 32); err != nil { // 00033 and after
				t.Fatalf("down: %v", err)
			}
			for table, q := range forgets { // the expand step's defaults are back
				if err := exec(q); err != nil {
					t.Errorf("after down: %s without org_id: %v", table, err)
				}
			}
		case "after up again":
			if _, err := p.Up(ctx); err != nil {
				t.Fatalf("up again: %v", err)
			}
			if err := exec(`DELETE FROM clients WHERE id = 'cli_x'`); err != nil {
				t.Fatal(err)
			}
			if err := exec(`DELETE FROM connections WHERE id = 'cn_x'`); err != nil {
				t.Fatal(err)
			}
			refused(phase)
		}
		audited(phase, "test.client", "cli_acme", "", "acme")
		audited(phase, "test.connection", "", "cn_acme", "acme")
		audited(phase, "test.neither", "", "", "default")
		var got string
		if err := db.QueryRowContext(ctx, `INSERT INTO audit_events (kind, actor, client_id, org_id) VALUES ('test.named', 'test', 'cli_acme', 'acme')
			RETURNING org_id`).Scan(&got); err != nil || got != "acme" {
			t.Errorf("%s: audit row naming its organization: %q, %v", phase, got, err)
		}
	}
}
