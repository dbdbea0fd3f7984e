package egress

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
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

// CheckDestination reports what c, a client made by New, refuses of rawURL
// without resolving a name, so that a URL kept to be called later (a webhook
// endpoint) is refused when it is given instead of at every call:
//   - a scheme other than https, unless the URL's host:port is in c's
//     allow-list (ErrInsecureScheme);
//   - a host that is an IP address the guard refuses, decided by the guard
//     the dial would use, with the same allow-list (ErrBlockedAddress) —
//     IPv4-mapped IPv6 spellings are refused as such;
//   - a host that is neither an IP address nor a DNS name because its last
//     label is numeric (2130706433, 0x7f.1, 127.1: no top-level domain is
//     numeric, and some resolvers read these as IPv4 addresses;
//     ErrBlockedAddress);
//   - a port outside 1-65535 (ErrBlockedAddress, as the dial says).
//
// A host name is accepted: what it resolves to is checked at every dial, as
// always. Like CheckURL's, its messages read after a field's name and do not
// repeat the URL. A client whose Transport is not New's (a test's own
// client, or one whose Transport was wrapped) shows no guard to ask: nothing
// is refused here, and its dials decide as they would.
func CheckDestination(c *http.Client, rawURL string) error {
	var t *transport
	if c != nil {
		t, _ = c.Transport.(*transport)
	}
	if t == nil {
		return nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return errors.New("is not a valid URL")
	}
	if err := t.checkScheme(u); err != nil {
		msg := "must use https: http:// is sent only to the host:port pairs of the dev allow-list (CONNECTD_EGRESS_ALLOW_HOSTS, with CONNECTD_DEV=true)"
		if u.Scheme != "http" {
			msg = fmt.Sprintf("scheme %q is not allowed: only https", sanitizeScheme(u.Scheme))
		}
		return &refusal{msg: msg, err: err}
	}
	port := u.Port()
	switch {
	case port != "":
	case u.Scheme == "http":
		port = "80"
	default:
		port = "443"
	}
	nd, addr, err := t.dialer.route(net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return &refusal{msg: "must name a host and a port from 1 to 65535", err: fmt.Errorf("%w: %w", ErrBlockedAddress, err)}
	}
	host, port, _ := net.SplitHostPort(addr) // route checked it
	a, err := netip.ParseAddr(host)
	if err != nil {
		if numericLabel(host) {
			return &refusal{msg: "host is neither an IP address nor a DNS name (a numeric last label: an IP address in another spelling?)",
				err: ErrBlockedAddress}
		}
		return nil
	}
	network := "tcp4"
	if a.Is6() { // Is4In6 too: the guard refuses it as outside IPv6 global unicast
		network = "tcp6"
	}
	if err := nd.Control(network, net.JoinHostPort(a.String(), port), nil); err != nil {
		msg := "host is an IP address connectd never connects to (private, loopback, link-local, CGNAT, " +
			"multicast, unspecified, IPv4-mapped or another special-purpose range)"
		if a.Unmap().IsLoopback() && !a.Is4In6() {
			// What a developer trying a local receiver hits: say how.
			msg += "; a loopback host:port is reached only in dev mode, listed in CONNECTD_EGRESS_ALLOW_HOSTS"
		}
		return &refusal{msg: msg, err: err}
	}
	return nil
}

// numericLabel reports a host whose last label is a decimal or 0x-hex
// number, which a DNS name's top-level domain never is.
func numericLabel(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	digits := "0123456789"
	if len(last) > 2 && (last[:2] == "0x" || last[:2] == "0X") {
		last, digits = last[2:], "0123456789abcdefABCDEF"
	}
	return last != "" && strings.Trim(last, digits) == ""
}

// refusal is an error whose message reads after a field's name, like
// CheckURL's, and that still matches its sentinel (errors.Is).
type refusal struct {
	msg string
	err error
}

func (r *refusal) Error() string { return r.msg }
func (r *refusal) Unwrap() error { return r.err }
