package egress_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"code.dny.dev/ssrf"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/connectd/connectd/internal/egress"
)

// Every test here talks only to loopback: attack destinations are refused by
// the dial Control before connect(2) (and should the guard ever let one
// through, the tripwire newClient installs refuses it instead, failing the
// test), and names are resolved by fakeResolver, never by a real DNS server.

// fakeResolver returns a resolver whose only DNS server is a UDP socket on
// 127.0.0.1 that answers every A question with 127.0.0.1 — the worst a
// hostile or rebinding DNS server can do — and other questions with no
// answer. /etc/hosts is still read first ("localhost"). queries counts the
// questions it answered.
func fakeResolver(t *testing.T) (r *net.Resolver, queries *atomic.Int64) {
	t.Helper()
	return fakeResolverTo(t, [4]byte{127, 0, 0, 1})
}

// fakeResolverTo is fakeResolver answering every A question with a.
func fakeResolverTo(t *testing.T, a [4]byte) (r *net.Resolver, queries *atomic.Int64) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	queries = new(atomic.Int64)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			queries.Add(1)
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true})
			_ = b.StartQuestions()
			_ = b.Question(q)
			_ = b.StartAnswers()
			if q.Type == dnsmessage.TypeA {
				_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1},
					dnsmessage.AResource{A: a})
			}
			if msg, err := b.Finish(); err == nil {
				_, _ = pc.WriteTo(msg, from)
			}
		}
	}()
	server := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", server) // whatever resolv.conf says
	}}, queries
}

// counter is a TCP listener on loopback that counts the connections it
// accepts, to prove that a refused request never connected.
type counter struct {
	ln net.Listener
	n  atomic.Int64
}

func listenCounter(t *testing.T, addr string) *counter {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	c := &counter{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.n.Add(1)
			conn.Close()
		}
	}()
	return c
}

func (c *counter) port() string {
	_, p, _ := net.SplitHostPort(c.ln.Addr().String())
	return p
}

// assertUntouched makes one canary connection of its own and waits for it:
// the accept queue is FIFO, so any earlier connection would have been
// counted first.
func (c *counter) assertUntouched(t *testing.T) {
	t.Helper()
	conn, err := net.Dial("tcp", c.ln.Addr().String())
	if err != nil {
		t.Fatalf("canary: %v", err)
	}
	conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	for c.n.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := c.n.Load(); n != 1 {
		t.Fatalf("listener %s accepted %d connection(s) besides the canary", c.ln.Addr(), n-1)
	}
}

