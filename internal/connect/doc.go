// Package connect is connectd's browser surface. It serves, from one Server
// (route table: routes in server.go), one file per action as miniflux's ui
// package does:
//   - browser sign-in at the MCP authorization servers (/login,
//     /login/callback, /logout, through package signin, which the admin pages
//     share; login.go) and the session page (session_show.go);
//   - the connect flow: the connect page /c/{id} (connect_show.go), the
//     account chooser (account_choose.go), consent (consent_submit.go), the
//     API-key form (apikey_submit.go), the redirect to the provider
//     (oauth_redirect.go) and /oauth/callback (oauth_callback.go), "Not you?"
//     (connect_switch.go); what the steps share (the elicitation and session
//     check, the offer, storing and completing) is flow.go;
//   - the account page and its actions (account_show.go, account_withdraw.go,
//     account_label.go, account_disconnect.go, account_notice_dismiss.go).
//
// It owns the OAuth states of provider round trips (oauth_states, with the
// PKCE verifiers sealed under their own keyring purpose) and their sweep.
// Elicitations are package elicitation's store, approvals package consent's;
// a connection's events, withdrawals and end go through package lifecycle.
//
// Handlers are func(w, r) error adapted by web.Page; wanted statuses travel
// as *web.Error.
//
// It must never:
//   - put a token, code, state, verifier, cookie or key into a log line, a
//     page, an error or a URL it builds;
//   - act on a connect URL for a session of another (issuer, subject), or on
//     a state that is missing, replayed or bound to another browser;
//   - redirect to a target that is not a path on this site, except the
//     provider's own authorize endpoint;
//   - hand a credential to the browser, or answer the MCP-server surface
//     (that is internal/api's);
//   - be imported by another package than the wiring in internal/server
//     (admin shares approvals through package consent, not through connect).
package connect
