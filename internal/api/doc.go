// Package api is connectd's MCP-server surface: the /v1 API (minting,
// reading, long-polling, cancelling and resolving elicitations; listing,
// reading and unlinking connections), the provider API proxy (/v1/proxy)
// and the OAuth token endpoint (RFC 8693 token exchange, /oauth/token, and
// its RFC 8414 metadata). It owns the request_state (sealed under its own
// keyring purpose) and its table of used ids (request_state_uses), and the
// sampled audit of token reads, proxied calls and refused calls (sampled.go:
// counted on the request's path, written in batches by Run).
//
// Every JSON route is one endpoint served by serveJSON (serve.go, the shape
// of tailscale/setec's serveJSON): decode what the request names → who is
// calling (the client and the user) → the operation → encode. The token read
// and the token exchange are two answer formats (writeTokenDoc,
// writeExchangeDoc) of one operation, readToken, which releases through
// package release like the proxy does (release). The proxy streams, so it is
// a plain handler with the same steps.
//
// Handlers are func(w, r) error adapted by web.API; wanted statuses travel
// as *web.Error or as the typed refusals the one error table in internal/web
// answers.
//
// It must never:
//   - put a token, code, state, verifier, cookie or key into a log line, an
//     error or a URL it builds;
//   - hand a credential to anyone but an authenticated MCP server, for the
//     user whose valid token it presents and only for scopes that user
//     approved for it (DESIGN invariants 5 and 6), nor a raw credential to a
//     proxy-only client (invariant 16);
//   - decide itself what a client may receive: package release decides;
//   - serve a page or read a browser session (that is internal/connect's);
//   - be imported by another package than the wiring in internal/server.
package api
