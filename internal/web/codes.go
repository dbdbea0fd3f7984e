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
	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/proxy"
	"github.com/connectd/connectd/internal/refusal"
	"github.com/connectd/connectd/internal/release"
	"github.com/connectd/connectd/internal/vault"
)

// The one table from the errors of the packages below web to the answer a
// client sees: status, stable code, description and headers (pkgsite's
// internal/derrors is the model). The packages return their sentinels,
// wrapped; none imports this one or picks a status; no handler builds an
// answer by reading an error's text. A route chooses only the answer's
// format — the JSON problem (WriteAPIError), the page (WritePageError), the
// RFC 6749 token endpoint's (AsOAuthError) — and reads what else an answer
// is from its row (Error.Mint, NamesConnection, ClientRefused), never from
// its code string (TestNothingBranchesOnACode). docs/openapi.yaml lists
// every /v1 and token endpoint code, docs/identity.md the sign-in pages'
// and says when each authentication code is given (TestErrorTableIsClosed).

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
//
// The rest are what the answer is, for the routes that format it: oauth
// is its RFC 6749 §5.2 / RFC 8693 code at the token endpoint when the /v1
// code means nothing to an OAuth client (the /v1 code then rides in
// connectd_error; empty: the code as it is); client marks a refusal of the
// client's own credentials (RFC 6749 invalid_client: 401 with the Basic
// challenge to a Basic client there; sampled as a bad client key); mint an
// answer that asks the MCP server to send the user through a connect link
// (the token endpoint adds the POST /v1/elicitations body); names one
// about a connection the handler knows, which names it (account.id) so
// that the mint asks for that account.
type row struct {
	err    error
	as     func(error) bool
	status int
	code   string
	desc   string
	about  string
	header func(error) http.Header
	fields func(error) map[string]any

	oauth  string
	client bool
	mint   bool
	names  bool
}

func challenge(c ...string) func(error) http.Header {
	return func(error) http.Header { return http.Header{"Www-Authenticate": append([]string(nil), c...)} }
}

