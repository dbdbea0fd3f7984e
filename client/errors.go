package client

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Sentinel errors. Every refusal connectd answers is an *APIError; match it
// with errors.Is against these, or errors.As it for the status, code and
// details.
var (
	// ErrNotConnected: the user has no connection to the provider. Mint an
	// elicitation.
	ErrNotConnected = errors.New("connectd: not connected")
	// ErrConsentRequired: the user has a connection but has not approved this
	// MCP server for all of it: never, or not since the connection gained
	// scopes (APIError.UnapprovedScopes) or changed provider account
	// (APIError.AccountChanged). Mint an elicitation: the user approves on
	// connectd's consent page, with no new sign-in at the provider.
	ErrConsentRequired = errors.New("connectd: consent required")
	// ErrInsufficientScope: the connection itself lacks a required scope;
	// APIError.MissingScopes lists the missing ones. Mint an elicitation
	// asking for them.
	ErrInsufficientScope = errors.New("connectd: insufficient scope")
	// ErrReauthorizationRequired: the provider refused the stored grant.
	// Mint an elicitation (for a token read with an account, with
	// MintRequest.Account set to it).
	ErrReauthorizationRequired = errors.New("connectd: reauthorization required")
	// ErrAccountRequired: this client is approved for several of the
	// user's accounts at the provider and the call named none.
	// APIError.Accounts lists them (see Accounts and ChooseAccount): ask the
	// user which, then call again with that account's id. It is a choice,
	// not a missing connection: NeedsConnection is false.
	ErrAccountRequired = errors.New("connectd: account required")
	// ErrNotFound: unknown elicitation, or one minted by another client or
	// for another user; or an account (connection id) that is not one of
	// the user's at the provider (connectd does not tell them apart).
	ErrNotFound = errors.New("connectd: not found")
	// ErrInvalidClient: the client key is missing, wrong, expired or the
	// client is disabled.
	ErrInvalidClient = errors.New("connectd: client key refused")
	// ErrUserToken: the user's MCP access token was refused (missing,
	// expired, another audience, untrusted issuer, bad signature…);
	// APIError.Code says which.
	ErrUserToken = errors.New("connectd: user token refused")
	// ErrUnknownProvider: the provider is not in connectd's catalog.
	ErrUnknownProvider = errors.New("connectd: unknown provider")
	// ErrProviderNotAllowed: this client may not use that provider.
	ErrProviderNotAllowed = errors.New("connectd: provider not allowed for this client")
	// ErrInvalidRequest: malformed input (bad scope, message too long, …),
	// or a proxied call connectd does not forward as it is: a path that is
	// not a plain path below the provider's API (invalid_proxy_path), a
	// method outside GET, HEAD, POST, PUT, PATCH, DELETE (405
	// method_not_allowed), a method override or URL rewrite
	// (proxy_override_refused).
	ErrInvalidRequest = errors.New("connectd: invalid request")
	// ErrRequestState matches every refusal of a request_state; the
	// specific errors below say why.
	ErrRequestState = errors.New("connectd: request_state refused")
	// ErrRequestStateInvalid: tampered with or not issued by connectd.
	ErrRequestStateInvalid = errors.New("connectd: request_state invalid")
	// ErrRequestStateExpired: past its lifetime; mint a new elicitation.
	ErrRequestStateExpired = errors.New("connectd: request_state expired")
	// ErrRequestStateReplayed: already resolved once (each is single-use).
	ErrRequestStateReplayed = errors.New("connectd: request_state replayed")
	// ErrRequestStateWrongUser: minted for another user.
	ErrRequestStateWrongUser = errors.New("connectd: request_state of another user")
	// ErrRequestStateWrongClient: minted for another client.
	ErrRequestStateWrongClient = errors.New("connectd: request_state of another client")
	// ErrRequestDigestMismatch: the request_digest differs from the one
	// bound at mint time.
	ErrRequestDigestMismatch = errors.New("connectd: request_digest mismatch")
	// ErrRateLimited: too many requests; APIError.RetryAfter says when to
	// retry.
	ErrRateLimited = errors.New("connectd: rate limited")
	// ErrUnavailable: connectd or a dependency (the provider, the issuer's
	// keys) is temporarily unavailable; retry later.
	ErrUnavailable = errors.New("connectd: temporarily unavailable")
	// ErrURLElicitationUnsupported: the negotiated MCP protocol version
	// predates URL-mode elicitation (2025-11-25), or the MCP client did not
	// declare support for it, so there is no way to send the user to
	// connectd.
	ErrURLElicitationUnsupported = errors.New("connectd: the MCP client cannot do URL-mode elicitation")
	// ErrApprovalRequired: a proxied call matched a request rule that asks
	// the user first (403 user_approval_required), and the provider was not
	// called. APIError.Approval (see ApprovalRequired) is the approval
	// elicitation: hand it to the MCP client (RequireApproval), wait for
	// it, and once it is completed send exactly the same request again.
	ErrApprovalRequired = errors.New("connectd: user approval required")
)

