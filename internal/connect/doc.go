// Package connect is connectd's user- and MCP-server-facing HTTP layer. It
// joins the leaf packages (mcpauth for identity and client keys, session for
// cookies, vault for credentials, provider for the third parties, consent for
// approvals, audit for the audit trail) into handlers and owns the tables of
// the connect flow: elicitations, OAuth states and used request_state ids.
//
// It serves, from one Server (route table: Routes, flowRoutes, apiRoutes):
//   - browser sign-in at the MCP authorization servers (/login,
//     /login/callback, /logout, through package signin, which the admin pages
//     share), the session page;
//   - the elicitation flow: the connect page /c/{id} with consent and the
//     API-key form, the redirect to the provider and /oauth/callback;
//   - the /v1 API for MCP servers: minting and resolving elicitations,
//     long-polled status, connections, tokens and unlinking.
//
// It subscribes to the process's one Postgres listener (cache.Hub, run by
// internal/server and handed over as Config.Hub) for the long-poll wake-ups
// (notify.go) and the consent cache of package consent. Its Run runs the
// periodic sweep (sweep.go) and the writer of the sampled audit rows
// (sampled.go: token reads and refusals are only counted on the request's
// path; the writer puts them in the trail in batches, retrying what fails).
//
// Handlers are func(w, r) error adapted by web.Page / web.API; wanted statuses
// travel as *web.Error.
//
// It must never:
//   - put a token, code, state, verifier, cookie or key into a log line, a
//     page, an error or a URL it builds;
//   - hand a credential to anyone but an authenticated MCP server, for the
//     user whose valid token it presents and only for scopes that user
//     approved for it (DESIGN invariants 5 and 6);
//   - act on a connect URL for a session of another (issuer, subject), or on
//     a state that is missing, replayed or bound to another browser;
//   - redirect to a target that is not a path on this site, except the
//     provider's own authorize endpoint;
//   - be imported by another package than the wiring in internal/server
//     (admin shares approvals through package consent, not through connect).
package connect
