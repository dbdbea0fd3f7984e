// Package audit owns the append-only audit trail (table audit_events): the
// one shape of a row (Event), the one way to write it (Write, or the Insert
// fragment for a write that must ride in the caller's own statement) and the
// retention sweep. Every package that records what happened writes through
// it, inside its own transaction where the row must commit with the change.
//
// It must never hold a secret in a row: no token, code, state, verifier,
// cookie or key; and it must never import the packages that write through
// it.
package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Event is one row of the audit trail. It never holds a secret.
type Event struct {
	Kind      string // "connection.refreshed", "security.state_unknown_or_replayed", …
	Actor     string // "user", "client:<id>", "admin:<sub>", "admin_key:<id>", "vault", "anonymous"
	Issuer    string
	Subject   string
	ClientID  string
	Provider  string
	Target    string // elicitation, connection or key id
	RequestID string
	IP        string
	Detail    map[string]any // nil: {}
	// OrgID is the organization the event belongs to ("": the default
	// organization, the column's default).
	OrgID string
}

// Insert is the head of every insert into the trail, naming the columns in
// Event's order; what follows is VALUES (…) or a SELECT giving the ten
// values. A write that must be one round trip with the change it records
// (a CTE next to the change, see connect's elicitations and package consent)
// uses it in its own statement; everyone else calls Write.
const Insert = `INSERT INTO audit_events (kind, actor, issuer, subject, client_id, provider, target, request_id, ip, detail)`

const insertEvent = `INSERT INTO audit_events (kind, actor, issuer, subject, client_id, provider, target, request_id, ip, detail, org_id)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, coalesce(nullif($11, ''), 'default'))`

// Execer is what a pool, a connection and a transaction all offer: Write
// inside a transaction commits or rolls back with the change it records.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Write writes ev with q.
func Write(ctx context.Context, q Execer, ev Event) error {
	if _, err := q.Exec(ctx, insertEvent, ev.Kind, ev.Actor, ev.Issuer, ev.Subject, ev.ClientID, ev.Provider,
		ev.Target, ev.RequestID, ev.IP, Detail(ev.Detail), ev.OrgID); err != nil {
		return fmt.Errorf("audit: write %s: %w", ev.Kind, err)
	}
	return nil
}

// Detail is d, or an empty object for nil: the column holds {} rather than
// JSON null.
func Detail(d map[string]any) map[string]any {
	if d == nil {
		return map[string]any{}
	}
	return d
}

// sweepBatch bounds one delete of Sweep; SKIP LOCKED lets every replica
// sweep at once without waiting on each other.
const (
	sweepBatch     = 5000
	sweepOldEvents = `DELETE FROM audit_events WHERE id IN (
	SELECT id FROM audit_events WHERE occurred_at < $1 ORDER BY id LIMIT 5000 FOR UPDATE SKIP LOCKED)`
)

// Sweep deletes the events older than cutoff, a batch at a time, and returns
// how many went.
func Sweep(ctx context.Context, q Execer, cutoff time.Time) (int64, error) {
	var total int64
	for {
		tag, err := q.Exec(ctx, sweepOldEvents, cutoff)
		if err != nil {
			return total, fmt.Errorf("audit: sweep: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < sweepBatch {
			return total, nil
		}
	}
}

// ReadPeriod is the sampling period of the token.read and proxy.call
// rows: each replica writes a row for the first read of a (user, client,
// connection) in a period at once, and the count of the others once the
// period is over. So a read at time t is on record by a row written no
// earlier than t − ReadPeriod (the row of its period's first read): whoever
// asks "what did this client read since t" looks back from t − ReadPeriod.
const ReadPeriod = time.Hour

// Querier is what a pool and a transaction both offer for reading.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Use is one token.read or proxy.call row of the sampled audit trail: a
// client was handed the user's credential for a connection (token.read), or
// called the provider through connectd's proxy with it (proxy.call: Method,
// Template and Status say which call and what it was answered), Count times
// from At on (the first of a period is a row of its own; the others are
// counted into the row written when the period ends).
type Use struct {
	Kind                                string // "token.read" or "proxy.call"
	Org, ClientID, Provider, Connection string
	Method, Template                    string // proxy.call only
	Status                              int    // proxy.call only
	Count                               int64
	At                                  time.Time
}

// selectUses reads the newest of each kind by its index
// (audit_events_user_idx: issuer, subject, kind, occurred_at), then the
// newest of both.
const selectUses = `SELECT kind, org_id, client_id, provider, target, coalesce(detail->>'method', ''),
		coalesce(detail->>'template', ''), coalesce((detail->>'status')::int, 0),
		coalesce((detail->>'count')::bigint, 1), occurred_at
	FROM ((SELECT * FROM audit_events WHERE issuer = $1 AND subject = $2 AND kind = 'token.read'
			ORDER BY occurred_at DESC LIMIT $3)
		UNION ALL (SELECT * FROM audit_events WHERE issuer = $1 AND subject = $2 AND kind = 'proxy.call'
			ORDER BY occurred_at DESC LIMIT $3)) AS u
	ORDER BY occurred_at DESC LIMIT $3`

// Uses returns the user's token.read and proxy.call rows, newest first, at
// most limit: what the access receipts show of token reads and proxied
// calls (their one source: neither records anything else).
func Uses(ctx context.Context, q Querier, issuer, subject string, limit int) ([]Use, error) {
	rows, err := q.Query(ctx, selectUses, issuer, subject, limit)
	if err != nil {
		return nil, fmt.Errorf("audit: uses: %w", err)
	}
	defer rows.Close()
	var out []Use
	for rows.Next() {
		var u Use
		if err := rows.Scan(&u.Kind, &u.Org, &u.ClientID, &u.Provider, &u.Connection, &u.Method, &u.Template,
			&u.Status, &u.Count, &u.At); err != nil {
			return nil, fmt.Errorf("audit: uses: %w", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: uses: %w", err)
	}
	return out, nil
}
