package webhook

import (
	"maps"
	"slices"
	"time"

	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/release"
	"github.com/connectd/connectd/internal/scope"
	"github.com/connectd/connectd/internal/vault"
)

// The payload data of each event type: one builder per kind, so every
// emitter writes the same shape (docs/webhooks.md). Ids and names only.

func user(u identity.User) map[string]any {
	return map[string]any{"issuer": u.Issuer, "subject": u.Subject}
}

// ElicitationEvent reports an elicitation that ended (status completed,
// declined, expired or failed, with reason when given) to the client that
// minted it.
func ElicitationEvent(status, id, clientID string, u identity.User, provider string, scopes []string, reason string) Event {
	data := map[string]any{"elicitation_id": id, "user": user(u), "provider": provider, "scopes": nonNil(scopes),
		"status": status}
	if reason != "" {
		data["reason"] = reason
	}
	return Event{Type: "elicitation." + status, Clients: []string{clientID}, Data: data}
}

// RequestApprovalEvent reports a per-request approval (issue 36, package
// approval) to the client that asked it: approval.requested, .granted or
// .denied. data are the call's ids and shape — the method, the path as
// sent, the rule — never its body.
func RequestApprovalEvent(typ, org, clientID string, u identity.User, data map[string]any) Event {
	d := map[string]any{"user": user(u)}
	for k, v := range data {
		d[k] = v
	}
	return Event{Type: typ, Clients: []string{clientID}, Data: d, Org: org}
}

// ConnectionEvents reports a change of connection c (created, scopes
// changed, reauthorization required, revoked) to each client approved for it
// (approvals, read in the change's transaction before anything was
// withdrawn), one event each, naming only the scopes the release decision
// lets that client see (release.Decision.Visible): a client approved for
// read never learns from a payload that the connection also grants
// mail.send. old, when not nil, are the scopes before the change
// (old_scopes), cut per client the same way. extra adds type-specific
// members (account_changed, reason, by).
//
// The connection is its organization's (c.Org, issue 34), and approvals are
// the holders of that organization (consent.HolderApprovalsIn): each
// client's event is decided for a client of c's organization, and is
// delivered only to a client of it (Event.Org): a client of another
// organization named in approvals receives nothing.
func ConnectionEvents(typ string, c vault.Connection, approvals map[string]consent.Approval, old []string,
	extra map[string]any) []Event {
	h := c.Held()
	var out []Event
	for _, id := range slices.Sorted(maps.Keys(approvals)) {
		a := approvals[id]
		d := release.Client{ID: id, Org: h.Org}.Decide(h, &a, false)
		data := map[string]any{"connection_id": c.ID, "display_name": "", "user": user(c.User),
			"provider": c.Provider, "scopes": d.Visible(), "status": string(c.Status)}
		if d.MayName() { // another account's name is not this client's to know
			data["display_name"] = c.DisplayName
			if c.Label != "" {
				data["label"] = c.Label
			}
		}
		for k, v := range extra {
			data[k] = v
		}
		if old != nil {
			data["old_scopes"] = nonNil(scope.Intersect(a.Scopes, old))
		}
		out = append(out, Event{Type: typ, Clients: []string{id}, Data: data, Org: h.Org})
	}
	return out
}

// ApprovalEvent reports to a client that its approval for the user's
// connection connID at provider was withdrawn, by whom ("user", "admin").
func ApprovalEvent(clientID string, u identity.User, provider, connID, by string) Event {
	return Event{Type: ApprovalWithdrawn, Clients: []string{clientID},
		Data: map[string]any{"user": user(u), "provider": provider, "connection_id": connID, "by": by}}
}

// CutOffEvent reports to the client clientID that an administrator cut it
// off (disabled it: its keys are refused) as possibly compromised: since
// when its exposure was counted, how many connections it had received the
// credential of, how many of them were revoked and how many failed to be.
// Counts only: no user, connection or credential.
func CutOffEvent(clientID string, since time.Time, exposed, revoked, failed int) Event {
	return Event{Type: ClientCutOff, Clients: []string{clientID}, Data: map[string]any{
		"since": since.UTC().Format(time.RFC3339), "disabled": true,
		"exposed": exposed, "revoked": revoked, "failed": failed}}
}
