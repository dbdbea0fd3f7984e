package egress

import (
	"errors"
	"net/url"
	"strings"
)

// MaxLogoURL is the longest logo URL accepted.
const MaxLogoURL = 2048

// CheckLogoURL is the rule for an image URL an operator configures (the
// product's logo, an MCP server's, a provider's) that pages show as <img>:
// absolute https always (a page served over https loads no http image), a
// host a Content-Security-Policy source can name (letters, digits, '.', '-',
// a port), no user info, no fragment, at most MaxLogoURL bytes. connectd
// never fetches it: the browser does, and the CSP's img-src names its
// origin. Messages never include the URL.
func CheckLogoURL(raw string) error {
	if len(raw) > MaxLogoURL {
		return errors.New("is too long (at most 2048 bytes)")
	}
	if err := CheckURL(raw, false); err != nil {
		return err
	}
	u, _ := url.Parse(raw)
	for _, c := range u.Host {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == ':':
		default:
			return errors.New("must name a host by name or IPv4 address")
		}
	}
	if strings.ContainsAny(raw, " \t\r\n'\";") {
		return errors.New("must not contain spaces, quotes or ';'")
	}
	return nil
}
