package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/proxy"
	"github.com/connectd/connectd/internal/vault"
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

// row is one line of the table. The error is err (errors.Is), or, when as
// is set, an error as reports. desc is the description; about, when set,
// is the one for an error problem.About names a subject (the provider the
// caller named), its "%s"; a problem.Detail description replaces both. header and fields,
// when set, add headers and body members from the error itself.
type row struct {
	err    error
	as     func(error) bool
	status int
	code   string
	desc   string
	about  string
	header func(error) http.Header
	fields func(error) map[string]any
}

func challenge(c string) func(error) http.Header {
	return func(error) http.Header { return http.Header{"Www-Authenticate": {c}} }
}

// codes is read top to bottom: the first row whose error err is answers it.
var codes = []row{
	// Authentication of /v1 calls (package mcpauth).
	auth(mcpauth.ErrMissingClientKey, http.StatusUnauthorized, "invalid_client",
		"an Authorization: Bearer client key is required", challenge(challengeMissing)),
	auth(mcpauth.ErrInvalidClientKey, http.StatusUnauthorized, "invalid_client", "the client key is not valid",
		challenge(challengeInvalid)),
	auth(mcpauth.ErrClientDisabled, http.StatusUnauthorized, "invalid_client", "the client is disabled",
		challenge(challengeInvalid)),
	auth(mcpauth.ErrInvalidAssertion, http.StatusUnauthorized, "invalid_client", "the client assertion is not valid",
		challenge(challengeInvalid)),
	auth(mcpauth.ErrInvalidDPoP, http.StatusUnauthorized, "invalid_dpop_proof",
		"this client must prove each call with a valid DPoP proof signed by one of its registered keys",
		challenge(`DPoP realm="connectd", error="invalid_dpop_proof", algs="`+strings.Join(mcpauth.AssertionAlgorithms(), " ")+`"`)),
	auth(mcpauth.ErrAuthMethods, http.StatusBadRequest, "invalid_request",
		"use exactly one client authentication method (client_secret_basic, client_secret_post or private_key_jwt)", nil),
	auth(mcpauth.ErrMissingUserToken, http.StatusUnauthorized, "missing_user_token",
		"the user's access token is required in "+mcpauth.UserTokenHeader, challenge(challengeMissing)),
	auth(mcpauth.ErrIssuerUnavailable, http.StatusServiceUnavailable, "jwks_unavailable",
		"the token issuer's keys could not be fetched; retry later", jwksRetryAfter),
	auth(mcpauth.ErrTokenExpired, http.StatusUnauthorized, "token_expired", "the user token has expired",
		challenge(challengeInvalid)),
	auth(mcpauth.ErrTokenNotYetValid, http.StatusUnauthorized, "token_not_yet_valid", "the user token is not valid yet",
		challenge(challengeInvalid)),
	auth(mcpauth.ErrUntrustedIssuer, http.StatusUnauthorized, "untrusted_issuer", "the user token's issuer is not trusted",
		challenge(challengeInvalid)),
	auth(mcpauth.ErrWrongAudience, http.StatusUnauthorized, "wrong_audience",
		"the user token was not issued for this client's resource", challenge(challengeInvalid)),
	auth(mcpauth.ErrIdentity, http.StatusUnauthorized, "invalid_token",
		"the user token's sub or iss is not an identity connectd accepts", challenge(challengeInvalid)),
	auth(mcpauth.ErrInvalidToken, http.StatusUnauthorized, "invalid_token", "the user token is not valid",
		challenge(challengeInvalid)),

	// Connections (package vault, keyring), as a handler wraps them with
	// problem.About(provider, err).
	{err: vault.ErrNotConnected, status: http.StatusNotFound, code: "not_connected",
		desc: "the user has no such connection", about: "no %s connection for this user"},
	{as: isMissingScopes, status: http.StatusForbidden, code: "insufficient_scope",
		desc:  "the connection lacks required scopes; mint an elicitation with them",
		about: "the %s connection lacks required scopes; mint an elicitation with them", fields: missingScopes},
	{err: vault.ErrReauthorizationRequired, status: http.StatusConflict, code: "reauthorization_required",
		desc:  "the connection must be authorized again; mint an elicitation",
		about: "the %s connection must be authorized again; mint an elicitation"},
	{err: vault.ErrProviderUnavailable, status: http.StatusServiceUnavailable, code: "provider_unavailable",
		desc:  "the provider could not be reached to refresh the token; retry later",
		about: "%s could not be reached to refresh the token; retry later", header: retryAfter("5")},
	{err: vault.ErrAccountChanged, status: http.StatusForbidden, code: "consent_required",
		desc:  "the connection is now to another provider account; mint an elicitation",
		about: "the %s connection is now to another provider account; mint an elicitation",
		fields: func(error) map[string]any {
			return map[string]any{"unapproved_scopes": []string{}, "account_changed": true}
		}},
	{err: keyring.ErrDecrypt, status: http.StatusConflict, code: "reauthorization_required",
		desc:  "the stored credential cannot be used; mint an elicitation",
		about: "the stored %s credential cannot be used; mint an elicitation"},

	// The provider API proxy (package proxy; the request rules are
	// mcpauth's), as connect's proxy route wraps them with
	// problem.About(provider, err). Refusals of the request come first:
	// nothing was looked up, nothing reached the provider.
	{err: proxy.ErrPath, status: http.StatusBadRequest, code: "invalid_proxy_path",
		desc: "the path must be a plain path below the provider's API: no empty, \".\" or \"..\" segment in any " +
			"encoding, no \";\", no backslash or control character, no escaped \"/\" around such a segment"},
	{err: proxy.ErrMethod, status: http.StatusMethodNotAllowed, code: "method_not_allowed",
		desc:   "the proxy forwards only " + proxy.Allow,
		header: func(error) http.Header { return http.Header{"Allow": {proxy.Allow}} }},
	{err: proxy.ErrOverride, status: http.StatusBadRequest, code: "proxy_override_refused",
		desc: "the call carries a method override or a URL rewrite (a header such as X-HTTP-Method-Override or " +
			"X-Original-URL, a _method parameter or form field): send the method and path you mean"},
	{err: mcpauth.ErrProxyNotAllowed, status: http.StatusForbidden, code: "proxy_not_allowed",
		desc:  "this client may not make that call (its request rules)",
		about: "this client may not make that call at %s (its request rules)"},
	{err: proxy.ErrNotSupported, status: http.StatusNotFound, code: "proxy_not_supported",
		desc:  "connectd knows no API base URL for this provider; read the token instead",
		about: "connectd knows no API base URL for %s; read the token instead"},
	{err: proxy.ErrTooLarge, status: http.StatusRequestEntityTooLarge, code: "request_too_large",
		desc: "the request body is over the proxy's limit (a form body: over 1 MiB, or of unknown length)"},
	{err: proxy.ErrResponseTooLarge, status: http.StatusBadGateway, code: "provider_response_too_large",
		desc: "the provider's answer is over the proxy's limit", about: "%s's answer is over the proxy's limit"},
	{err: proxy.ErrRefused, status: http.StatusUnauthorized, code: "provider_unauthorized",
		desc: "the provider refused the credential, refreshed where it could be; the user may have to connect again",
		about: "%s refused the credential, refreshed where it could be (at most once in " +
			strconv.Itoa(int(vault.RefusedRefreshWindow/time.Minute)) + " minutes per connection); the user may have to connect again"},
	{as: isHeld, status: http.StatusTooManyRequests, code: "provider_rate_limited",
		desc: "the provider asked not to be called for now; retry later", about: "%s asked not to be called for now; retry later",
		header: heldRetryAfter},
	{err: proxy.ErrBusy, status: http.StatusServiceUnavailable, code: "provider_unavailable",
		desc:  "too many calls to the provider are in flight; retry shortly",
		about: "too many calls to %s are in flight; retry shortly", header: retryAfter("1")},
	{err: proxy.ErrUnavailable, status: http.StatusServiceUnavailable, code: "provider_unavailable",
		desc: "the provider could not be reached; retry later", about: "%s could not be reached; retry later",
		header: retryAfter("5")},

	// The kinds of package problem (webhook, the admin store...), described
	// by the error's problem.Detail.
	{err: problem.ErrInvalid, status: http.StatusBadRequest, code: "invalid_request", desc: "the request is not valid"},
	{err: problem.ErrNotFound, status: http.StatusNotFound, code: "not_found", desc: "no such resource"},
	{err: problem.ErrConflict, status: http.StatusConflict, code: "conflict", desc: "the request conflicts with what exists"},
}

