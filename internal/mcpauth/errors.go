package mcpauth

import (
	"errors"
	"fmt"
	"time"

	"github.com/connectd/connectd/internal/jose"
)

// User-token errors. Every one of them wraps ErrInvalidToken, so callers that
// only care whether a token was acceptable test for that; the specific ones give
// a stable error code (internal/web's error table: web/codes.go).
var (
	// ErrInvalidToken means the user token (or ID token) was refused.
	ErrInvalidToken = errors.New("mcpauth: invalid token")
	// ErrMalformedToken: not a well-formed JWT (garbage, truncated, bad JSON, missing claims).
	ErrMalformedToken = fmt.Errorf("%w: malformed", ErrInvalidToken)
	// ErrAlgorithm: the token's alg is not in the asymmetric allow-list (none, HS*, unknown).
	ErrAlgorithm = fmt.Errorf("%w: algorithm not allowed", ErrInvalidToken)
	// ErrTokenType: the typ header is not at+jwt (or, for ID tokens, is at+jwt).
	ErrTokenType = fmt.Errorf("%w: wrong token type", ErrInvalidToken)
	// ErrSignature: the signature does not verify, or no key of the issuer has its kid.
	ErrSignature = fmt.Errorf("%w: bad signature or unknown key", ErrInvalidToken)
	// ErrTokenExpired: exp is in the past (beyond the allowed skew).
	ErrTokenExpired = fmt.Errorf("%w: expired", ErrInvalidToken)
	// ErrTokenNotYetValid: nbf or iat is in the future (beyond the allowed skew).
	ErrTokenNotYetValid = fmt.Errorf("%w: not yet valid", ErrInvalidToken)
	// ErrUntrustedIssuer: iss is not a configured issuer (or not the expected one).
	ErrUntrustedIssuer = fmt.Errorf("%w: untrusted issuer", ErrInvalidToken)
	// ErrWrongAudience: aud names none of the calling client's resources (token
	// passthrough), or, for an ID token, not connectd's client id.
	ErrWrongAudience = fmt.Errorf("%w: wrong audience", ErrInvalidToken)
	// ErrNonce: an ID token's nonce is not the one this login sent.
	ErrNonce = fmt.Errorf("%w: nonce mismatch", ErrInvalidToken)
	// ErrIdentity: sub or iss is not an identity connectd can use byte for
	// byte (too long, not UTF-8, a control character; see CheckSubject), or
	// is not the signed claim of that exact name.
	ErrIdentity = fmt.Errorf("%w: unacceptable identity", ErrInvalidToken)
)

var (
	// ErrIssuerUnavailable means an issuer's discovery document or JWKS could
	// not be fetched, so a token could be neither accepted nor refused: a 503,
	// never a 401 (jose.ErrUnavailable, the JWKS cache's).
	ErrIssuerUnavailable = jose.ErrUnavailable
	// ErrMissingUserToken means the request carried no X-User-Token.
	ErrMissingUserToken = errors.New("mcpauth: no user token")
)

// unavailable returns an ErrIssuerUnavailable worth retrying after retry.
var unavailable = jose.Unavailable

// RetryAfter says how long until the issuer's keys may be fetched again, for
// an ErrIssuerUnavailable that knows it (a key id that may be newer than the
// last fetch, asked too soon after it); false when err does not say.
func RetryAfter(err error) (time.Duration, bool) { return jose.RetryAfter(err) }

// Login errors.
var (
	// ErrUnknownIssuer means no login-enabled issuer has that id or URL.
	ErrUnknownIssuer = errors.New("mcpauth: unknown issuer")
	// ErrLoginState means the state is missing, unknown, already used or expired.
	ErrLoginState = errors.New("mcpauth: invalid login state")
	// ErrStateMismatch means the state was started in another browser (its
	// state-binding secret differs).
	ErrStateMismatch = errors.New("mcpauth: login state belongs to another browser")
	// ErrIssuerMismatch means the callback's RFC 9207 iss parameter names
	// another issuer than the one the login was started at (mix-up attack).
	ErrIssuerMismatch = errors.New("mcpauth: callback from another issuer")
	// ErrLoginDenied means the issuer answered the authorization with an error
	// (the user cancelled, or the issuer refused).
	ErrLoginDenied = errors.New("mcpauth: login denied by issuer")
	// ErrLoginFailed means the issuer refused the code exchange.
	ErrLoginFailed = errors.New("mcpauth: code exchange refused")
)