// newClient is egress.New with the fake resolver and short timeouts.
func newClient(t *testing.T, cfg egress.Config) *http.Client {
	t.Helper()
	if cfg.Resolver == nil {
		cfg.Resolver, _ = fakeResolver(t)
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	if cfg.TLSHandshakeTimeout == 0 {
		cfg.TLSHandshakeTimeout = 2 * time.Second
	}
	if cfg.ResponseHeaderTimeout == 0 {
		cfg.ResponseHeaderTimeout = 2 * time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	c, err := egress.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	egress.InstallTripwire(c)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// get fetches u and reads the whole body.
func get(c *http.Client, u string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

func hostPort(t *testing.T, rawURL string) string {
	t.Helper()
	return strings.TrimPrefix(strings.TrimPrefix(rawURL, "http://"), "https://")
}

// assertRefusedBeforeConnect: the error is the guard's, raised by the dial
// Control, which runs before connect(2) — so not a packet left.
func assertRefusedBeforeConnect(t *testing.T, err error) {
	t.Helper()
	var op *net.OpError
	if !errors.Is(err, egress.ErrBlockedAddress) || !errors.Is(err, ssrf.ErrProhibitedIP) ||
		!errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("want a dial refused by the guard (ErrBlockedAddress), got %v", err)
	}
}

// TestProxyFromEnvironmentIgnored runs first (not parallel: it sets the
// environment before anything in this binary can cache the proxy settings).
// A proxy would connect on connectd's behalf, past the dial guard.
func TestProxyFromEnvironmentIgnored(t *testing.T) {
	proxy := listenCounter(t, "127.0.0.1:0")
	proxyURL := "http://" + proxy.ln.Addr().String()
	t.Setenv("HTTPS_PROXY", proxyURL)
	t.Setenv("HTTP_PROXY", proxyURL)
	t.Setenv("NO_PROXY", "")
	// The proxy is allow-listed, so only the absence of proxying keeps the
	// request from reaching it.
	c := newClient(t, egress.Config{AllowHosts: []string{proxy.ln.Addr().String()}})
	_, _, err := get(c, "https://rebind.example.com/")
	assertRefusedBeforeConnect(t, err)
	proxy.assertUntouched(t)
}

func TestBlockedDestinations(t *testing.T) {
	t.Parallel()
	v4 := listenCounter(t, "127.0.0.1:0")
	v6 := listenCounter(t, "[::1]:0")
	p4, p6 := v4.port(), v6.port()
	resolver, _ := fakeResolver(t)
	// An allow-listed loopback port elsewhere must not open the others.
	other := listenCounter(t, "127.0.0.1:0")
	c := newClient(t, egress.Config{Resolver: resolver, AllowHosts: []string{other.ln.Addr().String()}})

	tests := []struct {
		name string
		url  string
		// unresolvable: Go's resolver rejects the spelling as a name (no
		// DNS query) — refused too, by not resolving.
		unresolvable bool
	}{
		{"loopback", "https://127.0.0.1:" + p4 + "/", false},
		{"loopback 127/8", "https://127.0.0.2:" + p4 + "/", false},
		{"localhost from /etc/hosts", "https://localhost:" + p4 + "/", false},
		{"name under .localhost", "https://app.localhost:" + p4 + "/", false},
		{"public-looking name resolving to loopback (rebinding)", "https://rebind.example.com:" + p4 + "/", false},
		{"unspecified IPv4", "https://0.0.0.0:" + p4 + "/", false},
		{"unspecified IPv6", "https://[::]:" + p6 + "/", false},
		{"loopback IPv6", "https://[::1]:" + p6 + "/", false},
		{"IPv4-mapped loopback", "https://[::ffff:127.0.0.1]:" + p4 + "/", false},
		{"IPv4-mapped metadata", "https://[::ffff:169.254.169.254]/", false},
		{"cloud metadata", "https://169.254.169.254/latest/meta-data/", false},
		{"private 10/8", "https://10.0.0.1/", false},
		{"private 172.16/12", "https://172.16.0.1/", false},
		{"private 192.168/16", "https://192.168.1.1/", false},
		{"CGNAT 100.64/10", "https://100.64.0.1/", false},
		{"multicast", "https://224.0.0.1/", false},
		{"broadcast", "https://255.255.255.255/", false},
		{"link-local IPv6", "https://[fe80::1]/", false},
		{"unique-local IPv6", "https://[fd00::1]/", false},
		{"NAT64 of loopback", "https://[64:ff9b::7f00:1]/", false},
		{"6to4 of loopback", "https://[2002:7f00:1::1]/", false},
		{"hex dotted", "https://0x7f.1:" + p4 + "/", false},
		{"hex integer", "https://0x7f000001:" + p4 + "/", false},
		{"decimal integer", "https://2130706433:" + p4 + "/", true},
		{"octal dotted", "https://0177.0.0.1:" + p4 + "/", true},
		{"short dotted", "https://127.1:" + p4 + "/", true},
		{"allow-listed address, other port", "https://127.0.0.1:" + p4 + "/", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := get(c, tt.url)
			var dnsErr *net.DNSError
			if tt.unresolvable && errors.As(err, &dnsErr) && dnsErr.IsNotFound {
				return
			}
			assertRefusedBeforeConnect(t, err)
		})
	}
	v4.assertUntouched(t)
	v6.assertUntouched(t)
	other.assertUntouched(t)
}

func TestInsecureScheme(t *testing.T) {
	t.Parallel()
	ln := listenCounter(t, "127.0.0.1:0")
	resolver, queries := fakeResolver(t)
	c := newClient(t, egress.Config{Resolver: resolver, AllowHosts: []string{"127.0.0.1:1"}})
	for _, u := range []string{
		"http://example.com/",
		"http://2130706433/",
		"http://169.254.169.254/latest/meta-data/",
		"http://127.0.0.1:" + ln.port() + "/",
		"http://localhost:1/",
		"ftp://example.com/",
		"file:///etc/passwd",
		"gopher://example.com/",
	} {
		t.Run(u, func(t *testing.T) {
			_, _, err := get(c, u)
			if !errors.Is(err, egress.ErrInsecureScheme) {
				t.Fatalf("want ErrInsecureScheme, got %v", err)
			}
		})
	}
	if n := queries.Load(); n != 0 {
		t.Fatalf("%d DNS queries for refused schemes", n)
	}
	ln.assertUntouched(t)
}

func TestAllowHosts(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	t.Cleanup(srv.Close)
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls ok") }))
	t.Cleanup(tlsSrv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(tlsSrv.Certificate())
	other := listenCounter(t, "127.0.0.1:0")
	srvHost, tlsHost := hostPort(t, srv.URL), hostPort(t, tlsSrv.URL)
	_, srvPort, _ := net.SplitHostPort(srvHost)

	c := newClient(t, egress.Config{RootCAs: roots, AllowHosts: []string{
		srvHost, tlsHost,
		// Allow-listing never opens private or link-local networks.
		"10.0.0.1:80", "169.254.169.254:80", "[fd00::1]:80",
	}})
	for _, tt := range []struct {
		name, url string
		want      string // body, or "" for refused
		wantErr   error
	}{
		{"allow-listed http", srv.URL + "/", "ok", nil},
		{"allow-listed https", tlsSrv.URL + "/", "tls ok", nil},
		{"other port, http", "http://" + other.ln.Addr().String() + "/", "", egress.ErrInsecureScheme},
		{"other port, https", "https://" + other.ln.Addr().String() + "/", "", egress.ErrBlockedAddress},
		{"same port, other spelling", "http://localhost:" + srvPort + "/", "", egress.ErrInsecureScheme},
		{"same port, other spelling, https", "https://localhost:" + srvPort + "/", "", egress.ErrBlockedAddress},
		{"same port, IPv4-mapped", "http://[::ffff:127.0.0.1]:" + srvPort + "/", "", egress.ErrInsecureScheme},
		{"same port, decimal", "http://2130706433:" + srvPort + "/", "", egress.ErrInsecureScheme},
		{"allow-listed private address", "http://10.0.0.1/", "", egress.ErrBlockedAddress},
		{"allow-listed metadata address", "http://169.254.169.254/", "", egress.ErrBlockedAddress},
		{"allow-listed unique-local address", "http://[fd00::1]/", "", egress.ErrBlockedAddress},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body, err := get(c, tt.url)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("want %v, got %v", tt.wantErr, err)
				}
				if errors.Is(tt.wantErr, egress.ErrBlockedAddress) {
					assertRefusedBeforeConnect(t, err)
				}
				return
			}
			if err != nil || status != http.StatusOK || string(body) != tt.want {
				t.Fatalf("got %d %q %v", status, body, err)
			}
		})
	}
	other.assertUntouched(t)

	// Without the allow-list, the same loopback servers are refused.
	strict := newClient(t, egress.Config{RootCAs: roots})
	if _, _, err := get(strict, srv.URL); !errors.Is(err, egress.ErrInsecureScheme) {
		t.Fatalf("http without allow-list: %v", err)
	}
	_, _, err := get(strict, tlsSrv.URL)
	assertRefusedBeforeConnect(t, err)
}

