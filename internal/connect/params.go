package connect

import (
	"errors"
	"net/url"
)

// Query parameters of the two redirects back to connectd (/oauth/callback
// from a provider, /login/callback from an issuer) are checked here, before
// anything touches the database: each may appear at most once (a second
// "state" or "code" could otherwise be read differently by a proxy, a log
// and connectd), has a length bound and a character set.

var (
	// errParamMissing: a required parameter is absent or empty.
	errParamMissing = errors.New("connect: required parameter missing")
	// errParamMalformed: a parameter repeats, is too long or has characters
	// it cannot have.
	errParamMalformed = errors.New("connect: malformed parameter")
)

// stateLen is the length of every state connectd issues: 32 random bytes in
// unpadded base64url.
const stateLen = 43

// redirectParams are the parameters of an authorization response.
type redirectParams struct {
	State string
	Code  string
	Iss   string // RFC 9207; "" when absent
	Error string // OAuth error code; "" when absent
}

// parseRedirect checks an authorization response's query. The state must have
// exactly the shape connectd issues; code, iss and error are optional here
// (whether they are required depends on what came back) but bounded:
// printable ASCII without spaces, at most 4 KiB for code (some providers
// issue long ones), 2 KiB for iss and 128 bytes for error.
// Other parameters (error_description, session_state, ...) are ignored and
// never used.
func parseRedirect(q url.Values) (redirectParams, error) {
	var p redirectParams
	for _, f := range []struct {
		name string
		max  int
		dst  *string
	}{{"state", stateLen, &p.State}, {"code", 4096, &p.Code}, {"iss", 2048, &p.Iss}, {"error", 128, &p.Error}} {
		vs := q[f.name]
		switch {
		case len(vs) == 0:
			continue
		case len(vs) > 1 || len(vs[0]) > f.max || !visibleASCII(vs[0]):
			return redirectParams{}, errParamMalformed
		}
		*f.dst = vs[0]
	}
	if p.State == "" {
		return redirectParams{}, errParamMissing
	}
	if !validState(p.State) {
		return redirectParams{}, errParamMalformed
	}
	return p, nil
}

// validState reports whether s has the shape of a state connectd issued.
func validState(s string) bool {
	if len(s) != stateLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isBase64URL(s[i]) {
			return false
		}
	}
	return true
}

func isBase64URL(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
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
