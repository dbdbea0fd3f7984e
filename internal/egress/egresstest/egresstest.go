// Package egresstest is a real HTTP CONNECT proxy for tests, on httptest:
// it records every CONNECT it is asked for (the target as written and the
// Proxy-Authorization it carried), checks a Basic credential when given one,
// can refuse every tunnel with a status, and tunnels only to loopback
// targets (anything else gets 502 and no packet leaves the machine).
package egresstest

import (
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Options configure a Proxy.
type Options struct {
	TLS            bool   // https:// proxy (httptest's certificate)
	User, Password string // when User is set, CONNECT must carry them (else 407)
	Status         int    // when set, every CONNECT is answered with it (no tunnel)
}

// Connect is one CONNECT request the proxy received.
type Connect struct {
	Target        string // the request target (host:port as the client wrote it)
	Authorization string // its Proxy-Authorization header
}

// Proxy is a recording CONNECT proxy.
type Proxy struct {
	Server *httptest.Server
	opts   Options

	mu       sync.Mutex
	connects []Connect
	upstream map[string]bool // local addresses of the tunnels' upstream connections
}

// New starts a proxy, closed when the test ends.
func New(t testing.TB, opts Options) *Proxy {
	t.Helper()
	p := &Proxy{opts: opts, upstream: map[string]bool{}}
	p.Server = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	if opts.TLS {
		p.Server.StartTLS()
	} else {
		p.Server.Start()
	}
	t.Cleanup(p.Server.Close)
	return p
}

// URL is the proxy's URL, without credentials.
func (p *Proxy) URL() string { return p.Server.URL }

// URLWithCredential is the proxy's URL with user:password user info.
func (p *Proxy) URLWithCredential(user, password string) string {
	u, _ := url.Parse(p.Server.URL)
	u.User = url.UserPassword(user, password)
	return u.String()
}

// Connects lists the CONNECT requests received so far.
func (p *Proxy) Connects() []Connect {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Connect(nil), p.connects...)
}

// Carried reports whether a target's peer address (its r.RemoteAddr) is one
// of this proxy's tunnels: the call came through this proxy.
func (p *Proxy) Carried(remoteAddr string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.upstream[remoteAddr]
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
		return
	}
	p.mu.Lock()
	p.connects = append(p.connects, Connect{Target: r.Host, Authorization: r.Header.Get("Proxy-Authorization")})
	p.mu.Unlock()
	if p.opts.Status != 0 {
		http.Error(w, "refused by the test proxy", p.opts.Status)
		return
	}
	if p.opts.User != "" {
		want := "Basic " + base64.StdEncoding.EncodeToString([]byte(p.opts.User+":"+p.opts.Password))
		if r.Header.Get("Proxy-Authorization") != want {
			w.Header().Set("Proxy-Authenticate", `Basic realm="test"`)
			http.Error(w, "proxy authentication required", http.StatusProxyAuthRequired)
			return
		}
	}
	ap, err := netip.ParseAddrPort(r.Host)
	if err != nil {
		// A name: resolve only loopback names, as the test never leaves the machine.
		host, port, _ := net.SplitHostPort(r.Host)
		if host != "localhost" {
			http.Error(w, "test proxy tunnels to loopback only", http.StatusBadGateway)
			return
		}
		ap = netip.MustParseAddrPort("127.0.0.1:" + port)
	}
	if !ap.Addr().Unmap().IsLoopback() {
		http.Error(w, "test proxy tunnels to loopback only", http.StatusBadGateway)
		return
	}
	up, err := net.DialTimeout("tcp", ap.String(), 2*time.Second)
	if err != nil {
		http.Error(w, "upstream unreachable", http.StatusBadGateway)
		return
	}
	p.mu.Lock()
	p.upstream[up.LocalAddr().String()] = true
	p.mu.Unlock()
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		return
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		conn.Close()
		up.Close()
		return
	}
	go func() {
		defer up.Close()
		if n := brw.Reader.Buffered(); n > 0 {
			b, _ := brw.Reader.Peek(n)
			if _, err := up.Write(b); err != nil {
				return
			}
		}
		_, _ = io.Copy(up, conn)
	}()
	go func() {
		defer conn.Close()
		_, _ = io.Copy(conn, up)
	}()
}
