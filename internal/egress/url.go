package egress

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// CheckURL is the one rule for a URL connectd is configured with or
// discovers and will call or send a browser to (provider endpoints, issuers,
// JWKS, MCP resource URIs, redirect URIs): absolute, scheme https (http only
// when allowHTTP, i.e. in dev mode; the scheme is compared case-insensitively,
// as url.Parse already folds it), a host, no user info, no fragment.
// javascript:, data:, file: and every other scheme are refused. Its messages
// never include the URL, so a caller may prefix the field's name.
func CheckURL(raw string, allowHTTP bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("is not a valid URL")
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !allowHTTP {
			return errors.New("must use https (http:// is allowed only in dev mode)")
		}
	case "":
		return errors.New("must be an absolute https URL")
	default:
		return fmt.Errorf("scheme %q is not allowed: only https (and http in dev mode)", sanitizeScheme(u.Scheme))
	}
	if u.Host == "" || u.Hostname() == "" || u.Opaque != "" {
		return errors.New("must name a host")
	}
	if u.User != nil {
		return errors.New("must not contain user info")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return errors.New("must not contain a fragment")
	}
	return nil
}

// sanitizeScheme bounds a scheme quoted in a message.
func sanitizeScheme(s string) string {
	if len(s) > 16 {
		return s[:16]
	}
	return s
}
