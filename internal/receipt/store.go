package receipt

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/connectd/connectd/internal/identity"
)

// Receipt is one row: Count identical uses (the same client, kind, method,
// template and status) within a minute, from First to Last.
type Receipt struct {
	Org, Provider, ConnectionID, ClientID string
	Kind                                  Kind
	Method, Template                      string
	Status                                int
	Count                                 int64
	First, Last                           time.Time
}

// Querier is what a pool and a transaction both offer.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// DefaultRetention is how long receipts are kept unless configured
// (CONNECTD_RECEIPTS_RETENTION); MaxRetention bounds what may be.
const (
	DefaultRetention = 90 * 24 * time.Hour
	MaxRetention     = 400 * 24 * time.Hour
	MinRetention     = 24 * time.Hour
)

// MaxDownload bounds one download (newest first).
const MaxDownload = 50_000

const receiptColumns = `org_id, provider, connection_id, client_id, kind, method, template, status, count, first_at, last_at`

const (
	// selectRecent: the newest rows of each of the user's connections
	// named, by the index (issuer, subject, connection_id, last_at): the
	// user's own only, whatever ids are named.
	selectRecent = `SELECT r.* FROM unnest($3::text[]) AS c(id) CROSS JOIN LATERAL (
		SELECT ` + receiptColumns + ` FROM receipts
		WHERE issuer = $1 AND subject = $2 AND connection_id = c.id
		ORDER BY last_at DESC, kind, client_id LIMIT $4) r`
	selectAll = `SELECT ` + receiptColumns + ` FROM receipts WHERE issuer = $1 AND subject = $2
		ORDER BY last_at DESC, connection_id, kind, client_id LIMIT $3`
	selectLastUses = `SELECT connection_id, client_id, last_at FROM receipt_last_uses WHERE issuer = $1 AND subject = $2`
	sweepReceipts  = `WITH gone AS (DELETE FROM receipts WHERE last_at < $1 RETURNING 1),
		gone_last AS (DELETE FROM receipt_last_uses WHERE last_at < $1 RETURNING 1)
		SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM gone_last)`
)

// Recent returns the newest receipts of each of u's connections ids names,
// at most perConnection each, by connection id, newest first. A connection
// that is not u's has none.
func Recent(ctx context.Context, q Querier, u identity.User, ids []string, perConnection int) (map[string][]Receipt, error) {
	out := map[string][]Receipt{}
	if len(ids) == 0 {
		return out, nil
	}
	rs, err := scan(q.Query(ctx, selectRecent, u.Issuer, u.Subject, ids, perConnection))
	if err != nil {
		return nil, fmt.Errorf("receipt: recent: %w", err)
	}
	for _, r := range rs {
		out[r.ConnectionID] = append(out[r.ConnectionID], r)
	}
	return out, nil
}

// All returns u's receipts, newest first, at most limit (and whether there
// were more): the download.
func All(ctx context.Context, q Querier, u identity.User, limit int) ([]Receipt, bool, error) {
	rs, err := scan(q.Query(ctx, selectAll, u.Issuer, u.Subject, limit+1))
	if err != nil {
		return nil, false, fmt.Errorf("receipt: all: %w", err)
	}
	if len(rs) > limit {
		return rs[:limit], true, nil
	}
	return rs, false, nil
}

func scan(rows pgx.Rows, err error) ([]Receipt, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Receipt
	for rows.Next() {
		var r Receipt
		var kind string
		if err := rows.Scan(&r.Org, &r.Provider, &r.ConnectionID, &r.ClientID, &kind, &r.Method, &r.Template,
			&r.Status, &r.Count, &r.First, &r.Last); err != nil {
			return nil, err
		}
		r.Kind = Kind(kind)
		out = append(out, r)
	}
	return out, rows.Err()
}

// Pair names a client's use of a connection.
type Pair struct{ ConnectionID, ClientID string }

// LastUses returns when each client last used each of u's connections —
// proxied calls and token reads alike — to within a flush (well under a
// second), for the receipts' retention.
func LastUses(ctx context.Context, q Querier, u identity.User) (map[Pair]time.Time, error) {
	rows, err := q.Query(ctx, selectLastUses, u.Issuer, u.Subject)
	if err != nil {
		return nil, fmt.Errorf("receipt: last uses: %w", err)
	}
	defer rows.Close()
	out := map[Pair]time.Time{}
	for rows.Next() {
		var p Pair
		var at time.Time
		if err := rows.Scan(&p.ConnectionID, &p.ClientID, &at); err != nil {
			return nil, fmt.Errorf("receipt: last uses: %w", err)
		}
		out[p] = at
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("receipt: last uses: %w", err)
	}
	return out, nil
}

// Sweep deletes the receipts (and last uses) last seen before before, and
// returns how many rows went. internal/server runs it on the job queue
// (the receipts retention sweep), once for all replicas.
func Sweep(ctx context.Context, q Querier, before time.Time) (int64, error) {
	rows, err := q.Query(ctx, sweepReceipts, before)
	if err != nil {
		return 0, fmt.Errorf("receipt: sweep: %w", err)
	}
	defer rows.Close()
	var n int64
	for rows.Next() {
		if err := rows.Scan(&n); err != nil {
			return 0, fmt.Errorf("receipt: sweep: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("receipt: sweep: %w", err)
	}
	return n, nil
}