// APIError is a refusal from connectd: the HTTP status and the stable error
// code of its JSON error envelope (docs/api.md). It never contains a secret.
type APIError struct {
	Status      int    // HTTP status
	Code        string // stable error code, e.g. "not_connected"; empty if the answer was not connectd's JSON
	Description string // human-readable explanation from connectd
	RequestID   string // connectd's request id, for its logs
	// MissingScopes lists the scopes the connection lacks (insufficient_scope).
	MissingScopes []string
	// UnapprovedScopes lists the scopes the credential carries that the user
	// has not approved for this MCP server, and AccountChanged says the
	// connection is to another provider account than the approved one
	// (consent_required).
	UnapprovedScopes []string
	AccountChanged   bool
	// Accounts lists the user's accounts at the provider this client may
	// use (account_required): name one with its ID.
	Accounts []Account
	// Approval is the approval elicitation of a user_approval_required
	// refusal of a proxied call (see ApprovalRequired); nil otherwise.
	Approval *Approval
	// RetryAfter is the Retry-After delay of a 429 or 503 answer, if any.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "connectd: %d", e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Description != "" {
		b.WriteString(": " + e.Description)
	}
	if len(e.MissingScopes) > 0 {
		b.WriteString(" (missing scopes: " + strings.Join(e.MissingScopes, " ") + ")")
	}
	return b.String()
}

// codeErrors maps connectd's error codes to sentinels.
var codeErrors = map[string][]error{
	"not_connected":              {ErrNotConnected},
	"consent_required":           {ErrConsentRequired},
	"insufficient_scope":         {ErrInsufficientScope},
	"reauthorization_required":   {ErrReauthorizationRequired},
	"account_required":           {ErrAccountRequired},
	"not_found":                  {ErrNotFound},
	"invalid_client":             {ErrInvalidClient},
	"invalid_dpop_proof":         {ErrInvalidClient}, // a client that must prove its calls with DPoP
	"missing_user_token":         {ErrUserToken},
	"invalid_token":              {ErrUserToken},
	"token_expired":              {ErrUserToken},
	"token_not_yet_valid":        {ErrUserToken},
	"untrusted_issuer":           {ErrUserToken},
	"wrong_audience":             {ErrUserToken},
	"unknown_provider":           {ErrUnknownProvider},
	"provider_not_allowed":       {ErrProviderNotAllowed},
	"invalid_request":            {ErrInvalidRequest},
	"invalid_scope":              {ErrInvalidRequest},
	"request_too_large":          {ErrInvalidRequest},
	"request_state_invalid":      {ErrRequestState, ErrRequestStateInvalid},
	"request_state_expired":      {ErrRequestState, ErrRequestStateExpired},
	"request_state_replayed":     {ErrRequestState, ErrRequestStateReplayed},
	"request_state_wrong_user":   {ErrRequestState, ErrRequestStateWrongUser},
	"request_state_wrong_client": {ErrRequestState, ErrRequestStateWrongClient},
	"request_digest_mismatch":    {ErrRequestState, ErrRequestDigestMismatch},
	"rate_limited":               {ErrRateLimited},
	"provider_unavailable":       {ErrUnavailable},
	"provider_timeout":           {ErrUnavailable},
	"jwks_unavailable":           {ErrUnavailable},
	// The provider API proxy (/v1/proxy): the provider refused the
	// credential even refreshed (connect again), asked not to be called
	// for now, answered more than the proxy passes on; or connectd knows no
	// API for the provider.
	"provider_unauthorized":       {ErrReauthorizationRequired},
	"provider_rate_limited":       {ErrRateLimited},
	"provider_response_too_large": {ErrInvalidRequest},
	"proxy_not_supported":         {ErrProviderNotAllowed},
	"token_release_disabled":      {ErrProviderNotAllowed}, // a proxy-only client: call through the proxy
	"proxy_not_allowed":           {ErrProviderNotAllowed}, // outside the client's request rules
	"provider_app_required":       {ErrProviderNotAllowed}, // the client's organization has no app at the provider
	"database_unavailable":        {ErrUnavailable},
	// The proxy's refusals of the call itself, before anything is looked
	// up: a path that is not a plain path below the API base, a method it
	// does not forward (405, with Allow), a method override or URL rewrite.
	// The call is wrong as made; sending it again will not help.
	"invalid_proxy_path":     {ErrInvalidRequest},
	"method_not_allowed":     {ErrInvalidRequest},
	"proxy_override_refused": {ErrInvalidRequest},
	// A request rule that asks: the user approves this call first.
	"user_approval_required": {ErrApprovalRequired},
}

// KnownCodes lists the error codes this client maps to its sentinels,
// sorted: docs/openapi.yaml lists each of them (TestErrorCodesMatchTheSpec).
func KnownCodes() []string {
	out := make([]string, 0, len(codeErrors))
	for c := range codeErrors {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// Is reports whether target is one of the sentinels e's code (or, for an
// answer without a code, its status) stands for.
func (e *APIError) Is(target error) bool {
	for _, s := range codeErrors[e.Code] {
		if s == target {
			return true
		}
	}
	if _, known := codeErrors[e.Code]; known {
		return false
	}
	switch e.Status {
	case http.StatusTooManyRequests:
		return target == ErrRateLimited
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return target == ErrUnavailable
	case http.StatusUnauthorized:
		// An unknown 401 code from a newer connectd is still a credential
		// problem; which one the description says.
		return target == ErrUserToken && e.Code != ""
	}
	return false
}

// NeedsConnection reports whether err means the user must go through
// connectd's connect flow before the provider can be used: not connected, no
// consent for this MCP server, missing scopes, or a dead grant. The answer to
// all four is the same: mint an elicitation (see Client.RequireConnection).
func NeedsConnection(err error) bool {
	return errors.Is(err, ErrNotConnected) || errors.Is(err, ErrConsentRequired) ||
		errors.Is(err, ErrInsufficientScope) || errors.Is(err, ErrReauthorizationRequired)
}

// Accounts returns the accounts an account_required refusal lists, or nil.
func Accounts(err error) []Account {
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == "account_required" {
		return ae.Accounts
	}
	return nil
}

// MissingScopes returns the scopes an insufficient_scope refusal lists, or nil.
func MissingScopes(err error) []string {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.MissingScopes
	}
	return nil
}
