package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// Defaults for a zero Config field.
const (
	DefaultDialTimeout           = 5 * time.Second
	DefaultTLSHandshakeTimeout   = 5 * time.Second
	DefaultResponseHeaderTimeout = 10 * time.Second
	DefaultTimeout               = 15 * time.Second
	DefaultMaxResponseBytes      = 1 << 20
)

var (
	// ErrBlockedAddress: the destination resolved to an address the guard
	// refuses (private, loopback, link-local, CGNAT, multicast, unspecified,
	// IPv4-mapped, or another special-purpose range). Nothing was sent.
	ErrBlockedAddress = errors.New("egress: destination address is not allowed")
	// ErrInsecureScheme: the URL is not https (and its host:port is not in
	// the allow-list). Nothing was sent.
	ErrInsecureScheme = errors.New("egress: only https URLs may be fetched")
	// ErrTooLarge: the response body exceeds the size cap.
	ErrTooLarge = errors.New("egress: response body exceeds the size limit")
	// ErrRedirect: the server answered with a redirect, which is not followed.
	ErrRedirect = errors.New("egress: redirect not followed")
)

// Config is the outbound policy. The zero value is the production policy:
// https only, public addresses only, default timeouts and size cap.
type Config struct {
	// AllowHosts lists exact "host:port" pairs (dev mode and tests only) that
	// may be fetched over plain http and whose names may resolve to loopback
	// (127.0.0.0/8, ::1). Nothing else is relaxed: private, link-local and the
	// other special ranges stay refused for them too. Matching is on the URL's
	// host and port as written (default port by scheme), case-insensitively:
	// "127.0.0.1:8080" does not allow "localhost:8080".
	AllowHosts []string
	// DialOverride maps an allow-listed host:port to the address actually
	// dialed, e.g. connectd's own listener when its dev public URL names
	// another port. Every key must be in AllowHosts; the dialed address is
	// checked like the allow-listed host's.
	DialOverride map[string]string
	// AnswerRedirects hands a redirect back as the response instead of
	// refusing it (the provider API proxy: the caller gets the 3xx and its
	// Location). It is never followed either way: the client refuses to.
	AnswerRedirects bool
	// MaxIdleConnsPerHost keeps this many idle connections to one host
	// (default 10): the proxy keeps more, for many callers at once.
	MaxIdleConnsPerHost int

	DialTimeout           time.Duration // TCP connect, per attempt; default DefaultDialTimeout
	TLSHandshakeTimeout   time.Duration // default DefaultTLSHandshakeTimeout
	ResponseHeaderTimeout time.Duration // request written → headers read; default DefaultResponseHeaderTimeout
	Timeout               time.Duration // whole exchange, body included; default DefaultTimeout
	MaxResponseBytes      int64         // body cap after decompression; default DefaultMaxResponseBytes

	// RootCAs replaces the system roots (tests with httptest TLS servers,
	// private CAs). Nil: system roots.
	RootCAs *x509.CertPool
	// Resolver resolves names before the guard sees the addresses. Nil: the
	// system resolver. Tests set one that never leaves loopback.
	Resolver *net.Resolver

	// Proxies sends calls through the operator's egress proxies, per class
	// (proxy.go). The guard still decides on the target, before the proxy
	// is asked; the proxy's own address is configuration and is not put to
	// the guard. Zero: every call is dialed directly.
	Proxies Proxies
	// Class is the class of this client's calls whose context names none
	// (WithClass): which of Proxies they take.
	Class Class
}

