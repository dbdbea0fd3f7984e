// Package elicitation is the store both of connectd's surfaces share: the
// elicitations table (one connect request: a client asking for a user's
// provider credentials with some scopes) and what goes with it. It owns the
// Elicitation type and its Status, ids (NewID, ValidID), the idempotent mint
// (RequestKey, InsertMinted, PendingFor, Detach), Get, the account choice,
// the outcome (Settle, SettleWith: first outcome wins, with its audit row and
// a NOTIFY in the same statement) and the ended events (EmitEnded, in the
// settling transaction), the long-poll wake-ups on the process's notification
// hub (Wakeups) and the per-client cap on long-polls (Waiters), the sweep of
// expired and old rows (Sweep), and the audit row of a request to either
// surface (Audit).
//
// The MCP-server surface (internal/api) mints, reads, waits for, cancels and
// resolves elicitations; the browser surface (internal/connect) shows and
// completes them. Each is built with the one Store internal/server makes.
//
// It must never:
//   - treat an id as authentication: it returns the row, and every caller
//     checks it against the authenticated client and user (DESIGN invariant
//     5; api's ownElicitation, connect's begin);
//   - hold or hand out a credential (it does not import the vault);
//   - import a surface (connect, api, admin) or be imported by the leaf
//     packages it uses (audit, cache, webhook, web).
package elicitation
