package vault

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Row-level security on connections (migration 00034) is the second line
// below the handle's queries, which all name org_id: every statement an
// organization's handle makes runs in a transaction whose connectd.org
// setting is the handle's organization, and the table's policy then shows
// and accepts that organization's rows only, whatever the statement's WHERE
// says. The operator's passes over every organization's rows (ListAll,
// KeyStatus, Rewrap, BackfillAccounts) and every other package's statements
// run with connectd.org unset, which the policy lets see every row: the
// policy bites only where the vault set the organization.
//
// One read of a handle runs unset too: the token read's (loadTokenRow and
// its onlyID, what every token read, exchange and proxied call makes when
// the credential cache misses or is off). The set_config beside it cost the
// cache-off token read 5 % (16 callers) and 12 % (64) of its req/s in the
// bench, old and new binaries alternated (docs/performance.md), while the
// policy itself costs nothing measurable on a statement run unset. Its
// statement names org_id, and the row's organization is checked again after
// it (the cache's r.org, Held.Org in the release decision); every write,
// and every other read, is scoped.
//
// The setting is local to the transaction (set_config's is_local), so a
// pooled connection carries nothing over to its next user. A statement on
// the pool is sent as a pgx Batch, set_config and the statement: the batch
// is one round trip ending in one Sync, which Postgres runs as one implicit
// transaction (in every query exec mode: the extended protocol's pipeline,
// exec's one ExecBatch, the simple protocol's one multi-statement query). A
// transaction sets it in its BEGIN (begin), also one round trip.

// orgSetting is the setting connections' policy reads (migration 00034).
const orgSetting = "connectd.org"

// setOrg scopes the current transaction to an organization.
const setOrg = `SELECT set_config('` + orgSetting + `', $1, true)`

// db is the handle's querier on the pool: each statement runs with
// connectd.org set to the handle's organization.
func (s *Store) db() querier { return scoped{s} }

// begin runs fn in a transaction scoped to the handle's organization: the
// BEGIN sets connectd.org (one simple-protocol query, hence the literal).
func (s *Store) begin(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{
		BeginQuery: "BEGIN; SELECT set_config('" + orgSetting + "', " + literal(s.org) + ", true)"}, fn)
}

// literal quotes v as an SQL string literal (standard_conforming_strings is
// on, as pgx requires of the simple protocol: a backslash is no escape).
// Organization ids are [a-z0-9-] (organizations' CHECK); a handle on any
// other string finds no row, and is quoted all the same.
func literal(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }

// scoped runs each statement in a batch behind setOrg.
type scoped struct{ s *Store }

func (q scoped) send(ctx context.Context, sql string, args []any) pgx.BatchResults {
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 2)}
	b.Queue(setOrg, q.s.org)
	b.Queue(sql, args...)
	return q.s.pool.SendBatch(ctx, b)
}

func (q scoped) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br := q.send(ctx, sql, args)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (q scoped) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	br := q.send(ctx, sql, args)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return errRow{err}
	}
	return &batchRow{row: br.QueryRow(), br: br}
}

func (q scoped) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br := q.send(ctx, sql, args)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// errRow is a row that failed before it was read.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// batchRow is the statement's row; reading it ends the batch.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r *batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// batchRows are the statement's rows; closing them (or reading past the
// last) ends the batch.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	done   bool
	endErr error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if !r.done {
		r.done, r.endErr = true, r.br.Close()
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.endErr
}
