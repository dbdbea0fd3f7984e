package mcpauth

import (
	"context"
	"errors"
)

// ErrInvalidAssertion means a client assertion (RFC 7523, private_key_jwt)
// was refused: malformed, an algorithm outside the allow-list, a signature
// by no key the client registered, the wrong iss, sub or aud, expired, too
// long-lived, or a jti already used.
var ErrInvalidAssertion = errors.New("mcpauth: invalid client assertion")

// Assertions checks RFC 7523 client assertions.
type Assertions struct{}

// Authenticate returns the client whose registered key signed raw, an
// assertion for audience.
func (s *Assertions) Authenticate(ctx context.Context, raw, audience string) (Client, error) {
	if s == nil {
		return Client{}, ErrInvalidAssertion
	}
	return Client{}, ErrInvalidAssertion
}

// AssertionAlgorithms is the signature allow-list of client assertions (the
// user tokens' own: asymmetric only, never none or HS*), for metadata.
func AssertionAlgorithms() []string { return append([]string(nil), algorithms...) }
