package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/notice"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/webhook"
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
	// AtProvider is, per revoked connection, the provider's answer:
	// "revoked", "not_supported", "failed" or "skipped" (Revocation.AtProvider).
	AtProvider map[string]string
}

// selectExposure: the connections still stored whose credential the client
// may have read since the admin's since (token.read rows name the
// connection as target). $2 is one sampling period (audit.ReadPeriod) before
// it: a read at t whose period began earlier is on record only by the row of
// that period's first read until the period ends, so "since t" must take
// that row in. A connection last read just before since may be listed: the
// trail is only as fine as its period, and one too many is the safe side.
const selectExposure = `SELECT e.target, e.issuer, e.subject, e.provider, max(e.occurred_at), coalesce(c.display_name, ''), c.label
	FROM audit_events e JOIN connections c ON c.id = e.target
	WHERE e.kind = 'token.read' AND e.client_id = $1 AND e.occurred_at > $2 AND e.target <> ''
	AND c.org_id = (SELECT org_id FROM clients WHERE id = $1)
	GROUP BY e.target, e.issuer, e.subject, e.provider, c.display_name, c.label ORDER BY e.target`

// Exposure lists the connections whose raw credential client id received
// since since (and that are still stored), of the client's organization
// only: a cut-off never lists, nor revokes, another organization's.
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

// CutOffClient disables client id (of by's organization: ErrNotFound for
// another's; every replica refuses its key at once,
// and ends its long-polls), lists its exposure since since and, with revoke,
// revokes each exposed connection at the provider, telling each user why on
// their account page. The cut-off is audited (client.cut_off, by by) and
// reported to the client's webhook endpoints (client.cut_off: counts only)
// in one transaction.
func (st *Store) CutOffClient(ctx context.Context, clients *clientauth.Clients, id string, since time.Time, revoke bool,
	by Actor) (*CutOff, error) {
	if since.IsZero() || since.After(time.Now()) {
		return nil, problem.Detail(ErrInvalid, "since must be a time in the past")
	}
	org, err := st.clientIn(ctx, id, by)
	if err != nil {
		return nil, err
	}
	c, err := clients.Get(ctx, id)
	if errors.Is(err, clientauth.ErrClientNotFound) {
		return nil, problem.Detail(ErrNotFound, "no such client")
	} else if err != nil {
		return nil, err
	}
	if err := clients.SetDisabled(ctx, id, true); errors.Is(err, clientauth.ErrClientNotFound) {
		return nil, problem.Detail(ErrNotFound, "no such client")
	} else if err != nil {
		return nil, err
	}
	exposed, err := st.Exposure(ctx, id, since)
	if err != nil {
		return nil, err
	}
	out := &CutOff{ClientID: id, Since: since, Exposed: exposed, Revoked: []string{}, Failed: []string{},
		AtProvider: map[string]string{}}
	if revoke {
		st.revokeExposed(ctx, c, exposed, out, by)
	}
	// The client is disabled whatever happens next: the record of it must
	// not be lost with the answer (a detached context), nor fail the answer.
	dctx := context.WithoutCancel(ctx)
	err = pgx.BeginFunc(dctx, st.pool, func(tx pgx.Tx) error {
		if err := writeAudit(dctx, tx, Event{Kind: "client.cut_off", Org: org, ClientID: id, Target: id, Detail: map[string]any{
			"since": since.UTC(), "revoke": revoke, "exposed": len(exposed), "revoked": len(out.Revoked),
			"failed": len(out.Failed)}}, by); err != nil {
			return err
		}
		if st.webhooks == nil {
			return nil
		}
		return st.webhooks.Emit(dctx, tx, webhook.CutOffEvent(id, since, len(exposed), len(out.Revoked), len(out.Failed)))
	})
	if err != nil {
		st.logger.ErrorContext(ctx, "cut-off: audit row and webhook event not written", slog.String("client_id", id),
			slog.Any("error", err))
	}
	st.logger.WarnContext(ctx, "client cut off by an admin", slog.String("client_id", id), slog.String("actor", by.Name),
		slog.Int("exposed", len(exposed)), slog.Int("revoked", len(out.Revoked)), slog.Int("failed", len(out.Failed)))
	return out, nil
}

