package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/problem"
)

// Cutting off a compromised client (issue 25): one action disables it and
// shows its exposure — every connection whose raw credential it received
// since a time, from the sampled token.read rows (recorded once per
// (user, client, connection) and period at least, naming the connection) —
// and, when asked, revokes those connections at the provider through the
// one owner of a connection's end (approvals withdrawn, webhooks, audit).
// A proxy-only client never held a credential: its exposure is empty and
// disabling it is the whole job.

// Exposed is one connection a client received the raw credential of.
type Exposed struct {
	ConnectionID string
	User         identity.User
	Provider     string
	LastRead     time.Time // the latest row's time: within a sampling period of the last read
	DisplayName  string    // the provider's name of the account
	Label        string    // the user's own name of the connection
}

// CutOff is what a cut-off did.
type CutOff struct {
	ClientID string
	Since    time.Time
	Exposed  []Exposed
	Revoked  []string // connection ids revoked (when asked)
	Failed   []string // connection ids whose revocation failed (kept: retry revoking them)
}

// selectExposure: the connections still stored whose credential the
// client may have read since $2 (token.read rows name the connection as
// target). $2 is one sampling period (audit.ReadPeriod) before the
// admin's since: a read at t whose period began earlier is on record only by the row
// of that period's first read until the period ends, so "since t" must take
// that row in. A connection read just before since may be listed: the trail
// is only as fine as its period, and listing one too many is the safe side.
const selectExposure = `SELECT e.target, e.issuer, e.subject, e.provider, max(e.occurred_at), coalesce(c.display_name, ''), c.label
	FROM audit_events e JOIN connections c ON c.id = e.target
	WHERE e.kind = 'token.read' AND e.client_id = $1 AND e.occurred_at > $2 AND e.target <> ''
	GROUP BY e.target, e.issuer, e.subject, e.provider, c.display_name, c.label ORDER BY e.target`

// Exposure lists the connections whose raw credential client id received
// since since (and that are still stored).
func (st *Store) Exposure(ctx context.Context, id string, since time.Time) ([]Exposed, error) {
	rows, err := st.pool.Query(ctx, selectExposure, id, since.Add(-audit.ReadPeriod))
	if err != nil {
		return nil, fmt.Errorf("admin: exposure: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Exposed, error) {
		var x Exposed
		err := r.Scan(&x.ConnectionID, &x.User.Issuer, &x.User.Subject, &x.Provider, &x.LastRead, &x.DisplayName, &x.Label)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("admin: exposure: %w", err)
	}
	return out, nil
}

// CutOffClient disables client id (every replica refuses its key at once),
// lists its exposure since since and, with revoke, revokes each exposed
// connection at the provider, writing a client.cut_off audit row by by.
func (st *Store) CutOffClient(ctx context.Context, clients *mcpauth.Clients, id string, since time.Time, revoke bool,
	by Actor) (*CutOff, error) {
	if since.IsZero() || since.After(time.Now()) {
		return nil, problem.Detail(ErrInvalid, "since must be a time in the past")
	}
	if err := clients.SetDisabled(ctx, id, true); errors.Is(err, mcpauth.ErrClientNotFound) {
		return nil, problem.Detail(ErrNotFound, "no such client")
	} else if err != nil {
		return nil, err
	}
	exposed, err := st.Exposure(ctx, id, since)
	if err != nil {
		return nil, err
	}
	out := &CutOff{ClientID: id, Since: since, Exposed: exposed, Revoked: []string{}, Failed: []string{}}
	if revoke {
		for _, x := range exposed {
			rev, err := st.Revoke(context.WithoutCancel(ctx), x.ConnectionID, by)
			switch {
			case errors.Is(err, ErrNotFound): // gone meanwhile
			case err != nil:
				st.logger.ErrorContext(ctx, "cut-off: revoking a connection failed", "connection_id", x.ConnectionID, "error", err)
				out.Failed = append(out.Failed, x.ConnectionID)
			default: // deleted here; the provider's answer (rev.AtProvider) is in its own audit row
				_ = rev
				out.Revoked = append(out.Revoked, x.ConnectionID)
			}
		}
	}
	st.auditAfter(ctx, Event{Kind: "client.cut_off", ClientID: id, Target: id, Detail: map[string]any{
		"since": since.UTC(), "exposed": len(exposed), "revoked": len(out.Revoked), "failed": len(out.Failed)}}, by)
	return out, nil
}
