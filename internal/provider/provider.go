package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"
)

// Kind is a provider kind.
type Kind string

// Provider kinds.
const (
	KindOAuth2 Kind = "oauth2"  // OAuth 2.0 authorization code flow (with PKCE where supported)
	KindAPIKey Kind = "api_key" // the user types a secret; optionally verified by a test request
)

// Info describes a provider to callers and pages. It holds no secret.
type Info struct {
	Name          string
	DisplayName   string
	Kind          Kind
	AuthorizeHost string   // host the browser is sent to (oauth2), for the consent page
	DefaultScopes []string // requested when the caller asks for none (oauth2)
	PKCE          bool     // the authorize request carries an S256 challenge (oauth2)
	// Issuer is the provider's issuer identifier, when known (oauth2).
	Issuer string
	// IssParameterSupported: the provider sends RFC 9207 "iss" with every
	// authorization response, so a response without it is refused.
	IssParameterSupported bool
	// Revocation is how credentials are revoked at the provider (oauth2).
	Revocation RevocationStyle
	// NarrowOnRefresh: RefreshScoped returns an access token limited to the
	// asked subset of the grant (oauth2; see Spec.NarrowOnRefresh).
	NarrowOnRefresh bool
	// Verifiable: an api_key provider with a verification request.
	Verifiable bool
	// RefreshIdleLifetime: a refresh token unused this long lapses at the
	// provider (oauth2; 0: it does not). The health job keeps such
	// connections alive by refreshing them while idle.
	RefreshIdleLifetime time.Duration
	// RefreshReuseGrace: how long the provider still accepts a refresh
	// token it rotated away (oauth2; 0: not at all). See
	// Spec.RefreshReuseGrace.
	RefreshReuseGrace time.Duration
	// SelectAccount are the authorize parameters that ask the provider to
	// let the user choose (or add) an account rather than continue with the
	// one signed in (oauth2; e.g. prompt=select_account), sent when a
	// client asks to connect another account; nil where the provider has
	// none. Each replaces the parameter of the same name in the
	// AuthCodeURL answer (url.Values.Set, never a second copy): Google's
	// "consent select_account" keeps the prompt=consent its template sends
	// on every authorization. A copy. See Spec.SelectAccountParams.
	SelectAccount map[string]string
	// APIBaseURL is where the provider's API lives (Spec.APIBaseURL, its
	// placeholders filled): connectd's proxy forwards requests only to
	// paths under it, and refuses a provider without one ("").
	APIBaseURL string
	// ScopeDescriptions describe scopes in the user's terms, for the pages
	// (Spec.ScopeDescriptions); a scope not in it shows as its token. A copy.
	ScopeDescriptions map[string]string
	// LogoURL is the operator's https logo for the provider ("" for none).
	LogoURL string
	// Template is the built-in template the provider came from ("" for none),
	// which picks the monogram pages show without a LogoURL.
	Template string
	// APIAuth is how the proxy attaches the access token (oauth2) or API
	// key to those requests: APIAuth.HeaderValue puts it where
	// TokenPlaceholder stands. It describes the placement only, never
	// holding the credential.
	APIAuth APIAuth
	// RateLimits are the provider's limits the proxy keeps for the caller
	// (Spec.RateLimits). A copy.
	RateLimits []RateLimit
}

// Provider is any catalog entry. Use a type assertion (or Catalog.OAuth /
// Catalog.APIKey) to reach what its kind can do.
type Provider interface {
	Info() Info
}

// OAuth is a provider reached by the OAuth 2.0 authorization code flow.
type OAuth interface {
	Provider
	// AuthCodeURL is where the browser goes to authorize. It carries state,
	// the S256 PKCE challenge (when the provider supports PKCE), the exact
	// redirect URI and the scopes (the defaults when scopes is empty), plus
	// the provider's extra authorize parameters.
	AuthCodeURL(state, pkceChallenge, redirectURI string, scopes []string) string
	// Exchange trades an authorization code for tokens. redirectURI must be
	// the one AuthCodeURL was given.
	Exchange(ctx context.Context, code, verifier, redirectURI string) (*Token, error)
	// Refresh uses a refresh token. A response without a new refresh token
	// keeps the given one, so the returned Token always has one.
	Refresh(ctx context.Context, refreshToken string) (*Token, error)
	// RefreshScoped is Refresh asking for an access token limited to scopes,
	// a subset of the grant (RFC 6749 §6: "scope" on the refresh-token
	// grant). Only a provider whose Info says NarrowOnRefresh is known to
	// honour it; the answer's Scopes say what the provider granted (nil when
	// it did not say, which RFC 6749 §5.1 allows only when it granted
	// exactly what was asked). invalid_scope is ErrRejected with that Code.
	RefreshScoped(ctx context.Context, refreshToken string, scopes []string) (*Token, error)
	// Revoke revokes token at the provider; hint is "access_token",
	// "refresh_token" or "". ErrNotSupported when there is no revocation.
	Revoke(ctx context.Context, token, hint string) error
	// CheckIssuer checks the RFC 9207 "iss" parameter of an authorization
	// response ("" when absent): ErrIssuerMismatch when it names another
	// issuer, or is missing although the provider always sends it.
	CheckIssuer(iss string) error
}

// APIKey is a provider whose credential is a secret the user types.
type APIKey interface {
	Provider
	// Verify checks key with the provider's verification request, if one is
	// configured (else it only checks the key is well-formed).
	// ErrInvalidKey when the provider refuses it.
	Verify(ctx context.Context, key string) error
}

