package vault_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/connectd/connectd/internal/vault"
)

// TestRowLevelSecurity (issue 34, the second line below the org-scoped
// queries): connectd runs as the owner of its tables, not a superuser (as
// the tests do: pgtestdb's role), and a statement of acme's vault handle —
// on the pool (a batch behind set_config) or in its transaction — that
// names no organization at all still sees, changes and writes acme's rows
// only; with connectd.org unset (the cross-organization passes, every other
// package) every row is seen.
func TestRowLevelSecurity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pool(t)
	var super bool
	if err := pool.QueryRow(ctx, `SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user`).Scan(&super); err != nil {
		t.Fatal(err)
	}
	if super {
		t.Fatal("the test role bypasses row-level security: the policy would not be tested")
	}
	addOrgs(t, pool)
	base := newStore(t, pool, mustParse(t, keyLine(t, 1)), nil, 0)
	acme, beta := base.In("acme"), base.In("beta")
	mine, err := acme.Put(ctx, alice, "github", vault.Credential{AccessToken: "gho-acme", AccountID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := beta.Put(ctx, alice, "github", vault.Credential{AccessToken: "gho-beta", AccountID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(q vault.Querier) []string {
		t.Helper()
		rows, err := q.Query(ctx, `SELECT id FROM connections ORDER BY id`) // no WHERE org_id
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	both := []string{mine.ID, theirs.ID}
	slices.Sort(both)
	if got := ids(pool); !slices.Equal(got, both) {
		t.Fatalf("connectd.org unset sees %v, want every organization's %v", got, both)
	}
	if got := ids(acme.Scoped()); !slices.Equal(got, []string{mine.ID}) {
		t.Errorf("acme's handle on the pool sees %v, want acme's %v only", got, mine.ID)
	}
	var n int
	if err := acme.Scoped().QueryRow(ctx, `SELECT count(*) FROM connections WHERE id = $1`, theirs.ID).Scan(&n); err != nil || n != 0 {
		t.Errorf("acme's handle finds beta's row by its id: %d %v", n, err)
	}
	if tag, err := acme.Scoped().Exec(ctx, `UPDATE connections SET label = 'acme was here' WHERE id = $1`, theirs.ID); err != nil ||
		tag.RowsAffected() != 0 {
		t.Errorf("acme's handle changes beta's row: %v %v", tag, err)
	}
	err = acme.Begin(ctx, func(tx pgx.Tx) error {
		if got := ids(tx); !slices.Equal(got, []string{mine.ID}) {
			t.Errorf("acme's transaction sees %v, want acme's %v only", got, mine.ID)
		}
		if tag, err := tx.Exec(ctx, `DELETE FROM connections WHERE id = $1`, theirs.ID); err != nil || tag.RowsAffected() != 0 {
			t.Errorf("acme's transaction deletes beta's row: %v %v", tag, err)
		}
		// A row of another organization cannot be written (WITH CHECK).
		_, err := tx.Exec(ctx, `UPDATE connections SET org_id = 'beta' WHERE id = $1`, mine.ID)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("acme's transaction moves its row to beta: %v, want a row-level security violation", err)
		}
		return errors.New("rolled back")
	})
	if err == nil || err.Error() != "rolled back" {
		t.Fatal(err)
	}
	// The setting ends with its transaction: the pooled connection that ran
	// acme's statements carries nothing over.
	for range 4 {
		if got := ids(pool); !slices.Equal(got, both) {
			t.Fatalf("after acme's statements, connectd.org unset sees %v, want %v", got, both)
		}
	}
	// The cross-organization reads see both; each handle reads its own.
	all, err := base.ListAll(ctx, alice)
	if err != nil || len(all) != 2 {
		t.Fatalf("ListAll: %d %v, want both organizations' connections", len(all), err)
	}
	for _, h := range []struct {
		s    *vault.Store
		want string
	}{{acme, "gho-acme"}, {beta, "gho-beta"}} {
		cred, err := h.s.Token(ctx, alice, "github", "", nil)
		if err != nil || cred.AccessToken != h.want {
			t.Errorf("%s's token read: %v", h.s.Org(), err)
		}
	}
}
