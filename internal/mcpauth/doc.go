// Package mcpauth establishes who the user is. It owns:
//
//   - verification of MCP user access tokens (RFC 9068 JWTs) against trusted
//     issuers — the deployment's (configured) and the organizations' own (an
//     IssuerSource: package org), an organization's client accepting only
//     its own and, where it allows them, the deployment's — with discovery (egress.Discover: RFC 8414, then OIDC), the
//     issuers' keys in the one JWKS cache (jose.Cache), and a cache of
//     verified tokens (by hash, until they expire);
//   - the identities it accepts (CheckSubject, CheckIssuer);
//   - the OIDC relying-party side of browser login (authorization code + PKCE
//     S256 + nonce) and its single-use login states (table login_states).
//
// Who the client is — the MCP-server registry, client keys, assertions,
// DPoP, /v1 authentication — is package clientauth's, which imports this
// one; what both share about JWTs (the allow-list, public keys only, the
// JWKS cache) is package jose's.
//
// It must never: store or log a token, code, state, verifier or nonce in
// clear; accept a token of an issuer the calling client's organization
// does not trust (from the verified-token cache neither); accept a token whose audience is not one of the calling client's
// registered resources (no token passthrough); accept an algorithm outside
// the asymmetric allow-list; answer 401 when it merely could not fetch keys
// (that is a 503); make an outbound call through a client that egress.Bound
// has not bounded, or check a URL by another rule than egress.CheckURL;
// import clientauth. It does not import the session or vault packages; HTTP
// glue that combines login with sessions lives in internal/connect.
package mcpauth
