// Package admin is connectd's operator surface: pages under /admin, a JSON API
// under /admin/api, and the Store the `connectd admin` CLI shares with them.
// Operators answer "who has linked what, for which MCP server, since when, is
// it healthy?" and cut access in one action.
//
// It owns the admin_keys table (API keys, stored as SHA-256 only, each an
// operator's or one organization's with a role), the organizations' admins
// (org_admins: assignments; org_admin_claims: group claim mappings;
// admin_signins: what each identity's latest admin sign-in was admitted by)
// and writes its rows into the shared audit trail through package audit, in
// the organization of the object acted on, with the actor's role. To list and
// describe connections it reads — never writes — tables of other packages
// (connections of vault, consents of consent, clients of mcpauth, audit_events
// of audit)
// with the read-only SQL in query.go, because those listings join tables of
// packages that must not know each other. Every change goes through the
// owner: the vault deletes and revokes a connection (vault.Store.DeleteWith),
// and package consent withdraws the consents, inside the vault's
// transaction. It must not import connect.
//
// Authentication: pages need an admin session — a separate cookie
// (SessionCookie) issued only after an OIDC login at a login issuer whose
// identity passes the Policy (an operator) or has a role in an organization
// (package signin runs the sign-in, as it does for connect's /login); the
// JSON API needs an admin API key (Authorization: Bearer cka_…). Everyone
// else gets 403 on every admin route: the route table marks each route's
// access and the least role it needs, and Routes wraps each handler in its
// guard, so no handler can be reached unguarded or by a lower role. The guard
// re-reads the principal's memberships on every request and picks the acting
// organization (?org=); every Store read and action is scoped by it, and an
// object of another organization is ErrNotFound, as one that does not exist.
// Operators act on every organization. State-changing pages take a
// confirmation page and a CSRF token bound to the admin session.
//
// It must never read a sealed credential column, show or log a token, key,
// cookie or state, or let an end-user session, a client key or a user token
// stand in for an admin; nor show or change one organization's objects to an
// admin of another.
package admin
