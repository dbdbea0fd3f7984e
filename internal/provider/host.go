package provider

import (
	"errors"
	"net/netip"
	"net/url"
	"strings"

	"github.com/connectd/connectd/internal/egress"
)

// Per-customer hosts. Some providers live at a host of the customer's own:
// a subdomain (acme.zendesk.com, acme.myshopify.com) or an instance URL
// (acme.my.salesforce.com, a self-managed GitLab). Whoever supplies that
// value (an operator in the providers file today, a user later), it decides
// where connectd sends browsers and back-channel calls carrying client
// secrets and codes, so it is checked here, in one place, before any URL is
// built from it: a subdomain must be one hostname label, and an instance URL
// must be a plain https origin whose host matches one of the template's host
// patterns. The scheme, user-info and fragment rules are egress.CheckURL's,
// and the address actually dialed is still checked by the egress guard.

const maxHostname = 253

// ErrBadHost: a subdomain or instance URL failed the per-customer host
// rules. The errors that match it say which rule, never repeating the value.
var ErrBadHost = errors.New("not an allowed host")

// badHost is a refusal whose text is only the rule broken (a ConfigError
// prefixes the field), matching ErrBadHost.
type badHost string

func (e badHost) Error() string      { return string(e) }
func (badHost) Is(target error) bool { return target == ErrBadHost }

// CheckSubdomain returns the subdomain as connectd will use it (ASCII
// lower-cased) if it is exactly one hostname label: 1-63 of a-z 0-9 and
// inner hyphens (RFC 1123). Dots (ASCII, percent-encoded or Unicode),
// non-ASCII look-alikes, ports, slashes and "@" can therefore never reach a
// URL.
func CheckSubdomain(s string) (string, error) {
	l, ok := hostLabel(s)
	if !ok {
		return "", badHost("must be one hostname label (a-z, 0-9, inner hyphens, at most 63)")
	}
	return l, nil
}

// CheckInstanceURL returns the origin (scheme://host[:port][/path], without
// a trailing slash) of an operator- or user-supplied instance URL if it
// passes the rules: egress.CheckURL (https, or http in dev mode; a host; no
// user info; no fragment), no query, no percent-encoding, a host of ASCII
// hostname labels that is not an IP literal and whose last label starts with
// a letter, no trailing dot; and then
//   - with patterns (a template's BaseURLHosts): no port, no path, and the
//     host matches a pattern, where "*" stands for exactly one label;
//   - without patterns (GitLab self-managed, the one template that takes any
//     host): a port and a path prefix are allowed.
func CheckInstanceURL(raw string, patterns []string, dev bool) (string, error) {
	fail := func(why string) (string, error) { return "", badHost(why) }
	if err := egress.CheckURL(raw, dev); err != nil {
		return fail(err.Error())
	}
	if strings.Contains(raw, "%") {
		return fail("must not contain percent-encoding")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fail("is not a valid URL")
	}
	if u.RawQuery != "" || u.ForceQuery {
		return fail("must not contain a query")
	}
	host, ok := hostName(u.Hostname())
	if !ok {
		return fail("must name a host by DNS name (ASCII labels, no IP literal, no trailing dot)")
	}
	path := strings.TrimRight(u.EscapedPath(), "/")
	if len(patterns) > 0 {
		if u.Port() != "" {
			return fail("must not name a port")
		}
		if path != "" {
			return fail("must be an origin (no path)")
		}
		if !matchHost(host, patterns) {
			return fail("host must match " + strings.Join(patterns, " or "))
		}
	}
	origin := u.Scheme + "://" + host
	if u.Port() != "" {
		origin += ":" + u.Port()
	}
	return origin + path, nil
}

// hostLabel lower-cases s if it is one RFC 1123 hostname label. Non-ASCII is
// refused before folding: strings.ToLower would turn the Kelvin sign into k.
func hostLabel(s string) (string, bool) {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return "", false
	}
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
		case c >= 'A' && c <= 'Z':
			b[i] = c + ('a' - 'A')
		default:
			return "", false
		}
	}
	return string(b), true
}

// hostName lower-cases a DNS host name of at least two labels whose last
// label starts with a letter (no TLD is numeric, so "127.1", "0x7f.1" and
// other numeric-looking forms some resolvers read as addresses are refused),
// and refuses IP literals and a trailing dot.
func hostName(h string) (string, bool) {
	if h == "" || len(h) > maxHostname {
		return "", false
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return "", false
	}
	parts := strings.Split(h, ".")
	if len(parts) < 2 {
		return "", false
	}
	for i, p := range parts {
		l, ok := hostLabel(p)
		if !ok {
			return "", false
		}
		parts[i] = l
	}
	if last := parts[len(parts)-1]; last[0] < 'a' || last[0] > 'z' {
		return "", false
	}
	return strings.Join(parts, "."), true
}

// matchHost reports whether host (lower-case, from hostName) matches one of
// patterns: the same number of labels, each equal, "*" matching any one.
func matchHost(host string, patterns []string) bool {
	hl := strings.Split(host, ".")
	for _, p := range patterns {
		pl := strings.Split(p, ".")
		if len(pl) != len(hl) {
			continue
		}
		ok := true
		for i := range pl {
			if pl[i] != "*" && pl[i] != hl[i] {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// validTenant: a Microsoft Entra tenant (a GUID, a verified domain, or
// common/organizations/consumers) goes into a URL path, so it must be one or
// more hostname labels and nothing else.
func validTenant(t string) bool {
	if t == "" || len(t) > maxHostname {
		return false
	}
	for p := range strings.SplitSeq(t, ".") {
		if _, ok := hostLabel(p); !ok {
			return false
		}
	}
	return true
}
