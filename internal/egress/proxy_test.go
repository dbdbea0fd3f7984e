package egress_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/egress/egresstest"
)

// target is an https server (httptest's certificate names example.com)
// that records each request's peer address and Proxy-Authorization.
type target struct {
	srv       *httptest.Server
	mu        sync.Mutex
	peers     []string
	proxyAuth []string
}

func newTarget(t *testing.T) *target {
	t.Helper()
	tg := &target{}
	tg.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg.mu.Lock()
		tg.peers = append(tg.peers, r.RemoteAddr)
		tg.proxyAuth = append(tg.proxyAuth, r.Header.Get("Proxy-Authorization"))
		tg.mu.Unlock()
		io.WriteString(w, "hello from "+r.Host)
	}))
	t.Cleanup(tg.srv.Close)
	return tg
}

func (tg *target) lastPeer() string {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.peers[len(tg.peers)-1]
}

func (tg *target) port() string {
	_, p, _ := net.SplitHostPort(tg.srv.Listener.Addr().String())
	return p
}

// url is the target under the name example.com, which the fake resolver
// answers with 127.0.0.1 and the allow-list lets reach loopback.
func (tg *target) url() string { return "https://example.com:" + tg.port() + "/" }

func (tg *target) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(tg.srv.Certificate()) // httptest's one certificate: the TLS proxies' too
	return p
}