// New returns the outbound client. Its Transport refuses non-https URLs
// (outside the allow-list) before dialing, dials only through the ssrf guard,
// turns every redirect response into ErrRedirect and caps the body; its
// CheckRedirect refuses too. Callers may copy the client, change its
// CheckRedirect or Timeout, or wrap its Transport, but must not replace the
// Transport.
func New(cfg Config) (*http.Client, error) {
	allow := make(map[string]bool, len(cfg.AllowHosts))
	for i, s := range cfg.AllowHosts {
		k, err := hostPortKey(s)
		if err != nil {
			return nil, fmt.Errorf("egress: AllowHosts entry %d: %w", i+1, err)
		}
		allow[k] = true
	}
	override := make(map[string]string, len(cfg.DialOverride))
	for from, to := range cfg.DialOverride {
		k, err := hostPortKey(from)
		if err != nil {
			return nil, fmt.Errorf("egress: DialOverride key: %w", err)
		}
		if !allow[k] {
			return nil, fmt.Errorf("egress: DialOverride key %s is not in AllowHosts", k)
		}
		if _, err := hostPortKey(to); err != nil {
			return nil, fmt.Errorf("egress: DialOverride target for %s: %w", k, err)
		}
		override[k] = to
	}
	cfg.DialTimeout = orDefault(cfg.DialTimeout, DefaultDialTimeout)
	cfg.TLSHandshakeTimeout = orDefault(cfg.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout)
	cfg.ResponseHeaderTimeout = orDefault(cfg.ResponseHeaderTimeout, DefaultResponseHeaderTimeout)
	cfg.Timeout = orDefault(cfg.Timeout, DefaultTimeout)
	cfg.MaxResponseBytes = orDefault(cfg.MaxResponseBytes, DefaultMaxResponseBytes)

	d := &dialer{
		allow:         allow,
		override:      override,
		public:        newNetDialer(cfg, publicGuard()),
		loopback:      newNetDialer(cfg, loopbackGuard()),
		proxy:         &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second, Resolver: cfg.Resolver},
		rootCAs:       cfg.RootCAs,
		tlsTimeout:    cfg.TLSHandshakeTimeout,
		headerTimeout: cfg.ResponseHeaderTimeout,
	}
	base := &router{class: cfg.Class, proxies: cfg.Proxies, routes: map[*Proxy]*http.Transport{}}
	for _, p := range cfg.Proxies.distinct() {
		dial := d.dial
		if p != nil {
			dial = d.viaProxy(p)
		}
		base.routes[p] = &http.Transport{
			// Never http.Transport's own proxying (it would CONNECT to the
			// name, which the proxy resolves past the guard): a route
			// through a proxy dials it itself, after the guard (viaProxy).
			Proxy:                  nil,
			DialContext:            dial,
			ForceAttemptHTTP2:      true,
			TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: cfg.RootCAs},
			TLSHandshakeTimeout:    cfg.TLSHandshakeTimeout,
			ResponseHeaderTimeout:  cfg.ResponseHeaderTimeout,
			ExpectContinueTimeout:  time.Second,
			IdleConnTimeout:        90 * time.Second,
			MaxIdleConns:           100,
			MaxIdleConnsPerHost:    orDefaultInt(cfg.MaxIdleConnsPerHost, 10),
			MaxResponseHeaderBytes: 64 << 10,
		}
	}
	return &http.Client{
		Transport: &transport{rules: func() *rules {
			r := newRules(base, cfg.MaxResponseBytes)
			r.answerRedirects = cfg.AnswerRedirects
			return r
		}(), dialer: d, allow: allow},
		Timeout:       cfg.Timeout,
		CheckRedirect: refuseRedirect,
	}, nil
}

// Limits are the rules Bound adds to a client. A zero field takes the
// default.
type Limits struct {
	Timeout          time.Duration // whole exchange, when the client has none; default DefaultTimeout
	MaxResponseBytes int64         // body cap; default DefaultMaxResponseBytes
}

// Bound returns a copy of c (nil: a plain client) that obeys the rules of an
// outbound call that do not depend on the dialer, whatever its Transport:
// a timeout (l.Timeout when c has none), no redirect followed (a redirect
// answer is ErrRedirect) and a body cap (ErrTooLarge). Packages that are
// handed a client (provider, mcpauth) call it, so that a test's client
// obeys the same rules as the one New makes in production; on a client from
// New it only adds a second, possibly smaller, cap.
func Bound(c *http.Client, l Limits) *http.Client {
	var cc http.Client
	if c != nil {
		cc = *c
	}
	if cc.Timeout <= 0 {
		cc.Timeout = orDefault(l.Timeout, DefaultTimeout)
	}
	base := cc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cc.Transport = newRules(base, orDefault(l.MaxResponseBytes, DefaultMaxResponseBytes))
	cc.CheckRedirect = refuseRedirect
	return &cc
}

func orDefault[T time.Duration | int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// publicGuard is ssrf's default deny set on the resolved address, tcp only.
// Ports are not restricted: https to a public address on any port is fine
// (self-hosted IdPs use 8443 and the like); what matters is the address.
func publicGuard() *ssrf.Guardian { return ssrf.New(ssrf.WithAnyPort()) }

// loopbackGuard is publicGuard plus loopback, for allow-listed host:ports
// only. Private, link-local and the other special ranges stay refused.
func loopbackGuard() *ssrf.Guardian {
	return ssrf.New(ssrf.WithAnyPort(),
		ssrf.WithAllowedV4Prefixes(netip.MustParsePrefix("127.0.0.0/8")),
		ssrf.WithAllowedV6Prefixes(netip.MustParsePrefix("::1/128")))
}

func newNetDialer(cfg Config, g *ssrf.Guardian) *net.Dialer {
	return &net.Dialer{
		Timeout:   cfg.DialTimeout,
		KeepAlive: 30 * time.Second,
		Resolver:  cfg.Resolver,
		// Control runs for every address the name resolved to, after
		// resolution and before connect(2): a refused address never sees a
		// packet, whatever DNS said.
		Control: func(network, address string, c syscall.RawConn) error {
			if err := g.Safe(network, address, c); err != nil {
				return fmt.Errorf("%w: %w", ErrBlockedAddress, err)
			}
			return nil
		},
	}
}

// dialer picks the guard by the requested host:port, before resolution.
type dialer struct {
	allow            map[string]bool
	override         map[string]string
	public, loopback *net.Dialer
	// proxy dials the operator's egress proxies (configuration, not input:
	// not put to the guard); the rest bound the CONNECT exchange.
	proxy                     *net.Dialer
	rootCAs                   *x509.CertPool
	tlsTimeout, headerTimeout time.Duration
}

func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	nd, addr, err := d.route(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBlockedAddress, err)
	}
	return nd.DialContext(ctx, network, addr)
}

