// Package admin is connectd's operator surface: pages under /admin, a JSON API
// under /admin/api, and the Store the `connectd admin` CLI shares with them.
// Operators answer "who has linked what, for which MCP server, since when, is
// it healthy?" and cut access in one action.
//
// It owns the admin_keys table (API keys, stored as SHA-256 only) and writes
// its own rows into the shared audit trail (audit_events). To list and
// describe connections it reads — never writes — tables of other packages
// (connections of vault, consents of connect, clients of mcpauth, audit_events)
// with the read-only SQL in query.go, because those listings join tables of
// packages that must not know each other. Every change goes through the
// owner: the vault deletes and revokes a connection (vault.Store.DeleteWith),
// and the consents are withdrawn by a WithdrawFunc that internal/server wires to
// the connect package, inside the vault's transaction. It must not import
// connect.
//
// Authentication: pages need an admin session — a separate cookie
// (SessionCookie) issued only after an OIDC login at the configured admin
// issuer whose identity passes the Policy; the JSON API needs an admin API key
// (Authorization: Bearer cka_…). Everyone else gets 403 on every admin route:
// the route table marks each route's access, and Routes wraps each handler in
// its guard, so no handler can be reached unguarded. State-changing pages take
// a confirmation page and a CSRF token bound to the admin session.
//
// It must never read a sealed credential column, show or log a token, key,
// cookie or state, or let an end-user session, a client key or a user token
// stand in for an admin.
package admin
