package webhook

import "github.com/connectd/connectd/internal/vault"

// The payload data of each event type: one builder per kind, so every
// emitter writes the same shape (docs/webhooks.md). Ids and names only.

func user(u vault.UserRef) map[string]any {
	return map[string]any{"issuer": u.Issuer, "subject": u.Subject}
}

// ElicitationEvent reports an elicitation that ended (status completed,
// declined, expired or failed, with reason when given) to the client that
// minted it.
func ElicitationEvent(status, id, clientID string, u vault.UserRef, provider string, scopes []string, reason string) Event {
	data := map[string]any{"elicitation_id": id, "user": user(u), "provider": provider, "scopes": nonNil(scopes),
		"status": status}
	if reason != "" {
		data["reason"] = reason
	}
	return Event{Type: "elicitation." + status, Clients: []string{clientID}, Data: data}
}

// ConnectionEvent reports a change of a connection (created, scopes
// changed, reauthorization required, revoked) to the clients approved for
// it; extra adds type-specific members (old_scopes, account_changed,
// reason, by).
func ConnectionEvent(typ string, c vault.Connection, clients []string, extra map[string]any) Event {
	data := map[string]any{"connection_id": c.ID, "user": user(c.User), "provider": c.Provider,
		"scopes": nonNil(c.Scopes), "status": string(c.Status)}
	for k, v := range extra {
		data[k] = v
	}
	return Event{Type: typ, Clients: clients, Data: data}
}

// ApprovalEvent reports to a client that its approval for the user's
// connection to provider was withdrawn, by whom ("user", "admin").
func ApprovalEvent(clientID string, u vault.UserRef, provider, by string) Event {
	return Event{Type: ApprovalWithdrawn, Clients: []string{clientID},
		Data: map[string]any{"user": user(u), "provider": provider, "by": by}}
}