// route is the dialer, and the address it dials, for a requested
// host:port: the public guard's, or for an allow-listed host:port the
// loopback guard's and its DialOverride target. CheckDestination asks the
// same question.
func (d *dialer) route(addr string) (*net.Dialer, string, error) {
	k, err := hostPortKey(addr)
	if err != nil {
		return nil, "", err
	}
	if !d.allow[k] {
		return d.public, addr, nil
	}
	if to, ok := d.override[k]; ok {
		addr = to
	}
	return d.loopback, addr, nil
}

// transport enforces the scheme rule before anything is dialed, then the
// rules every outbound call obeys.
type transport struct {
	rules  *rules
	dialer *dialer // rules' base dials through it; kept for the tests' tripwire
	allow  map[string]bool
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	return roundTripTraced(req, t.roundTrip)
}

func (t *transport) roundTrip(req *http.Request) (*http.Response, error) {
	if err := t.checkScheme(req.URL); err != nil {
		if req.Body != nil {
			req.Body.Close() // RoundTripper contract
		}
		return nil, err
	}
	return t.rules.RoundTrip(req)
}

// rules refuses redirects and caps response bodies, over any transport.
type rules struct {
	base            http.RoundTripper
	max             int64
	errTooLarge     error
	answerRedirects bool
}

func newRules(base http.RoundTripper, max int64) *rules {
	return &rules{base: base, max: max, errTooLarge: fmt.Errorf("%w (%d bytes)", ErrTooLarge, max)}
}

func (t *rules) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if isRedirect(resp) && !t.answerRedirects {
		// Refused here rather than only in CheckRedirect: net/http quotes
		// the Location of a refused redirect in its error, and a Location
		// may carry a code or token.
		resp.Body.Close()
		return nil, fmt.Errorf("%w (HTTP %d from %s)", ErrRedirect, resp.StatusCode, req.URL.Host)
	}
	if resp.ContentLength > t.max {
		resp.Body.Close()
		return nil, t.errTooLarge
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.max, err: t.errTooLarge}
	return resp, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the pool.
func (t *rules) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t *transport) checkScheme(u *url.URL) error {
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		port := u.Port()
		if port == "" {
			port = "80"
		}
		if k, err := hostPortKey(net.JoinHostPort(u.Hostname(), port)); err == nil && t.allow[k] {
			return nil
		}
		return fmt.Errorf("%w: http://%s is not in the dev allow-list (CONNECTD_EGRESS_ALLOW_HOSTS)", ErrInsecureScheme, u.Host)
	default:
		return fmt.Errorf("%w: scheme %q", ErrInsecureScheme, u.Scheme)
	}
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the pool.
func (t *transport) CloseIdleConnections() { t.rules.CloseIdleConnections() }

// limitedBody fails a read past the cap instead of truncating silently: a
// truncated JSON document must not parse as something else.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
	err  error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, b.err
	}
	// Read at most one byte past the cap: enough to know it was exceeded.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n - 1, b.err
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// isRedirect reports a response http.Client would follow. Token,
// revocation, JWKS and discovery answers come from the URL configured, or not
// at all.
func isRedirect(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return resp.Header.Get("Location") != ""
	}
	return false
}

// refuseRedirect is a backstop: the transport already turns every redirect
// into ErrRedirect, so net/http never gets to follow one.
func refuseRedirect(req *http.Request, via []*http.Request) error {
	return fmt.Errorf("%w (from %s)", ErrRedirect, via[len(via)-1].URL.Host)
}

// CheckHostPort reports whether s can be an AllowHosts entry: "host:port"
// with a numeric port. The error does not repeat s.
func CheckHostPort(s string) error {
	_, err := hostPortKey(s)
	return err
}

// hostPortKey checks a "host:port" and returns its comparable form: host
// lower-cased (an IP literal in its canonical spelling), numeric port. This
// only compares names with the allow-list; whether an address may be dialed
// is always the guard's decision, on the resolved address.
func hostPortKey(s string) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" || strings.ContainsAny(host, "/@ ") {
		return "", errors.New("must be host:port, e.g. 127.0.0.1:8080")
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", errors.New("port must be a number from 1 to 65535")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.String()
	}
	return net.JoinHostPort(strings.ToLower(host), port), nil
}

func orDefaultInt(v, d int) int {
	if v > 0 {
		return v
	}
	return d
}
