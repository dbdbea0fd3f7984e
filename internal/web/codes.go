package web

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/connectd/connectd/internal/mcpauth"
)

// The one table from the errors of the packages below web to the answer a
// client sees: status, stable code, description and headers (pkgsite's
// internal/derrors is the model). The packages return their sentinels,
// wrapped; none imports this one or picks a status; no handler builds an
// answer by reading an error's text. docs/openapi.yaml lists every code,
// docs/identity.md says when each authentication code is given.

// Challenges sent in WWW-Authenticate (RFC 6750 §3): no error code when no
// credentials were sent at all.
const (
	challengeMissing = `Bearer realm="connectd"`
	challengeInvalid = `Bearer realm="connectd", error="invalid_token"`
)

// row is one line of the table. header, when set, adds the answer's
// headers from the error itself.
type row struct {
	err    error
	status int
	code   string
	desc   string
	header func(error) http.Header
}

func challenge(c string) func(error) http.Header {
	return func(error) http.Header { return http.Header{"Www-Authenticate": {c}} }
}

// codes is read top to bottom: the first row whose error err is answers it.
var codes = []row{
	// Authentication of /v1 calls (package mcpauth).
	{mcpauth.ErrMissingClientKey, http.StatusUnauthorized, "invalid_client",
		"an Authorization: Bearer client key is required", challenge(challengeMissing)},
	{mcpauth.ErrInvalidClientKey, http.StatusUnauthorized, "invalid_client", "the client key is not valid",
		challenge(challengeInvalid)},
	{mcpauth.ErrClientDisabled, http.StatusUnauthorized, "invalid_client", "the client is disabled",
		challenge(challengeInvalid)},
	{mcpauth.ErrMissingUserToken, http.StatusUnauthorized, "missing_user_token",
		"the user's access token is required in " + mcpauth.UserTokenHeader, challenge(challengeMissing)},
	{mcpauth.ErrIssuerUnavailable, http.StatusServiceUnavailable, "jwks_unavailable",
		"the token issuer's keys could not be fetched; retry later", jwksRetryAfter},
	{mcpauth.ErrTokenExpired, http.StatusUnauthorized, "token_expired", "the user token has expired",
		challenge(challengeInvalid)},
	{mcpauth.ErrTokenNotYetValid, http.StatusUnauthorized, "token_not_yet_valid", "the user token is not valid yet",
		challenge(challengeInvalid)},
	{mcpauth.ErrUntrustedIssuer, http.StatusUnauthorized, "untrusted_issuer", "the user token's issuer is not trusted",
		challenge(challengeInvalid)},
	{mcpauth.ErrWrongAudience, http.StatusUnauthorized, "wrong_audience",
		"the user token was not issued for this client's resource", challenge(challengeInvalid)},
	{mcpauth.ErrIdentity, http.StatusUnauthorized, "invalid_token",
		"the user token's sub or iss is not an identity connectd accepts", challenge(challengeInvalid)},
	{mcpauth.ErrInvalidToken, http.StatusUnauthorized, "invalid_token", "the user token is not valid",
		challenge(challengeInvalid)},
}

// jwksRetryAfter is the Retry-After of a 503 jwks_unavailable: in whole
// seconds (at least one) when the error says when the keys may be fetched
// again, else 30.
func jwksRetryAfter(err error) http.Header {
	ra := "30"
	if d, ok := mcpauth.RetryAfter(err); ok {
		ra = strconv.Itoa(int(max(1, (d+time.Second-1)/time.Second))) // rounded up
	}
	return http.Header{"Retry-After": {ra}}
}

// fromTable is the table's answer to err, if a row has it.
func fromTable(err error) (*Error, bool) {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			e := &Error{Status: c.status, Code: c.code, Description: c.desc, Err: err}
			if c.header != nil {
				e.Header = c.header(err)
			}
			return e, true
		}
	}
	return nil, false
}

// AsError is the answer err gets: the *Error a handler meant, the table's
// row, a database that cannot serve, a caller that went away, or the
// generic internal error.
func AsError(err error) *Error { return asError(err) }
