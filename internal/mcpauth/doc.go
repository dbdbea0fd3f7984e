// Package mcpauth establishes who is calling connectd. It owns:
//
//   - the registry of MCP-server clients and their secret keys (tables clients
//     and client_keys), and authentication of the /v1 API by client key, with
//     a brief cache of authenticated keys (by hash) that disabling a client or
//     rotating its keys clears on every replica (clientcache.go);
//   - client authentication without a shared secret: RFC 7523 client
//     assertions (private_key_jwt) against the keys a client registered (a
//     public JWK Set, or a JWKS URL fetched through egress into the JWKS
//     cache), and DPoP proofs (RFC 9449, ath bound to the Authorization
//     credential) by those keys, each jti spent once across replicas (table
//     client_assertions; assertion.go, dpop.go), and the token endpoint's
//     client authentication methods (tokenclient.go);
//   - verification of MCP user access tokens (RFC 9068 JWTs) against trusted
//     issuers, with discovery (egress.Discover: RFC 8414, then OIDC);
//   - the one JWKS cache (jwks.go), for issuers and clients alike: public
//     keys only, following the answer's cache headers up to a lifetime,
//     retrying a failing JWKS within seconds, refreshing early, at most once
//     per interval, for an unknown key that may be newer than the cache, and
//     verifying with a failing URL's last keys for an hour past their
//     lifetime at most;
//   - the OIDC relying-party side of browser login (authorization code + PKCE
//     S256 + nonce) and its single-use login states (table login_states).
//
// It must never: store or log a client key, token, code, state, verifier or
// nonce in clear; accept a client assertion or DPoP proof twice, or signed
// by a key the client did not register; accept a token whose audience is not one of the calling
// client's registered resources (no token passthrough); accept an algorithm
// outside the asymmetric allow-list; answer 401 when it merely could not fetch
// keys (that is a 503); make an outbound call through a client that
// egress.Bound has not bounded, or check a URL by another rule than
// egress.CheckURL. It does not import the session or vault packages; HTTP
// glue that combines login with sessions lives in internal/connect.
package mcpauth
