// Package refusal names the refusals of connectd's own surfaces that no
// package below them owns — a browser's sign-in, an MCP server's
// request_state, a token exchange request — so that the one error table
// (internal/web's codes.go) gives each its answer: status, stable code, and
// what the RFC 6749 token endpoint calls it. What a client may not receive
// is package release's (its typed refusals). Like package problem it picks no status and imports
// nothing of connectd: the handlers return these sentinels, wrapped (with
// problem.Detail for words that name what the caller sent), and a route
// chooses only the answer's format.
package refusal

import (
	"errors"
	"fmt"
)

// Sign-in (package signin): every error of a browser's login at an OIDC
// issuer is returned wrapping ErrSignIn, so that the same mcpauth sentinel
// (ErrInvalidToken, ErrIssuerUnavailable) gets the sign-in page's answer
// there and the /v1 answer on the API.
var (
	ErrSignIn = errors.New("sign-in")
	// ErrReturnTo: a return_to the sign-in's path rule refuses.
	ErrReturnTo = errors.New("return_to refused")
	// ErrBadForm: a form body that cannot be read.
	ErrBadForm = errors.New("form unreadable")
	// ErrCSRF: a form whose CSRF token is not its session's.
	ErrCSRF = errors.New("csrf token mismatch")
)

// request_state (POST /v1/elicitations/resolve): each wraps
// ErrRequestState, so that the refusal is audited as one.
var (
	ErrRequestState     = errors.New("request_state refused")
	ErrStateInvalid     = fmt.Errorf("%w: invalid", ErrRequestState)
	ErrStateExpired     = fmt.Errorf("%w: expired", ErrRequestState)
	ErrStateReplayed    = fmt.Errorf("%w: already used", ErrRequestState)
	ErrStateWrongUser   = fmt.Errorf("%w: minted for another user", ErrRequestState)
	ErrStateWrongClient = fmt.Errorf("%w: minted for another client", ErrRequestState)
	ErrDigestMismatch   = fmt.Errorf("%w: request digest mismatch", ErrRequestState)
)

// The token endpoint's request (RFC 6749 §5.2, RFC 8693 §2.2.2); a
// malformed parameter is problem.ErrInvalid.
var (
	// ErrGrantType: a grant_type other than token exchange.
	ErrGrantType = errors.New("unsupported grant_type")
	// ErrTarget: no target, or an audience or resource that names no
	// provider (connection) connectd releases.
	ErrTarget = errors.New("invalid target")
)

// Per-request approval (package approval, issue 36): a proxied call under a
// request rule that asks the user, with no approval for it. The provider was
// not called. ApprovalRequired carries the approval link the MCP server
// hands to its client (the answer's "approval" member).
var ErrApprovalRequired = errors.New("user approval required")

// ApprovalRequired is ErrApprovalRequired with the approval to hand over.
type ApprovalRequired struct {
	// Words are the operator's words for the call ("Open issues in your
	// repositories").
	Words string
	// Approval is the answer's "approval" member: the elicitation document.
	Approval any
}

func (e *ApprovalRequired) Error() string { return "user approval required: " + e.Words }
func (e *ApprovalRequired) Unwrap() error { return ErrApprovalRequired }
