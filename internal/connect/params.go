package connect

import (
	"errors"
	"net/url"

	"github.com/connectd/connectd/internal/mcpauth"
)

// Query parameters of the redirects back to connectd (/oauth/callback from a
// provider, /login/callback from an issuer) are checked by
// mcpauth.ParseRedirect before anything touches the database.

var (
	// errParamMissing: a required parameter is absent or empty.
	errParamMissing = errors.New("connect: required parameter missing")
	// errParamMalformed: a parameter repeats, is too long or has characters
	// it cannot have.
	errParamMalformed = errors.New("connect: malformed parameter")
)

// redirectParams are the parameters of an authorization response.
type redirectParams struct {
	State string
	Code  string
	Iss   string // RFC 9207; "" when absent
	Error string // OAuth error code; "" when absent
}

// parseRedirect checks an authorization response's query with
// mcpauth.ParseRedirect, the one check every redirect back to connectd gets
// (provider callbacks, end-user and admin logins).
func parseRedirect(q url.Values) (redirectParams, error) {
	cb, err := mcpauth.ParseRedirect(q)
	switch {
	case errors.Is(err, mcpauth.ErrRedirectNoState):
		return redirectParams{}, errParamMissing
	case err != nil:
		return redirectParams{}, errParamMalformed
	}
	return redirectParams{State: cb.State, Code: cb.Code, Iss: cb.Iss, Error: cb.Error}, nil
}