// Token is what a provider's token endpoint returned. Formatting it with fmt
// or slog prints no secret.
type Token struct {
	AccessToken  string
	TokenType    string
	RefreshToken string
	Expiry       time.Time // zero when the response had no expires_in
	Scopes       []string  // granted scopes as reported; nil when the response did not say
	AccountID    string    // the provider's account id, when its response says
	AccountLabel string    // a human label (workspace, login), when its response says
}

// String describes the token without its secrets.
func (t Token) String() string {
	return fmt.Sprintf("provider.Token{AccessToken:%s RefreshToken:%s TokenType:%s Expiry:%s Scopes:%v AccountID:%s AccountLabel:%s}",
		redacted(t.AccessToken), redacted(t.RefreshToken), t.TokenType, t.Expiry.Format(time.RFC3339), t.Scopes,
		t.AccountID, t.AccountLabel)
}

// Format makes every fmt verb print String.
func (t Token) Format(f fmt.State, _ rune) { io.WriteString(f, t.String()) }

// LogValue keeps secrets out of slog output.
func (t Token) LogValue() slog.Value {
	return slog.GroupValue(slog.String("access_token", redacted(t.AccessToken)),
		slog.String("refresh_token", redacted(t.RefreshToken)), slog.Time("expiry", t.Expiry))
}

func redacted(s string) string {
	if s == "" {
		return "none"
	}
	return "[redacted]"
}

// Secret is a configuration secret (a client secret). It prints as
// "[redacted]" through fmt, slog and encoding/json; Reveal returns it.
type Secret string

// Reveal returns the secret itself, for the one place that sends it.
func (s Secret) Reveal() string { return string(s) }

// String hides the secret.
func (s Secret) String() string { return "[redacted]" }

// Format makes every fmt verb print "[redacted]".
func (s Secret) Format(f fmt.State, _ rune) { io.WriteString(f, s.String()) }

// LogValue hides the secret from slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON hides the secret from encoding/json.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }

// Classes of provider failure. Every error from a provider call is an *Error
// whose Kind is one of these; test with errors.Is.
var (
	// ErrInvalidGrant: the code or refresh token is invalid, expired, revoked
	// or already used. The user must authorize again.
	ErrInvalidGrant = errors.New("invalid grant")
	// ErrUnavailable: 5xx, 429, timeout or network failure. Worth retrying
	// later; nothing was consumed as far as connectd can tell.
	ErrUnavailable = errors.New("provider unavailable")
	// ErrAccessDenied: the user (or the provider's policy) declined.
	ErrAccessDenied = errors.New("access denied")
	// ErrRejected: any other OAuth error (invalid_client, invalid_scope, …):
	// usually a configuration problem, not the user's.
	ErrRejected = errors.New("request rejected")
	// ErrBadResponse: the provider answered something that is not a usable
	// OAuth response (no access token, unparsable, too large).
	ErrBadResponse = errors.New("malformed provider response")
	// ErrNotSupported: the provider cannot do this (e.g. it has no revocation
	// endpoint, or no refresh token is available).
	ErrNotSupported = errors.New("not supported by the provider")
	// ErrInvalidKey: an API key was refused by the provider or is malformed.
	ErrInvalidKey = errors.New("API key rejected")
	// ErrIssuerMismatch: the RFC 9207 iss parameter is wrong or missing.
	ErrIssuerMismatch = errors.New("authorization response issuer mismatch")
	// ErrUnknownProvider: no such provider in the catalog (or not of the
	// asked kind).
	ErrUnknownProvider = errors.New("unknown provider")
)

// Error is a failed provider call. Its text names the provider, the
// operation, the class and, when the provider gave them, the OAuth error code
// and HTTP status; never a token, a secret or the provider's response body.
type Error struct {
	Provider string
	Op       string // "exchange", "refresh", "revoke", "verify", "discovery", "authorize"
	Kind     error  // ErrInvalidGrant, ErrUnavailable, …
	Code     string // OAuth "error" code, when given (sanitized)
	Status   int    // HTTP status, when there was a response
	Err      error  // transport cause (network/timeout), when any
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "provider %s: %s: %v", e.Provider, e.Op, e.Kind)
	switch {
	case e.Code != "" && e.Status != 0:
		fmt.Fprintf(&b, " (%s, HTTP %d)", e.Code, e.Status)
	case e.Code != "":
		fmt.Fprintf(&b, " (%s)", e.Code)
	case e.Status != 0:
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap exposes the class and the transport cause to errors.Is / errors.As.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

// sanitizeCode keeps an OAuth error code only if it looks like one (RFC 6749
// limits it to printable ASCII without quotes or backslash); anything else is
// dropped rather than echoed.
func sanitizeCode(code string) string {
	if code == "" || len(code) > 64 {
		return ""
	}
	for _, r := range code {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return ""
		}
	}
	return code
}

// CallbackError interprets the error parameters of an authorization response
// (the redirect back to connectd): nil when there is no "error",
// ErrAccessDenied for access_denied, else ErrRejected (or ErrUnavailable for
// temporarily_unavailable / server_error).
func CallbackError(providerName string, q url.Values) error {
	code := q.Get("error")
	if code == "" {
		return nil
	}
	e := &Error{Provider: providerName, Op: "authorize", Code: sanitizeCode(code)}
	switch code {
	case "access_denied":
		e.Kind = ErrAccessDenied
	case "temporarily_unavailable", "server_error":
		e.Kind = ErrUnavailable
	default:
		e.Kind = ErrRejected
	}
	return e
}
