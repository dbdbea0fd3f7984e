// Package egress owns connectd's outbound HTTP and every rule about it: the
// one *http.Client through which connectd fetches everything from other
// servers (OpenID/RFC 8414 discovery, JWKS, token, refresh and revocation
// calls, API-key verification); Bound, which holds any other client (a
// test's) to the same timeout, redirect and size rules; CheckURL, the one
// rule for a URL connectd is configured with or discovers; CheckDestination,
// what that client refuses of a URL without asking DNS, asked of the
// dialer's own guard, for a URL kept to be called later (webhook
// endpoints); and Discover, the one authorization-server metadata lookup
// (RFC 8414, then OpenID Connect, the document naming exactly the issuer
// asked for), used by provider and mcpauth alike.
//
// The guard is code.dny.dev/ssrf, installed as the net.Dialer's Control
// function, so the policy is applied to the address actually being connected
// to, after name resolution, on every dial: a name that resolves (or later
// re-resolves, DNS rebinding) to a private, loopback, link-local, CGNAT,
// multicast, unspecified or otherwise special-purpose address is refused
// before a packet is sent. On top of that the client refuses plain http,
// follows no redirects, bounds every phase with a timeout and caps every
// response body.
//
// Calls may leave through the operator's egress HTTP proxies (Proxies, per
// Class: token, refresh, revoke, api, webhooks, the rest), so they come
// from fixed addresses (proxy.go). The guard still decides on the target:
// the target's name is resolved here and every address put to the guard
// before the proxy is dialed, and the proxy is asked to CONNECT to the
// checked IP address, never to the name (which it would resolve again);
// TLS over the tunnel names and verifies the URL's host. The proxy's own
// address is configuration, not input, and is not put to the guard.
//
// Every call made under a traced request or job gets a client span (Trace,
// built into New's client): method, host, status, never the path, query,
// headers or body, and no trace context sent to the third party.
//
// Development and tests may name exact host:port pairs (Config.AllowHosts)
// that may be reached over http and on loopback — nothing else, and never a
// private or link-local network.
//
// It must never:
//   - decide whether an address is safe with its own IP parsing (that is the
//     ssrf library's job, on the resolved address, or on an IP-literal host
//     in CheckDestination);
//   - honour HTTP(S)_PROXY, or let net/http speak to a proxy itself (it
//     would CONNECT to the name, resolved by the proxy past the guard);
//   - put a proxy's credential anywhere but its Proxy-Authorization;
//   - follow a redirect, read an unbounded body or wait without a timeout;
//   - put a response body, a header value or a request's secret into an
//     error (callers must not put secrets into URLs: net/http quotes the URL
//     in its errors);
//   - import another connectd package: it is a leaf used by mcpauth,
//     provider and cmd.
package egress
