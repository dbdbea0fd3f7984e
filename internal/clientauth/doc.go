// Package clientauth establishes who the client is: the MCP server calling
// connectd. It owns:
//
//   - the registry of MCP-server clients and their secret keys (tables clients
//     and client_keys), each client of one organization (clients.org_id,
//     Client.Org, loaded and cached with it; the organizations themselves
//     are package org's), and authentication of the /v1 API by client key, with
//     a brief cache of authenticated keys (by hash) that disabling a client or
//     rotating its keys clears on every replica (clientcache.go);
//   - client authentication without a shared secret: RFC 7523 client
//     assertions (private_key_jwt) against the keys a client registered (a
//     public JWK Set, or a JWKS URL fetched through egress into the one JWKS
//     cache, jose.Cache), and DPoP proofs (RFC 9449, one header, ath bound to
//     the Authorization credential, the DPoP scheme) by those keys, each jti
//     spent once across replicas (table client_assertions; assertion.go,
//     dpop.go), and the token endpoint's client authentication methods
//     (tokenclient.go);
//   - a client's proxy request rules (rules.go);
//   - the Authenticator of /v1 requests: the client first, then the user by
//     package mcpauth's Verifier (the one import between the two halves, in
//     this direction only).
//
// It must never: store or log a client key, assertion or proof in clear;
// accept a client assertion or DPoP proof twice, or signed by a key the
// client did not register; accept an algorithm outside the asymmetric
// allow-list; answer 401 when it merely could not fetch keys (that is a
// 503); make an outbound call through a client that egress.Bound has not
// bounded, or check a URL by another rule than egress.CheckURL. It does not
// import the session or vault packages.
package clientauth
