package provider

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode"

	"github.com/connectd/connectd/internal/egress"
)

// The provider's own API, as connectd's proxy reaches it. The proxy
// forwards an MCP server's request to the provider with the credential
// attached by connectd: where it goes is the provider's APIBaseURL (a
// template property, or the operator's providers file, per-customer hosts
// filled in through the host rules of host.go), never a host the caller
// names, and how the credential travels is its APIAuth. Both are decided
// here, once, when the providers file is parsed.

// Placeholders of APIAuth.Value.
const (
	TokenPlaceholder       = "{token}"        // the access token (oauth2) or API key
	TokenBase64Placeholder = "{token_base64}" // the same, base64-encoded (HTTP Basic with a key typed as id:secret)
)

// APIAuth is how a credential is attached to a request for a provider's
// API: the header Header set to Value, where Value holds TokenPlaceholder
// (or TokenBase64Placeholder) exactly once. It never holds the credential
// itself.
type APIAuth struct {
	Header string // e.g. "Authorization"
	Value  string // e.g. "Bearer {token}"
}

// HeaderValue is a's Value with token in its place.
func (a APIAuth) HeaderValue(token string) string {
	return fillSecret(a.Value, TokenPlaceholder, TokenBase64Placeholder, token)
}

// defaultAPIAuth is RFC 6750 §2.1's bearer token: what OAuth access tokens
// are made for, and what most API-key services take too.
var defaultAPIAuth = APIAuth{Header: "Authorization", Value: "Bearer " + TokenPlaceholder}

// apiAuth is the APIAuth of s: its own (api_auth_header/api_auth_value)
// when set; for an API key, where its verification request puts the key
// ("x-api-key: {key}" becomes "x-api-key: {token}"), since that is how the
// service takes it; otherwise the bearer token.
func apiAuth(s *Spec) APIAuth {
	switch {
	case s.APIAuth.Header != "":
		return s.APIAuth
	case s.Kind == KindAPIKey && s.Verify != nil:
		v := strings.Replace(s.Verify.Value, keyBase64Placeholder, TokenBase64Placeholder, 1)
		return APIAuth{Header: s.Verify.Header, Value: strings.Replace(v, keyPlaceholder, TokenPlaceholder, 1)}
	}
	return defaultAPIAuth
}

// fillSecret puts secret in the one placeholder of value: ph, or phBase64
// for it base64-encoded.
func fillSecret(value, ph, phBase64, secret string) string {
	if strings.Contains(value, phBase64) {
		return strings.Replace(value, phBase64, base64.StdEncoding.EncodeToString([]byte(secret)), 1)
	}
	return strings.Replace(value, ph, secret, 1)
}

// checkAPIBaseURL returns an API base URL as connectd uses it (without a
// trailing slash) if it passes the URL rule every provider URL passes
// (egress.CheckURL: https, or http in dev mode; a host; no user info; no
// fragment) and names a place to put a request path under: no query, and
// no "." or ".." segment in its path prefix.
func checkAPIBaseURL(raw string, dev bool) (string, error) {
	if err := egress.CheckURL(raw, dev); err != nil {
		return "", err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", errors.New("is not a valid URL")
	}
	if u.RawQuery != "" || u.ForceQuery {
		return "", errors.New("must not contain a query (a path prefix is allowed)")
	}
	if slices.ContainsFunc(strings.Split(u.EscapedPath(), "/"), func(seg string) bool { return seg == "." || seg == ".." }) {
		return "", errors.New(`must not contain a "." or ".." path segment`)
	}
	return strings.TrimRight(raw, "/"), nil
}

// framingHeaders carry the message itself, not a credential: a credential
// put there would break or smuggle requests.
var framingHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Te", "Trailer", "Upgrade"}

// checkAPIAuth validates an APIAuth given by a template or the providers
// file, naming the field at fault.
func checkAPIAuth(a APIAuth) (field string, err error) {
	switch {
	case !validHeaderName(a.Header):
		return "api_auth_header", errors.New("must be an HTTP header name such as Authorization or X-API-Key")
	case slices.Contains(framingHeaders, http.CanonicalHeaderKey(a.Header)):
		return "api_auth_header", errors.New("must not be a header that frames the message (Host, Content-Length, …)")
	case strings.Count(a.Value, TokenPlaceholder)+strings.Count(a.Value, TokenBase64Placeholder) != 1:
		return "api_auth_value", errors.New("must contain " + TokenPlaceholder + " exactly once (or " + TokenBase64Placeholder + ")")
	case strings.ContainsFunc(a.Value, unicode.IsControl):
		return "api_auth_value", errors.New("must be one line without control characters")
	}
	return "", nil
}
