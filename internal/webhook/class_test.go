package webhook

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/egress/egresstest"
)

func mustProxy(t *testing.T, raw string) *egress.Proxy {
	t.Helper()
	p, err := egress.ParseProxy(raw)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAttemptClass sends real attempts (the worker's send, through the
// egress client, to receivers on loopback that fail in each way) and checks
// the class each is recorded as: never the error's text, which names the
// resolved address and port.
func TestAttemptClass(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	for _, code := range []int{200, 204, 300, 404, 500, 502, 600} {
		mux.HandleFunc("/"+strconv.Itoa(code), func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) })
	}
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://10.0.0.1/", http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(egress.DefaultMaxResponseBytes+1))
		_, _ = w.Write(make([]byte, egress.DefaultMaxResponseBytes+1))
	})
	release := make(chan struct{}) // closed before the servers close
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	mux.HandleFunc("/close", func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	plain := httptest.NewServer(mux) // spoken to over https: not TLS
	t.Cleanup(plain.Close)
	t.Cleanup(func() { close(release) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String() // nothing listens there any more
	ln.Close()
	garbage, err := net.Listen("tcp", "127.0.0.1:0") // answers neither TLS nor HTTP
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { garbage.Close() })
	go func() {
		for {
			conn, err := garbage.Accept()
			if err != nil {
				return
			}
			_, _ = conn.Write([]byte("hello, this is not TLS\n"))
			conn.Close()
		}
	}()

	host := func(u string) string { return u[strings.Index(u, "//")+2:] }
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	cfg := egress.Config{
		AllowHosts:            []string{host(srv.URL), host(plain.URL), closed, garbage.Addr().String()},
		RootCAs:               roots,
		ResponseHeaderTimeout: 300 * time.Millisecond,
		// Names other than /etc/hosts' do not resolve: the DNS server is
		// unreachable, and no query leaves this machine.
		Resolver: &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("no DNS server in this test")
		}},
	}
	client := func(cfg egress.Config) *http.Client {
		c, err := egress.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.CloseIdleConnections)
		return c
	}
	trusting := client(cfg)
	refusing := egresstest.New(t, egresstest.Options{Status: http.StatusForbidden})
	proxied := cfg
	proxied.Proxies.Default, err = egress.ParseProxy(refusing.URL())
	if err != nil {
		t.Fatal(err)
	}
	viaRefusingProxy, viaNoProxy := client(proxied), client(egress.Config{Proxies: egress.Proxies{Default: mustProxy(t, "http://"+closed)},
		AllowHosts: cfg.AllowHosts, Resolver: cfg.Resolver})
	cfg.RootCAs = nil
	untrusting := client(cfg)
	wh, err := standardwebhooks.NewWebhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	for _, tt := range []struct {
		name   string
		client *http.Client
		ctx    context.Context
		url    string
		want   string
	}{
		{"delivered", trusting, nil, srv.URL + "/204", ""},
		{"200", trusting, nil, srv.URL + "/200", ""},
		{"not found", trusting, nil, srv.URL + "/404", "http_4xx"},
		{"server error", trusting, nil, srv.URL + "/500", "http_5xx"},
		{"bad gateway", trusting, nil, srv.URL + "/502", "http_5xx"},
		{"a status outside 100-599", trusting, nil, srv.URL + "/600", "http_status"},
		{"redirect", trusting, nil, srv.URL + "/redirect", "redirect"},
		{"3xx without a Location", trusting, nil, srv.URL + "/300", "redirect"},
		{"body over the cap", trusting, nil, srv.URL + "/big", "too_large"},
		{"no answer in time", trusting, nil, srv.URL + "/hang", "timeout"},
		{"connection closed without an answer", trusting, nil, srv.URL + "/close", "connection_reset"},
		{"untrusted certificate", untrusting, nil, srv.URL + "/204", "tls"},
		{"not TLS", trusting, nil, "https://" + garbage.Addr().String() + "/", "tls"},
		// net/http says so in a plain error, whose text is not parsed.
		{"an http server spoken to over https", trusting, nil, "https://" + host(plain.URL) + "/204", "not_reached"},
		{"nothing listening", trusting, nil, "https://" + closed + "/", "connection_refused"},
		{"private address", trusting, nil, "https://10.0.0.1/", "blocked_address"},
		{"metadata address", trusting, nil, "https://169.254.169.254:80/", "blocked_address"},
		{"name resolving to loopback", trusting, nil, "https://localhost:" + srv.URL[strings.LastIndex(srv.URL, ":")+1:] + "/204", "blocked_address"},
		{"http outside the allow-list", trusting, nil, "http://hooks.example/", "insecure_scheme"},
		{"name that does not resolve", trusting, nil, "https://hooks.example/", "dns"},
		{"connectd stopping", trusting, cancelled, srv.URL + "/204", "cancelled"},
		{"unusable URL", trusting, nil, "https://hooks.example/%zz", "invalid_url"},
		{"the egress proxy refuses the tunnel", viaRefusingProxy, nil, srv.URL + "/204", "egress_proxy"},
		{"the egress proxy is down", viaNoProxy, nil, srv.URL + "/204", "egress_proxy"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			w := &Worker{cfg: Config{HTTPClient: tt.client}}
			code, err := w.send(ctx, wh, "msg_test", tt.url, []byte(`{}`), time.Now())
			if got := attemptClass(code, err); got != tt.want {
				t.Fatalf("class %q, want %q (status %d, error %v)", got, tt.want, code, err)
			}
		})
	}
}