// RevokeExposure revokes the connections of client id's exposure since
// since that are still stored — those whose revocation failed during the
// cut-off, and reads whose rows reached the trail after it — each with its
// notice to the user; audited (client.exposure_revoked). The client must be
// disabled already: revoking while it still reads would chase it.
func (st *Store) RevokeExposure(ctx context.Context, clients *clientauth.Clients, id string, since time.Time,
	by Actor) (*CutOff, error) {
	org, err := st.clientIn(ctx, id, by)
	if err != nil {
		return nil, err
	}
	c, err := clients.Get(ctx, id)
	if errors.Is(err, clientauth.ErrClientNotFound) {
		return nil, problem.Detail(ErrNotFound, "no such client")
	} else if err != nil {
		return nil, err
	}
	if !c.Disabled {
		return nil, problem.Detail(ErrInvalid, "the client is not disabled: cut it off first")
	}
	exposed, err := st.Exposure(ctx, id, since)
	if err != nil {
		return nil, err
	}
	out := &CutOff{ClientID: id, Since: since, Exposed: exposed, Revoked: []string{}, Failed: []string{},
		AtProvider: map[string]string{}}
	st.revokeExposed(ctx, c, exposed, out, by)
	st.auditAfter(ctx, Event{Kind: "client.exposure_revoked", Org: org, ClientID: id, Target: id, Detail: map[string]any{
		"since": since.UTC(), "exposed": len(exposed), "revoked": len(out.Revoked), "failed": len(out.Failed)}}, by)
	return out, nil
}

// Revoking an exposure runs within the admin's request: a few at a time
// (StoreConfig.RevokeParallel, so one slow provider does not hold up the
// rest), none started after StoreConfig.RevokeBudget — each revocation's own
// provider call is bounded by the provider timeout. What the budget leaves
// undone is listed as failed, kept, and revoked by "Revoke what is left".
const (
	defaultRevokeParallel = 8
	defaultRevokeBudget   = 20 * time.Second
)

// revokeExposed revokes each exposed connection through the one owner of a
// connection's end, with the notice that tells its user why, and records the
// outcome in out.
func (st *Store) revokeExposed(ctx context.Context, c clientauth.Client, exposed []Exposed, out *CutOff, by Actor) {
	why := &notice.Notice{Kind: notice.KindClientCutOff, ClientID: c.ID, ClientName: c.Name}
	// Detached from the admin's browser (a revocation once begun is seen
	// through), bounded by the budget for starting new ones.
	budget, cancel := context.WithTimeout(context.WithoutCancel(ctx), st.revokeBudget)
	defer cancel()
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		slots = make(chan struct{}, st.revokeParallel)
		late  int
	)
	for _, x := range exposed {
		select {
		case slots <- struct{}{}:
		case <-budget.Done():
		}
		if budget.Err() != nil {
			mu.Lock()
			out.Failed = append(out.Failed, x.ConnectionID)
			late++
			mu.Unlock()
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			rev, err := st.revoke(context.WithoutCancel(ctx), x.ConnectionID, by, why)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, ErrNotFound): // gone meanwhile
			case err != nil:
				st.logger.ErrorContext(ctx, "cut-off: revoking a connection failed", slog.String("connection_id", x.ConnectionID),
					slog.Any("error", err))
				out.Failed = append(out.Failed, x.ConnectionID)
			default: // deleted here; the provider's answer is in its own audit row too
				out.Revoked = append(out.Revoked, x.ConnectionID)
				out.AtProvider[x.ConnectionID] = rev.AtProvider
			}
		})
	}
	wg.Wait()
	if late > 0 {
		st.logger.WarnContext(ctx, "cut-off: the revocation budget ran out; revoke what is left again",
			slog.String("client_id", c.ID), slog.Int("not_revoked", late), slog.Duration("budget", st.revokeBudget))
	}
	slices.Sort(out.Revoked)
	slices.Sort(out.Failed)
}
