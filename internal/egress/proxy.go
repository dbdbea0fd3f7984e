package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ErrProxy: the operator's egress proxy could not be reached, or did not
// open the tunnel (it answered the CONNECT with something other than 200:
// 407 for a credential it refused, 502 or 504 for a target it could not
// reach, 403 for one its own policy refused). The error names the proxy by
// scheme, host and port only — never its credential — and the status.
var ErrProxy = errors.New("egress: the egress proxy did not open a tunnel")

// Class is a kind of outbound call, each of which may leave through its own
// egress proxy (Proxies). A call's class is its context's (WithClass), else
// its client's (Config.Class); a call with neither is ClassDefault.
type Class string

// The classes of outbound calls.
const (
	ClassDefault  Class = ""         // discovery, JWKS, anything not labelled
	ClassToken    Class = "token"    // the code exchange (and the userinfo call naming the account), API-key checks
	ClassRefresh  Class = "refresh"  // refresh-token grants
	ClassRevoke   Class = "revoke"   // token revocation (RFC 7009)
	ClassAPI      Class = "api"      // the provider API proxy
	ClassWebhooks Class = "webhooks" // webhook deliveries
)

type classKey struct{}

// WithClass labels the outbound calls made under ctx with class c (the
// provider package labels its token, refresh and revocation calls).
func WithClass(ctx context.Context, c Class) context.Context {
	return context.WithValue(ctx, classKey{}, c)
}

func classOf(ctx context.Context) (Class, bool) {
	c, ok := ctx.Value(classKey{}).(Class)
	return c, ok
}

// Proxy is an operator's egress HTTP proxy, reached over http or https and
// asked to open a tunnel with CONNECT (RFC 9110 §9.3.6). Its credential, if
// any, is sent as Basic in Proxy-Authorization to the proxy only, and never
// appears in String, an error or a log line.
type Proxy struct {
	secure bool   // https://: TLS to the proxy itself
	host   string // for the proxy's certificate
	addr   string // host:port dialed
	auth   string // "Basic …", or ""
}

// ParseProxy reads an egress proxy URL: http:// or https://, a host, an
// optional port (default 80 and 443), optional user:password (Basic
// credentials for the proxy), and no path, query or fragment. Its messages
// never repeat the URL (it may hold a password), so a caller may prefix the
// variable's name.
func ParseProxy(raw string) (*Proxy, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("is not a valid URL (want http://host:port or https://host:port)")
	}
	p := &Proxy{}
	port := "80"
	switch strings.ToLower(u.Scheme) {
	case "http":
	case "https":
		p.secure, port = true, "443"
	default:
		return nil, errors.New("must be an http:// or https:// proxy URL")
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return nil, errors.New("must name the proxy's host")
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, errors.New("must be only scheme://[user:password@]host[:port]: no path, query or fragment")
	}
	if s := u.Port(); s != "" {
		if n, err := strconv.ParseUint(s, 10, 16); err != nil || n == 0 {
			return nil, errors.New("port must be a number from 1 to 65535")
		}
		port = s
	}
	p.host = u.Hostname()
	p.addr = net.JoinHostPort(p.host, port)
	if u.User != nil {
		pass, _ := u.User.Password()
		if u.User.Username() == "" {
			return nil, errors.New("user info must name a user (user:password@)")
		}
		p = p.WithCredential(u.User.Username(), pass)
	}
	return p, nil
}

// WithCredential returns a copy of p that authenticates to the proxy with
// Basic user:password (replacing the URL's user info).
func (p *Proxy) WithCredential(user, password string) *Proxy {
	c := *p
	c.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	return &c
}

// HasCredential reports whether p authenticates to the proxy.
func (p *Proxy) HasCredential() bool { return p != nil && p.auth != "" }

// String is the proxy's scheme, host and port: never its credential.
func (p *Proxy) String() string {
	if p == nil {
		return "direct"
	}
	if p.secure {
		return "https://" + p.addr
	}
	return "http://" + p.addr
}

// Proxies routes each class of call: through Default, unless Class has an
// entry for the call's class, whose value is that class's proxy (nil: the
// class goes direct, whatever Default says). The zero value sends everything
// direct.
type Proxies struct {
	Default *Proxy
	Class   map[Class]*Proxy
}

// For is the proxy of a class (nil: direct).
func (ps Proxies) For(c Class) *Proxy {
	if p, ok := ps.Class[c]; ok {
		return p
	}
	return ps.Default
}