// codes is read top to bottom: the first row whose error err is answers it.
var codes = []row{
	// Sign-in (package signin), first: its errors wrap refusal.ErrSignIn,
	// and the mcpauth sentinels an ID token or an issuer fails with get the
	// sign-in page's answer there, not the /v1 one below. The descriptions
	// are the page's words.
	signIn(mcpauth.ErrUnknownIssuer, http.StatusBadRequest, "unknown_issuer", "There is no sign-in at that issuer."),
	signIn(mcpauth.ErrLoginState, http.StatusBadRequest, "invalid_state",
		"This sign-in link was already used or has expired. Please start again."),
	signIn(mcpauth.ErrStateMismatch, http.StatusBadRequest, "state_mismatch",
		"This sign-in was started in another browser. Please start again here."),
	signIn(mcpauth.ErrIssuerMismatch, http.StatusBadRequest, "issuer_mismatch",
		"The sign-in answer came from an unexpected issuer."),
	signIn(mcpauth.ErrLoginDenied, http.StatusForbidden, "login_denied", "Sign-in was cancelled or refused."),
	signIn(mcpauth.ErrLoginFailed, http.StatusBadRequest, "login_failed",
		"The issuer did not complete the sign-in. Please start again."),
	signIn(mcpauth.ErrIssuerUnavailable, http.StatusServiceUnavailable, "issuer_unavailable",
		"The sign-in service cannot be reached. Please try again later."),
	signIn(mcpauth.ErrInvalidToken, http.StatusBadRequest, "invalid_id_token",
		"The issuer's answer could not be verified. Please start again."),
	// Described by the sign-in's own rule (problem.Detail).
	{err: refusal.ErrReturnTo, status: http.StatusBadRequest, code: "invalid_return_to",
		desc: "return_to is not a path this sign-in returns to."},
	{err: refusal.ErrBadForm, status: http.StatusBadRequest, code: "bad_form", desc: "The form could not be read."},
	{err: refusal.ErrCSRF, status: http.StatusForbidden, code: "csrf_failed",
		desc: "The form has expired. Reload the page and try again."},
	// Admin roles (package admin): the route needs a higher role in the
	// acting organization; nothing was read or changed.
	{err: refusal.ErrRoleInsufficient, status: http.StatusForbidden, code: "role_insufficient",
		desc: "your role in this organization does not allow this; nothing was changed"},
	// MCP servers created or edited by an admin (internal/admin,
	// clients_edit.go): a resource URI another client holds, in any
	// organization. The fixed description: the error's text names the
	// holder, which may be another organization's.
	{err: clientauth.ErrResourceTaken, status: http.StatusConflict, code: "resource_taken",
		desc: "a resource URI is already registered to another MCP server (resource URIs are unique across every " +
			"MCP server, disabled ones and other organizations' included)"},

	// Authentication of /v1 calls (package mcpauth).
	auth(clientauth.ErrMissingClientKey, http.StatusUnauthorized, "invalid_client",
		"an Authorization: Bearer (or DPoP, with a DPoP proof) client key is required",
		challenge(challengeMissing, dpopChallengeMissing)).clientRefused(),
	auth(clientauth.ErrInvalidClientKey, http.StatusUnauthorized, "invalid_client", "the client key is not valid",
		challenge(challengeInvalid, dpopChallengeInvalid)).clientRefused(),
	auth(clientauth.ErrClientDisabled, http.StatusUnauthorized, "invalid_client", "the client is disabled",
		challenge(challengeInvalid, dpopChallengeInvalid)).clientRefused(),
	auth(clientauth.ErrInvalidAssertion, http.StatusUnauthorized, "invalid_client", "the client assertion is not valid",
		challenge(challengeInvalid, dpopChallengeInvalid)).clientRefused(),
	auth(clientauth.ErrSwappedHeaders, http.StatusUnauthorized, "invalid_client",
		"the headers are swapped: the client key goes in Authorization (Bearer cks_…), the user's access token in "+
			mcpauth.UserTokenHeader, challenge(challengeInvalid, dpopChallengeInvalid)).clientRefused(),
	auth(clientauth.ErrMissingDPoP, http.StatusUnauthorized, "invalid_dpop_proof",
		"this call needs one DPoP header: a proof signed by one of the client's registered keys "+
			"(the client requires DPoP, or used the DPoP authorization scheme)",
		challenge(dpopChallengeProof)).clientRefused(),
	auth(clientauth.ErrInvalidDPoP, http.StatusUnauthorized, "invalid_dpop_proof",
		"the DPoP proof is not valid: send exactly one, signed by one of the client's registered keys, "+
			"for this method and URL, with ath the hash of the Authorization credential and a fresh jti",
		challenge(dpopChallengeProof)).clientRefused(),
	auth(clientauth.ErrAuthMethods, http.StatusBadRequest, "invalid_request",
		"use exactly one client authentication method (client_secret_basic, client_secret_post or private_key_jwt)", nil),
	auth(mcpauth.ErrMissingUserToken, http.StatusUnauthorized, "missing_user_token",
		"the user's access token is required in "+mcpauth.UserTokenHeader, challenge(challengeMissing)).oauthAs("invalid_grant"),
	auth(mcpauth.ErrIssuerUnavailable, http.StatusServiceUnavailable, "jwks_unavailable",
		"the token issuer's keys could not be fetched; retry later", jwksRetryAfter),
	auth(mcpauth.ErrTokenExpired, http.StatusUnauthorized, "token_expired", "the user token has expired",
		challenge(challengeInvalid)).oauthAs("invalid_grant"),
	auth(mcpauth.ErrTokenNotYetValid, http.StatusUnauthorized, "token_not_yet_valid", "the user token is not valid yet",
		challenge(challengeInvalid)).oauthAs("invalid_grant"),
	auth(mcpauth.ErrUntrustedIssuer, http.StatusUnauthorized, "untrusted_issuer", "the user token's issuer is not trusted",
		challenge(challengeInvalid)).oauthAs("invalid_grant"),
	auth(mcpauth.ErrWrongAudience, http.StatusUnauthorized, "wrong_audience",
		"the user token was not issued for this client's resource", challenge(challengeInvalid)).oauthAs("invalid_grant"),
	auth(mcpauth.ErrIdentity, http.StatusUnauthorized, "invalid_token",
		"the user token's sub or iss is not an identity connectd accepts", challenge(challengeInvalid)).oauthAs("invalid_grant"),
	auth(mcpauth.ErrInvalidToken, http.StatusUnauthorized, "invalid_token", "the user token is not valid",
		challenge(challengeInvalid)).oauthAs("invalid_grant"),

	// request_state (POST /v1/elicitations/resolve).
	{err: refusal.ErrStateInvalid, status: http.StatusBadRequest, code: "request_state_invalid",
		desc: "the request_state is not one connectd issued, or was altered"},
	{err: refusal.ErrStateExpired, status: http.StatusBadRequest, code: "request_state_expired",
		desc: "the request_state has expired; mint a new elicitation"},
	{err: refusal.ErrStateReplayed, status: http.StatusConflict, code: "request_state_replayed",
		desc: "the request_state was already resolved; use the fresh one from that answer"},
	{err: refusal.ErrStateWrongUser, status: http.StatusForbidden, code: "request_state_wrong_user",
		desc: "the request_state was issued for another user"},
	{err: refusal.ErrStateWrongClient, status: http.StatusForbidden, code: "request_state_wrong_client",
		desc: "the request_state was issued to another client"},
	{err: refusal.ErrDigestMismatch, status: http.StatusBadRequest, code: "request_digest_mismatch",
		desc: "request_digest does not match the one given at mint"},

	// The token endpoint's request (RFC 6749 §5.2, RFC 8693 §2.2.2),
	// described by the error's problem.Detail.
	{err: refusal.ErrGrantType, status: http.StatusBadRequest, code: "unsupported_grant_type",
		desc: "the grant_type is not supported"},
	{err: refusal.ErrTarget, status: http.StatusBadRequest, code: "invalid_target",
		desc: "the target names no provider connectd releases"},

	// The release decision (package release): what a client may receive.
	{err: release.ErrProxyOnly, status: http.StatusForbidden, code: "token_release_disabled",
		desc: "this client is registered proxy-only: it never receives a credential", oauth: "unauthorized_client"},
	{err: release.ErrProviderNotAllowed, status: http.StatusForbidden, code: "provider_not_allowed",
		desc: "this client may not use that provider", oauth: "invalid_target"},
	{err: release.ErrConsentRequired, status: http.StatusForbidden, code: "consent_required",
		desc: "the user has not approved this client for it; mint an elicitation", fields: consentFields, mint: true},
	{err: release.ErrAccountRequired, status: http.StatusConflict, code: "account_required",
		desc: "this client may use several of the user's accounts there; name one with account=<id>", fields: accountFields},
	{err: release.ErrAccountMismatch, status: http.StatusConflict, code: "account_mismatch",
		desc: "the provider signed in another account than the request was for; nothing was stored"},
	{err: release.ErrInsufficientScope, status: http.StatusForbidden, code: "insufficient_scope", mint: true, names: true,
		desc: "the connection lacks required scopes; mint an elicitation with them", fields: scopeFields},

	// Connections (package vault, keyring), as a handler wraps them with
	// problem.About(provider, err).
	{err: vault.ErrNotConnected, status: http.StatusNotFound, code: "not_connected", mint: true,
		desc: "the user has no such connection", about: "no %s connection for this user"},
	{as: isMissingScopes, status: http.StatusForbidden, code: "insufficient_scope", mint: true, names: true,
		desc:  "the connection lacks required scopes; mint an elicitation with them",
		about: "the %s connection lacks required scopes; mint an elicitation with them", fields: missingScopes},
	{err: vault.ErrReauthorizationRequired, status: http.StatusConflict, code: "reauthorization_required",
		mint: true, names: true,
		desc:  "the connection must be authorized again; mint an elicitation",
		about: "the %s connection must be authorized again; mint an elicitation"},
	{err: vault.ErrProviderUnavailable, status: http.StatusServiceUnavailable, code: "provider_unavailable",
		desc:  "the provider could not be reached to refresh the token; retry later",
		about: "%s could not be reached to refresh the token; retry later", header: retryAfter("5")},
	{err: vault.ErrAccountChanged, status: http.StatusForbidden, code: "consent_required", mint: true,
		desc:  "the connection is now to another provider account; mint an elicitation",
		about: "the %s connection is now to another provider account; mint an elicitation",
		fields: func(error) map[string]any {
			return map[string]any{"unapproved_scopes": []string{}, "account_changed": true}
		}},
	{err: keyring.ErrDecrypt, status: http.StatusConflict, code: "reauthorization_required", mint: true, names: true,
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
	{err: clientauth.ErrProxyNotAllowed, status: http.StatusForbidden, code: "proxy_not_allowed",
		desc:  "this client may not make that call (its request rules)",
		about: "this client may not make that call at %s (its request rules)"},
	// Per-request approval (package approval): the call waits for the user;
	// "approval" is the link to hand over, as a mint answers it.
	{err: refusal.ErrApprovalRequired, status: http.StatusForbidden, code: "user_approval_required",
		desc:   "the user must approve this call first; hand them approval.url as a URL-mode elicitation, then retry it unchanged",
		fields: approvalFields},
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
		desc:   "the provider's rate budget for this connection or its app is spent (its own answer said so, or its documented limit is reached); it was not called; retry after Retry-After",
		about:  "the rate budget at %s is spent for now (the provider was not called); retry after Retry-After",
		header: heldRetryAfter},
	{err: proxy.ErrBusy, status: http.StatusServiceUnavailable, code: "provider_unavailable",
		desc:  "too many calls to the provider are in flight; retry shortly",
		about: "too many calls to %s are in flight; retry shortly", header: retryAfter("1")},
	{err: proxy.ErrUnavailable, status: http.StatusServiceUnavailable, code: "provider_unavailable",
		desc: "the provider could not be reached; retry later", about: "%s could not be reached; retry later",
		header: retryAfter("5")},
	{err: proxy.ErrTimeout, status: http.StatusGatewayTimeout, code: "provider_timeout",
		desc:  "the provider did not answer within the proxy's deadline (15 s, or the caller's Connectd-Timeout); retry later",
		about: "%s did not answer within the proxy's deadline; retry later", header: retryAfter("5")},
	{err: proxy.ErrBadTimeout, status: http.StatusBadRequest, code: "invalid_request",
		desc: "Connectd-Timeout must be a positive duration with its unit, e.g. 5s or 1500ms"},

	// Organizations (package org): an organization without its own app at a
	// provider that may not use the deployment's. Described by the error
	// (the organization, the provider, the command that sets an app).
	{err: org.ErrNoApp, status: http.StatusConflict, code: "provider_app_required",
		desc: "the client's organization has no app of its own at this provider and may not use the deployment's"},

	// An organization's own trusted issuers (package org, issuers.go), as
	// the admin surfaces will answer them; described by the error (the id
	// or URL refused).
	{err: org.ErrIssuerReserved, status: http.StatusConflict, code: "issuer_reserved",
		desc: "a deployment issuer has that id or URL"},
	{err: org.ErrIssuerExists, status: http.StatusConflict, code: "issuer_exists",
		desc: "an issuer with that id or URL exists already"},
	{err: org.ErrIssuerNotFound, status: http.StatusNotFound, code: "issuer_not_found",
		desc: "the organization has no such issuer"},

	// The kinds of package problem (webhook, the admin store...), described
	// by the error's problem.Detail.
	{err: problem.ErrInvalid, status: http.StatusBadRequest, code: "invalid_request", desc: "the request is not valid"},
	// At the token endpoint: a connection id that is not the user's
	// connection at the provider.
	{err: problem.ErrNotFound, status: http.StatusNotFound, code: "not_found", desc: "no such resource",
		oauth: "invalid_target"},
	{err: problem.ErrConflict, status: http.StatusConflict, code: "conflict", desc: "the request conflicts with what exists"},
}

