// Package connect is connectd's browser- and API-facing HTTP layer: it joins
// the leaf packages (mcpauth for identity, session for cookies, and later the
// vault and providers) into handlers. It serves browser sign-in at the MCP
// authorization servers (/login, /login/callback, /logout, through package
// signin, which the admin pages share), the session page, the elicitation
// flow and the /v1 API.
//
// Its Run holds the process's one Postgres listener (notify.go): it wakes
// long-polls and hands cache invalidations to their owners (vault's sealed
// credentials, mcpauth's client keys, package consent's approvals; see
// package cache). The approvals themselves and the audit trail are owned by
// packages consent and audit; this package grants, checks and records
// through them.
//
// Handlers are func(w, r) error adapted by web.Page / web.API; wanted statuses
// travel as *web.Error. It must never put a token, code, state, cookie or key
// into a log line, a page or a URL it builds, and never redirect to a target
// that is not a path on this site.
package connect