// distinct lists every proxy a call may take, nil (direct) included.
func (ps Proxies) distinct() []*Proxy {
	out := []*Proxy{nil}
	seen := map[*Proxy]bool{nil: true}
	for _, p := range append([]*Proxy{ps.Default}, mapValues(ps.Class)...) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

func mapValues(m map[Class]*Proxy) []*Proxy {
	out := make([]*Proxy, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	return out
}

// router hands each call to the transport of its class's route: each route
// (direct, or one proxy) has its own pool, so a connection tunnelled through
// one proxy is never reused for a class that goes elsewhere.
type router struct {
	class   Class
	proxies Proxies
	routes  map[*Proxy]*http.Transport
}

func (r *router) RoundTrip(req *http.Request) (*http.Response, error) {
	c, ok := classOf(req.Context())
	if !ok {
		c = r.class
	}
	return r.routes[r.proxies.For(c)].RoundTrip(req)
}

// CloseIdleConnections closes every route's idle connections.
func (r *router) CloseIdleConnections() {
	for _, t := range r.routes {
		t.CloseIdleConnections()
	}
}

// viaProxy is the DialContext of a route through p. The target is checked
// first, exactly as a direct dial would check it — the host resolved here
// and every address it resolves to put to the guard the direct dial would
// use — and only then is the proxy dialed, and asked to CONNECT to the
// checked IP address (never the name, which the proxy would resolve again,
// perhaps to an address the guard refused). The TLS that http.Transport
// runs over the tunnel still names, and verifies, the URL's host.
func (d *dialer) viaProxy(p *Proxy) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, _, addr string) (net.Conn, error) {
		target, err := d.checkTarget(ctx, addr)
		if err != nil {
			return nil, err
		}
		return d.connect(ctx, p, target)
	}
}

// checkTarget resolves addr's host (as route maps it) and puts every address
// to route's guard: one refused address refuses the call. It returns the
// ip:port to tunnel to (the first IPv4 address, else the first).
func (d *dialer) checkTarget(ctx context.Context, addr string) (string, error) {
	nd, addr, err := d.route(addr)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBlockedAddress, err)
	}
	host, port, _ := net.SplitHostPort(addr) // route checked it
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		r := nd.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		if addrs, err = r.LookupNetIP(ctx, "ip", host); err != nil {
			return "", err
		}
		for i, a := range addrs {
			addrs[i] = a.Unmap() // as the dialer would dial it
		}
	}
	if len(addrs) == 0 {
		return "", &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	pick := addrs[0]
	for _, a := range addrs {
		network := "tcp4"
		if a.Is6() { // a literal IPv4-mapped spelling too: the guard refuses it
			network = "tcp6"
		}
		if err := nd.Control(network, net.JoinHostPort(a.String(), port), nil); err != nil {
			return "", err
		}
		if a.Is4() && !pick.Is4() {
			pick = a
		}
	}
	return net.JoinHostPort(pick.String(), port), nil
}

// connect dials p and opens a tunnel to target (ip:port).
func (d *dialer) connect(ctx context.Context, p *Proxy, target string) (net.Conn, error) {
	conn, err := d.proxy.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrProxy, p, err)
	}
	// The whole CONNECT exchange is bounded by the context and by the
	// handshake and header timeouts.
	conn.SetDeadline(time.Now().Add(d.tlsTimeout + d.headerTimeout))
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (net.Conn, error) {
		stop()
		conn.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrProxy, p, err)
	}
	if p.secure {
		tc := tls.Client(conn, &tls.Config{ServerName: p.host, RootCAs: d.rootCAs, MinVersion: tls.VersionTLS12,
			NextProtos: []string{"http/1.1"}})
		if err := tc.HandshakeContext(ctx); err != nil {
			return fail(err)
		}
		conn = tc
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: target}, Host: target, Header: http.Header{}}
	if p.auth != "" {
		req.Header.Set("Proxy-Authorization", p.auth)
	}
	if err := req.Write(conn); err != nil {
		return fail(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fail(err)
	}
	resp.Body.Close() // its body is the proxy's page, never read nor quoted
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Errorf("CONNECT answered HTTP %d", resp.StatusCode))
	}
	if !stop() {
		return fail(ctx.Err())
	}
	conn.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

// bufferedConn reads what the CONNECT answer's reader already holds first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