// auth is a row of authentication (package mcpauth).
func auth(err error, status int, code, desc string, header func(error) http.Header) row {
	return row{err: err, status: status, code: code, desc: desc, header: header}
}

func isMissingScopes(err error) bool {
	var ms *vault.MissingScopesError
	return errors.As(err, &ms)
}

func missingScopes(err error) map[string]any {
	var ms *vault.MissingScopesError
	errors.As(err, &ms)
	return map[string]any{"missing_scopes": ms.Missing}
}

func isHeld(err error) bool {
	var h *proxy.HeldError
	return errors.As(err, &h)
}

// heldRetryAfter is the Retry-After of a call the provider's own
// Retry-After holds back: what is left of it, in whole seconds (at least one).
func heldRetryAfter(err error) http.Header {
	var h *proxy.HeldError
	errors.As(err, &h)
	return http.Header{"Retry-After": {strconv.Itoa(int(max(1, (h.Left+time.Second-1)/time.Second)))}}
}

func retryAfter(s string) func(error) http.Header {
	return func(error) http.Header { return http.Header{"Retry-After": {s}} }
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
		if c.as != nil && !c.as(err) || c.as == nil && !errors.Is(err, c.err) {
			continue
		}
		e := &Error{Status: c.status, Code: c.code, Description: describe(c, err), Err: err}
		if c.header != nil {
			e.Header = c.header(err)
		}
		if c.fields != nil {
			e.Fields = c.fields(err)
		}
		return e, true
	}
	return nil, false
}

// AsError is the answer err gets: the *Error a handler meant, the table's
// row, a database that cannot serve, a caller that went away, or the
// generic internal error.
func AsError(err error) *Error { return asError(err) }

// describe is row c's description for err: the error's own
// problem.Detail, else the one naming its problem.About subject, else the
// plain one.
func describe(c row, err error) string {
	if d, ok := problem.Description(err); ok {
		return d
	}
	if name, ok := problem.Subject(err); ok && c.about != "" {
		return fmt.Sprintf(c.about, name)
	}
	return c.desc
}