func TestDialOverride(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Host) }))
	t.Cleanup(srv.Close)
	resolver, queries := fakeResolver(t)
	c := newClient(t, egress.Config{
		Resolver:     resolver,
		AllowHosts:   []string{"connectd.test:8080", "evil.test:80"},
		DialOverride: map[string]string{"connectd.test:8080": srv.Listener.Addr().String(), "evil.test:80": "10.0.0.1:80"},
	})
	status, body, err := get(c, "http://connectd.test:8080/x")
	if err != nil || status != http.StatusOK || string(body) != "connectd.test:8080" {
		t.Fatalf("override: %d %q %v", status, body, err)
	}
	if n := queries.Load(); n != 0 {
		t.Fatalf("overridden name was resolved (%d queries)", n)
	}
	_, _, err = get(c, "http://evil.test/")
	assertRefusedBeforeConnect(t, err)
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  egress.Config
	}{
		{"no port", egress.Config{AllowHosts: []string{"127.0.0.1"}}},
		{"URL", egress.Config{AllowHosts: []string{"http://127.0.0.1:8080"}}},
		{"port zero", egress.Config{AllowHosts: []string{"127.0.0.1:0"}}},
		{"port too large", egress.Config{AllowHosts: []string{"127.0.0.1:65536"}}},
		{"named port", egress.Config{AllowHosts: []string{"127.0.0.1:http"}}},
		{"no host", egress.Config{AllowHosts: []string{":8080"}}},
		{"user info", egress.Config{AllowHosts: []string{"a@127.0.0.1:8080"}}},
		{"override not allow-listed", egress.Config{DialOverride: map[string]string{"a.test:80": "127.0.0.1:80"}}},
		{"override target", egress.Config{AllowHosts: []string{"a.test:80"}, DialOverride: map[string]string{"a.test:80": "127.0.0.1"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if c, err := egress.New(tt.cfg); err == nil {
				c.CloseIdleConnections()
				t.Fatal("accepted")
			}
		})
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	var followed atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/next", func(w http.ResponseWriter, r *http.Request) { followed.Add(1) })
	mux.HandleFunc("/start/{code}", func(w http.ResponseWriter, r *http.Request) {
		code := 0
		for _, c := range []int{301, 302, 303, 307, 308} {
			if r.PathValue("code") == http.StatusText(c) {
				code = c
			}
		}
		http.Redirect(w, r, "/next?code=SECRET-CODE", code)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := newClient(t, egress.Config{AllowHosts: []string{hostPort(t, srv.URL)}})
	for _, code := range []int{301, 302, 303, 307, 308} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			t.Run(method+" "+http.StatusText(code), func(t *testing.T) {
				req, _ := http.NewRequest(method, srv.URL+"/start/"+http.StatusText(code), strings.NewReader("grant_type=x"))
				resp, err := c.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				if !errors.Is(err, egress.ErrRedirect) {
					t.Fatalf("want ErrRedirect, got %v", err)
				}
				if strings.Contains(err.Error(), "SECRET-CODE") {
					t.Fatalf("error quotes the Location: %v", err)
				}
			})
		}
	}
	if n := followed.Load(); n != 0 {
		t.Fatalf("redirect followed %d time(s)", n)
	}
}

func TestResponseSizeCap(t *testing.T) {
	t.Parallel()
	const max = 1024
	secret := "SECRET-BODY-"
	fill := func(n int) []byte { return bytes.Repeat([]byte(secret), n/len(secret)+1)[:n] }
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	zw.Write(make([]byte, 1<<20)) // 1 MiB of zeros, about 1 KiB compressed
	zw.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("/exact", func(w http.ResponseWriter, r *http.Request) { w.Write(fill(max)) })
	mux.HandleFunc("/declared", func(w http.ResponseWriter, r *http.Request) { w.Write(fill(max + 1)) })
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		w.Write(fill(max / 2))
		w.(http.Flusher).Flush()
		w.Write(fill(max))
	})
	mux.HandleFunc("/gzip-bomb", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(zipped.Bytes())
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := newClient(t, egress.Config{AllowHosts: []string{hostPort(t, srv.URL)}, MaxResponseBytes: max})

	for _, tt := range []struct {
		path    string
		wantErr bool
		atDo    bool // refused by its Content-Length, before the body is read
	}{
		{"/exact", false, false},
		{"/declared", true, true},
		{"/chunked", true, false},
		{"/gzip-bomb", true, false},
	} {
		t.Run(tt.path, func(t *testing.T) {
			status, body, err := get(c, srv.URL+tt.path)
			if tt.atDo && status != 0 {
				t.Fatalf("oversize Content-Length not refused at Do (status %d)", status)
			}
			if len(body) > max {
				t.Fatalf("read %d bytes past the cap of %d", len(body), max)
			}
			if !tt.wantErr {
				if err != nil || len(body) != max {
					t.Fatalf("got %d bytes, %v", len(body), err)
				}
				return
			}
			if !errors.Is(err, egress.ErrTooLarge) {
				t.Fatalf("want ErrTooLarge, got %v", err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error quotes the body: %v", err)
			}
		})
	}
}

func TestTimeouts(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/no-headers", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	mux.HandleFunc("/slow-body", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "{")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before srv.Close

	// A TLS peer that accepts and never answers the handshake.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mute.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()

	allow := []string{hostPort(t, srv.URL), mute.Addr().String()}
	for _, tt := range []struct {
		name string
		cfg  egress.Config
		url  string
	}{
		{"response headers", egress.Config{ResponseHeaderTimeout: 100 * time.Millisecond}, srv.URL + "/no-headers"},
		{"whole exchange", egress.Config{Timeout: 200 * time.Millisecond}, srv.URL + "/slow-body"},
		{"TLS handshake", egress.Config{TLSHandshakeTimeout: 100 * time.Millisecond}, "https://" + mute.Addr().String() + "/"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.AllowHosts = allow
			c := newClient(t, tt.cfg)
			start := time.Now()
			_, _, err := get(c, tt.url)
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("want a timeout, got %v", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("took %s", d)
			}
		})
	}
}