// signIn is a row of sign-in: err, met during a sign-in.
func signIn(err error, status int, code, desc string) row {
	return row{as: func(e error) bool { return errors.Is(e, refusal.ErrSignIn) && errors.Is(e, err) },
		status: status, code: code, desc: desc}
}

// auth is a row of authentication (package mcpauth).
func auth(err error, status int, code, desc string, header func(error) http.Header) row {
	return row{err: err, status: status, code: code, desc: desc, header: header}
}

// clientRefused is r, a refusal of the client's own credentials.
func (r row) clientRefused() row {
	r.client = true
	return r
}

// oauthAs is r, named code at the token endpoint.
func (r row) oauthAs(code string) row {
	r.oauth = code
	return r
}

// releaseRefusal is the release decision's refusal in err (errors.As).
func releaseRefusal(err error) *release.Refusal {
	var r *release.Refusal
	errors.As(err, &r)
	return r
}

// consentFields: what the client must have approved — for a connection
// that grew past its approval or a required scope outside it.
func consentFields(err error) map[string]any {
	r := releaseRefusal(err)
	if r.Unapproved == nil {
		return nil
	}
	return map[string]any{"unapproved_scopes": r.Unapproved, "account_changed": r.AccountChanged}
}

// approvalFields: the approval link (refusal.ApprovalRequired.Approval).
func approvalFields(err error) map[string]any {
	var a *refusal.ApprovalRequired
	if !errors.As(err, &a) || a.Approval == nil {
		return nil
	}
	return map[string]any{"approval": a.Approval}
}

// accountFields: the accounts to choose from.
func accountFields(err error) map[string]any {
	r := releaseRefusal(err)
	accounts := r.Accounts
	if accounts == nil {
		accounts = []release.Account{}
	}
	return map[string]any{"accounts": accounts}
}

// scopeFields: the scopes missing, and the connection to step up (the mint
// names it with account=<id>, so the right account is asked for).
func scopeFields(err error) map[string]any {
	r := releaseRefusal(err)
	f := map[string]any{"missing_scopes": r.Missing}
	if r.Connection != "" {
		f["account"] = map[string]any{"id": r.Connection}
	}
	return f
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
	for i := range codes {
		c := &codes[i]
		if c.as != nil && !c.as(err) || c.as == nil && !errors.Is(err, c.err) {
			continue
		}
		e := &Error{Status: c.status, Code: c.code, Description: describe(*c, err), Err: err, row: c}
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
	if r := releaseRefusal(err); r != nil {
		return r.Describe()
	}
	if name, ok := problem.Subject(err); ok && c.about != "" {
		return fmt.Sprintf(c.about, name)
	}
	return c.desc
}
