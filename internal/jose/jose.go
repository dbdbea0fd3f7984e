package jose

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// algorithms is the signature allow-list: asymmetric algorithms only. none and
// every HMAC algorithm are refused, so a token "signed" with a public key as
// an HMAC secret never verifies.
var algorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Algorithms is the signature allow-list of every JWT connectd verifies
// (user tokens, client assertions, DPoP proofs): asymmetric only, never none
// or HS*. A copy: callers keep their own.
func Algorithms() []string { return slices.Clone(algorithms) }

// NoCrit refuses a JOSE header with crit (RFC 7515 §4.1.11): it names
// extensions the recipient must understand, and connectd understands none.
func NoCrit(h map[string]any) error {
	if _, ok := h["crit"]; ok {
		return errors.New("crit names header extensions connectd does not understand")
	}
	return nil
}

// ErrUnavailable means keys (an issuer's discovery document or JWKS, a
// client's JWKS URL) could not be fetched or may no longer verify, so a JWT
// could be neither accepted nor refused: a 503, never a 401. mcpauth and
// clientauth export it as ErrIssuerUnavailable.
var ErrUnavailable = errors.New("mcpauth: issuer keys unavailable")

// unavailableError is an ErrUnavailable that knows when trying again can
// help: the Retry-After of its 503 (RetryAfter).
type unavailableError struct {
	err   error
	retry time.Duration
}

func (e *unavailableError) Error() string { return e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }

// Unavailable returns an ErrUnavailable worth retrying after retry.
func Unavailable(retry time.Duration, format string, args ...any) error {
	return &unavailableError{err: fmt.Errorf("%w: "+format, append([]any{ErrUnavailable}, args...)...), retry: retry}
}

// RetryAfter says how long until keys may be fetched again, for an
// ErrUnavailable that knows it; false when err does not say.
func RetryAfter(err error) (time.Duration, bool) {
	var u *unavailableError
	if !errors.As(err, &u) {
		return 0, false
	}
	return u.retry, true
}
