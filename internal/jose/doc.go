// Package jose holds what the two halves of authentication — who the user is
// (package mcpauth: user tokens, login) and who the client is (package
// clientauth: client keys, assertions, DPoP) — share about JWTs: the
// asymmetric signature allow-list, the refusal of crit, public keys only
// (PublicKeys), the 503 error for keys that cannot be had (ErrUnavailable),
// and the one JWKS cache (Cache, jwks.go) for issuers and clients alike:
// public keys only, following the answer's cache headers up to a lifetime,
// retrying a failing JWKS within seconds, refreshing early, at most once per
// interval, for an unknown key that may be newer than the cache, and
// verifying with a failing URL's last keys for an hour past their lifetime
// at most.
//
// It must never: accept a private or symmetric key, or an algorithm outside
// the allow-list; fetch through a client its caller has not bounded; import
// mcpauth or clientauth (they import it).
package jose
