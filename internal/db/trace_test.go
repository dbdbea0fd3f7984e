package db

import (
	"context"
	"testing"
)

func TestOperation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ sql, want string }{
		{"SELECT 1", "SELECT"},
		{"  insert into t VALUES ($1)", "INSERT"},
		{"WITH x AS (SELECT 1) SELECT * FROM x", "WITH"},
		{"-- name: JobGetAvailable :many\nWITH locked AS (SELECT 1)", "JobGetAvailable"},
		{"-- a comment\nDELETE FROM t", "DELETE"},
		{"begin", "BEGIN"},
		{"", "query"},
		{"-- only a comment", "query"},
		{"averyveryverylongidentifier(1)", "query"},
	} {
		if got := operation(c.sql); got != c.want {
			t.Errorf("operation(%q) = %q, want %q", c.sql, got, c.want)
		}
	}
}

// TestUntracedStatementCostsNothing: without a recording span on the
// context (tracing off, or an unsampled trace) a statement makes no span and
// allocates nothing for one.
func TestUntracedStatementCostsNothing(t *testing.T) {
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		c := startSpan(ctx, "", "SELECT 1")
		endSpan(c, nil)
		if c != ctx {
			t.Fatal("a span was started without a recording parent")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per untraced statement", n)
	}
}
