package mcpauth

import (
	"errors"
	"net/url"
)

// The query of an authorization response (the redirect back to connectd from
// an issuer or a provider) is checked here, before anything touches the
// database: each parameter may appear at most once (a second "state" or
// "code" could otherwise be read differently by a proxy, a log and connectd),
// and has a length bound and a character set.

var (
	// ErrRedirectNoState: the response carries no state.
	ErrRedirectNoState = errors.New("mcpauth: authorization response without state")
	// ErrRedirectMalformed: a parameter repeats, is too long, has characters
	// it cannot have, or the state is not of the shape connectd issues.
	ErrRedirectMalformed = errors.New("mcpauth: malformed authorization response")
)

// StateLen is the length of every state connectd issues, at login and at
// providers: 32 random bytes in unpadded base64url.
const StateLen = 43

// ParseRedirect checks an authorization response's query and returns its
// parameters (Binding left for the caller). The state must have exactly the
// shape connectd issues; code, iss and error are optional here (whether they
// are required depends on what came back) but bounded: printable ASCII
// without spaces, at most 4 KiB for code (some providers issue long ones),
// 2 KiB for iss and 128 bytes for error. Other parameters
// (error_description, session_state, ...) are ignored and never used.
func ParseRedirect(q url.Values) (Callback, error) {
	var cb Callback
	for _, f := range []struct {
		name string
		max  int
		dst  *string
	}{{"state", StateLen, &cb.State}, {"code", 4096, &cb.Code}, {"iss", 2048, &cb.Iss}, {"error", 128, &cb.Error}} {
		vs := q[f.name]
		switch {
		case len(vs) == 0:
			continue
		case len(vs) > 1 || len(vs[0]) > f.max || !visibleASCII(vs[0]):
			return Callback{}, ErrRedirectMalformed
		}
		*f.dst = vs[0]
	}
	if cb.State == "" {
		return Callback{}, ErrRedirectNoState
	}
	if !validState(cb.State) {
		return Callback{}, ErrRedirectMalformed
	}
	return cb, nil
}

// validState reports whether s has the shape of a state connectd issued.
func validState(s string) bool {
	if len(s) != StateLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// visibleASCII reports whether s is only printable ASCII without spaces.
func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