func mustProxy(t *testing.T, raw string) *egress.Proxy {
	t.Helper()
	p, err := egress.ParseProxy(raw)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func getCtx(ctx context.Context, c *http.Client, u string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestProxyClasses: each class of call leaves through its own proxy (http
// and https proxies, with credentials), a class set to none goes direct
// while the others use theirs, and a connection tunnelled for one class is
// never reused for another — every call, in any order, to the same target.
// The CONNECT names the checked IP address, never the name.
func TestProxyClasses(t *testing.T) {
	t.Parallel()
	tg := newTarget(t)
	all := egresstest.New(t, egresstest.Options{User: "all", Password: "pw-all"})
	refresh := egresstest.New(t, egresstest.Options{TLS: true, User: "ref", Password: "pw-ref"})
	api := egresstest.New(t, egresstest.Options{})
	proxies := egress.Proxies{
		Default: mustProxy(t, all.URLWithCredential("all", "pw-all")),
		Class: map[egress.Class]*egress.Proxy{
			egress.ClassRefresh:  mustProxy(t, refresh.URL()).WithCredential("ref", "pw-ref"),
			egress.ClassAPI:      mustProxy(t, api.URL()),
			egress.ClassWebhooks: nil, // none: direct
		},
	}
	c := newClient(t, egress.Config{Proxies: proxies, RootCAs: tg.pool(),
		AllowHosts: []string{"example.com:" + tg.port()}})
	apiClient := newClient(t, egress.Config{Proxies: proxies, Class: egress.ClassAPI, RootCAs: tg.pool(),
		AllowHosts: []string{"example.com:" + tg.port()}})

	proxyOf := map[string]*egresstest.Proxy{"all": all, "refresh": refresh, "api": api}
	for _, round := range []int{1, 2} { // the second round reuses pooled connections
		for _, tt := range []struct {
			name   string
			client *http.Client
			class  *egress.Class
			via    string // "" direct
		}{
			{"unlabelled", c, nil, "all"},
			{"token", c, ptr(egress.ClassToken), "all"},
			{"refresh", c, ptr(egress.ClassRefresh), "refresh"},
			{"revoke", c, ptr(egress.ClassRevoke), "all"},
			{"api by context", c, ptr(egress.ClassAPI), "api"},
			{"api client", apiClient, nil, "api"},
			{"api client, refresh call", apiClient, ptr(egress.ClassRefresh), "refresh"},
			{"webhooks none", c, ptr(egress.ClassWebhooks), ""},
		} {
			ctx := context.Background()
			if tt.class != nil {
				ctx = egress.WithClass(ctx, *tt.class)
			}
			status, body, err := getCtx(ctx, tt.client, tg.url())
			if err != nil || status != 200 || !strings.HasPrefix(body, "hello from example.com") {
				t.Fatalf("round %d %s: %d %q %v", round, tt.name, status, body, err)
			}
			peer := tg.lastPeer()
			for name, p := range proxyOf {
				if got, want := p.Carried(peer), name == tt.via; got != want {
					t.Errorf("round %d %s: carried by the %s proxy = %v, want %v", round, tt.name, name, got, want)
				}
			}
		}
	}
	for name, p := range proxyOf {
		cs := p.Connects()
		if len(cs) == 0 {
			t.Errorf("%s proxy: no CONNECT", name)
		}
		for _, cn := range cs {
			if cn.Target != "127.0.0.1:"+tg.port() {
				t.Errorf("%s proxy: CONNECT %q, want the checked address 127.0.0.1:%s (never the name)", name, cn.Target, tg.port())
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestProxyAuthentication: the proxy sees the credential — from the URL's
// user info or given separately — as Basic in Proxy-Authorization; the
// target never sees Proxy-Authorization; a proxy without a credential gets
// no header at all.
func TestProxyAuthentication(t *testing.T) {
	t.Parallel()
	tg := newTarget(t)
	for _, tt := range []struct {
		name     string
		proxy    func(p *egresstest.Proxy) *egress.Proxy
		tls      bool
		wantAuth string
	}{
		{"url user info", func(p *egresstest.Proxy) *egress.Proxy { return mustProxy(t, p.URLWithCredential("u", "p:w@d")) }, false,
			"Basic " + base64.StdEncoding.EncodeToString([]byte("u:p:w@d"))},
		{"separate credential, https proxy", func(p *egresstest.Proxy) *egress.Proxy {
			return mustProxy(t, p.URLWithCredential("x", "y")).WithCredential("u", "p:w@d")
		}, true, "Basic " + base64.StdEncoding.EncodeToString([]byte("u:p:w@d"))},
		{"no credential", func(p *egresstest.Proxy) *egress.Proxy { return mustProxy(t, p.URL()) }, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := egresstest.Options{TLS: tt.tls}
			if tt.wantAuth != "" {
				opts.User, opts.Password = "u", "p:w@d"
			}
			p := egresstest.New(t, opts)
			c := newClient(t, egress.Config{Proxies: egress.Proxies{Default: tt.proxy(p)}, RootCAs: tg.pool(),
				AllowHosts: []string{"example.com:" + tg.port()}})
			if status, _, err := getCtx(context.Background(), c, tg.url()); err != nil || status != 200 {
				t.Fatalf("%d %v", status, err)
			}
			cs := p.Connects()
			if len(cs) != 1 || cs[0].Authorization != tt.wantAuth {
				t.Fatalf("the proxy saw %+v, want one CONNECT with %q", cs, tt.wantAuth)
			}
			tg.mu.Lock()
			defer tg.mu.Unlock()
			for _, a := range tg.proxyAuth {
				if a != "" {
					t.Fatalf("the target saw Proxy-Authorization %q", a)
				}
			}
		})
	}
}

// TestProxySSRFGuardDecidesFirst is the attack: a URL whose name resolves
// (or rebinds) to loopback, a private network or the cloud metadata address,
// or names one directly, sent to a client whose calls leave through a proxy
// — which, asked to CONNECT to it, would reach it from inside the network.
// The guard refuses every one on the target before anything is sent to the
// proxy: it records no CONNECT and accepts no connection.
func TestProxySSRFGuardDecidesFirst(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		a    [4]byte
		url  string
	}{
		{"name to loopback (not allow-listed)", [4]byte{127, 0, 0, 1}, "https://evil.test/"},
		{"name to loopback on another port", [4]byte{127, 0, 0, 1}, "https://example.com:1/"},
		{"name to 10.x", [4]byte{10, 0, 0, 7}, "https://evil.test/"},
		{"name to metadata", [4]byte{169, 254, 169, 254}, "https://evil.test/latest/meta-data/"},
		{"literal 10.x", [4]byte{127, 0, 0, 1}, "https://10.1.2.3/"},
		{"literal metadata", [4]byte{127, 0, 0, 1}, "https://169.254.169.254/"},
		{"literal loopback", [4]byte{127, 0, 0, 1}, "https://127.0.0.1:8443/"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := egresstest.New(t, egresstest.Options{})
			resolver, _ := fakeResolverTo(t, tt.a)
			c := newClient(t, egress.Config{Resolver: resolver,
				Proxies: egress.Proxies{Default: mustProxy(t, p.URL())}, AllowHosts: []string{"example.com:443"}})
			_, _, err := getCtx(egress.WithClass(context.Background(), egress.ClassRefresh), c, tt.url)
			if !errors.Is(err, egress.ErrBlockedAddress) {
				t.Fatalf("got %v, want ErrBlockedAddress", err)
			}
			if errors.Is(err, egress.ErrProxy) {
				t.Fatalf("the proxy was asked: %v", err)
			}
			if cs := p.Connects(); len(cs) != 0 {
				t.Fatalf("the proxy was asked to CONNECT %+v", cs)
			}
		})
	}
}

// TestProxyRefusal: a proxy that refuses the tunnel (407 for a wrong
// credential, 502, 403) or cannot be reached is ErrProxy with its status,
// and the error never carries the credential.
func TestProxyRefusal(t *testing.T) {
	t.Parallel()
	tg := newTarget(t)
	closed := listenCounter(t, "127.0.0.1:0")
	closed.ln.Close()
	for _, tt := range []struct {
		name   string
		opts   egresstest.Options
		url    func(p *egresstest.Proxy) string
		status string
	}{
		{"407 wrong credential", egresstest.Options{User: "u", Password: "right"},
			func(p *egresstest.Proxy) string { return p.URLWithCredential("u", "s3cr3t-pw") }, "HTTP 407"},
		{"502", egresstest.Options{Status: http.StatusBadGateway},
			func(p *egresstest.Proxy) string { return p.URLWithCredential("u", "s3cr3t-pw") }, "HTTP 502"},
		{"403 https proxy", egresstest.Options{TLS: true, Status: http.StatusForbidden},
			func(p *egresstest.Proxy) string { return p.URLWithCredential("u", "s3cr3t-pw") }, "HTTP 403"},
		{"unreachable", egresstest.Options{},
			func(*egresstest.Proxy) string { return "http://u:s3cr3t-pw@" + closed.ln.Addr().String() }, "connection refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := egresstest.New(t, tt.opts)
			c := newClient(t, egress.Config{Proxies: egress.Proxies{Default: mustProxy(t, tt.url(p))}, RootCAs: tg.pool(),
				AllowHosts: []string{"example.com:" + tg.port()}})
			_, _, err := getCtx(context.Background(), c, tg.url())
			if !errors.Is(err, egress.ErrProxy) || !strings.Contains(err.Error(), tt.status) {
				t.Fatalf("got %v, want ErrProxy with %q", err, tt.status)
			}
			for _, secret := range []string{"s3cr3t-pw", base64.StdEncoding.EncodeToString([]byte("u:s3cr3t-pw")), "u:"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the error %q carries the credential", err)
				}
			}
		})
	}
}

// TestParseProxy: what an egress proxy URL may be; the messages never
// repeat the URL (it may hold a password).
func TestParseProxy(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		raw  string
		want string // "" accepted: String()
		ok   string
	}{
		{raw: "http://proxy.internal:3128", ok: "http://proxy.internal:3128"},
		{raw: "http://proxy.internal", ok: "http://proxy.internal:80"},
		{raw: "https://u:pw@10.0.0.9/", ok: "https://10.0.0.9:443"},
		{raw: "HTTP://[fd00::1]:8080", ok: "http://[fd00::1]:8080"},
		{raw: "socks5://u:pw@proxy:1080", want: "http:// or https://"},
		{raw: "proxy.internal:3128", want: "http:// or https://"},
		{raw: "http://u:pw@", want: "host"},
		{raw: "http://u:pw@proxy:0", want: "port"},
		{raw: "http://u:pw@proxy:99999", want: "port"},
		{raw: "http://u:pw@proxy:3128/path", want: "no path"},
		{raw: "http://u:pw@proxy:3128?x=1", want: "no path"},
		{raw: "http://u:pw@proxy:3128#f", want: "no path"},
		{raw: "http://:pw@proxy:3128", want: "user"},
		{raw: "http://u:p w@proxy%zz:3128", want: "valid URL"},
	} {
		t.Run(tt.raw, func(t *testing.T) {
			p, err := egress.ParseProxy(tt.raw)
			if tt.want == "" {
				if err != nil || p.String() != tt.ok {
					t.Fatalf("%v %v, want %s", p, err, tt.ok)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v, want an error about %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "pw") {
				t.Fatalf("%q repeats the credential", err)
			}
		})
	}
}

// TestProxyErrorKind: a span's error.type names a proxy's failure as the
// proxy's, never as the target's (a refused CONNECT, a proxy timing out).
func TestProxyErrorKind(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: http://p:3128: CONNECT answered HTTP 407", egress.ErrProxy), "egress_proxy"},
		{fmt.Errorf("%w: http://p:3128: %w", egress.ErrProxy, context.DeadlineExceeded), "egress_proxy"},
		{fmt.Errorf("x: %w", egress.ErrBlockedAddress), "blocked_address"},
	} {
		if got := egress.ErrorKind(tt.err); got != tt.want {
			t.Errorf("%v: %q, want %q", tt.err, got, tt.want)
		}
	}
}
