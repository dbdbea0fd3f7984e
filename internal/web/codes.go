package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/vault"
)

// The one table from the errors of the packages below web to the answer a
// client sees: status, stable code, description and headers (pkgsite's
// internal/derrors is the model). The packages return their sentinels,
// wrapped; none imports this one or picks a status; no handler builds an
// answer by reading an error's text. docs/openapi.yaml lists every code,
// docs/identity.md says when each authentication code is given.

// Challenges sent in WWW-Authenticate (RFC 6750 §3): no error code when no
// credentials were sent at all. A client credential is accepted in the
// Bearer and the DPoP scheme (RFC 9449 §7.1), so a refused one is
// challenged in both, DPoP with the proofs' algorithms.
const (
	challengeMissing = `Bearer realm="connectd"`
	challengeInvalid = `Bearer realm="connectd", error="invalid_token"`
)

var (
	dpopAlgs             = `algs="` + strings.Join(clientauth.AssertionAlgorithms(), " ") + `"`
	dpopChallengeMissing = `DPoP realm="connectd", ` + dpopAlgs
	dpopChallengeInvalid = `DPoP realm="connectd", error="invalid_token", ` + dpopAlgs
	dpopChallengeProof   = `DPoP realm="connectd", error="invalid_dpop_proof", ` + dpopAlgs
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

func challenge(c ...string) func(error) http.Header {
	return func(error) http.Header { return http.Header{"Www-Authenticate": append([]string(nil), c...)} }
}

// codes is read top to bottom: the first row whose error err is answers it.
var codes = []row{
	// Authentication of /v1 calls (package mcpauth).
	auth(clientauth.ErrMissingClientKey, http.StatusUnauthorized, "invalid_client",
		"an Authorization: Bearer (or DPoP, with a DPoP proof) client key is required",
		challenge(challengeMissing, dpopChallengeMissing)),
	auth(clientauth.ErrInvalidClientKey, http.StatusUnauthorized, "invalid_client", "the client key is not valid",
		challenge(challengeInvalid, dpopChallengeInvalid)),
	auth(clientauth.ErrClientDisabled, http.StatusUnauthorized, "invalid_client", "the client is disabled",
		challenge(challengeInvalid, dpopChallengeInvalid)),
	auth(clientauth.ErrInvalidAssertion, http.StatusUnauthorized, "invalid_client", "the client assertion is not valid",
		challenge(challengeInvalid, dpopChallengeInvalid)),
	auth(clientauth.ErrMissingDPoP, http.StatusUnauthorized, "invalid_dpop_proof",
		"this call needs one DPoP header: a proof signed by one of the client's registered keys "+
			"(the client requires DPoP, or used the DPoP authorization scheme)",
		challenge(dpopChallengeProof)),
	auth(clientauth.ErrInvalidDPoP, http.StatusUnauthorized, "invalid_dpop_proof",
		"the DPoP proof is not valid: send exactly one, signed by one of the client's registered keys, "+
			"for this method and URL, with ath the hash of the Authorization credential and a fresh jti",
		challenge(dpopChallengeProof)),
	auth(clientauth.ErrAuthMethods, http.StatusBadRequest, "invalid_request",
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
