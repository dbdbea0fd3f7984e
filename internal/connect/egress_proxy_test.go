package connect_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/egress/egresstest"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/server"
)

// hookRecorder is a webhook endpoint over TLS that counts deliveries.
type hookRecorder struct {
	srv *httptest.Server
	mu  sync.Mutex
	n   int
}

func newHookRecorder(t *testing.T) *hookRecorder {
	h := &hookRecorder{}
	h.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		h.n++
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookRecorder) count() int { h.mu.Lock(); defer h.mu.Unlock(); return h.n }

// loopbackHostsOf lists the host:port of every fake server c names (IdPs,
// providers) and extra, for the egress allow-list: the tests' servers are on
// loopback, which the guard refuses otherwise.
func loopbackHostsOf(c *server.Config, extra ...string) []string {
	var b strings.Builder
	for _, is := range c.Identity.Issuers {
		b.WriteString(is.URL + " ")
	}
	for _, s := range c.Vault.Providers.Providers {
		fmt.Fprintf(&b, "%s %s %s %s %s ", s.Issuer, s.AuthorizeURL, s.TokenURL, s.RevocationURL, s.APIBaseURL)
	}
	b.WriteString(strings.Join(extra, " "))
	seen := map[string]bool{}
	var out []string
	for _, hp := range regexp.MustCompile(`127\.0\.0\.1:\d+`).FindAllString(b.String(), -1) {
		if !seen[hp] {
			seen[hp] = true
			out = append(out, hp)
		}
	}
	return out
}

// proxiedCall makes m's proxied GET of path for user at base.
func proxiedCall(t *testing.T, m *mcpServer, base, path, user string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/proxy/fake/"+path, nil)
	req.Header.Set("Authorization", "Bearer "+m.key)
	req.Header.Set(mcpauth.UserTokenHeader, m.token(user))
	resp, err := m.e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// TestEgressProxyEveryClass (issue 37, provider tokens that work only from
// connectd): with an egress proxy per class of outbound call, each class
// leaves through its own — the code exchange through the token proxy, the
// refresh through the (https) refresh proxy, the API call through the api
// proxy, the revocation through the revoke proxy, webhook deliveries
// through the webhooks proxy, discovery through the all-class proxy — every
// CONNECT naming the fake provider's checked address and carrying the
// proxy's credential, which the provider never sees. A proxy that refuses
// the tunnel (407) makes the API call 503 provider_unavailable, and the
// credential is in no answer and no log line.
func TestEgressProxyEveryClass(t *testing.T) {
	t.Parallel()
	const user, pw = "connectd", "proxy-s3cret-pw"
	wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
	opts := egresstest.Options{User: user, Password: pw}
	all, token, revoke, api, hooks := egresstest.New(t, opts), egresstest.New(t, opts), egresstest.New(t, opts),
		egresstest.New(t, opts), egresstest.New(t, opts)
	refresh := egresstest.New(t, egresstest.Options{TLS: true, User: user, Password: pw})
	rec := newHookRecorder(t)
	pool := x509.NewCertPool()
	pool.AddCert(rec.srv.Certificate()) // httptest's one certificate: every fake's and the https proxy's
	proxyOf := func(p *egresstest.Proxy) *egress.Proxy {
		px, err := egress.ParseProxy(p.URLWithCredential(user, pw))
		if err != nil {
			t.Fatal(err)
		}
		return px
	}
	proxies := egress.Proxies{Default: proxyOf(all), Class: map[egress.Class]*egress.Proxy{
		egress.ClassToken: proxyOf(token), egress.ClassRefresh: proxyOf(refresh), egress.ClassRevoke: proxyOf(revoke),
		egress.ClassAPI: proxyOf(api), egress.ClassWebhooks: proxyOf(hooks)}}
	e := newEnv(t, envOptions{config: func(c *server.Config) {
		c.HTTPClient = nil // the egress client itself, as in production
		c.Egress.RootCAs = pool
		c.Egress.AllowHosts = loopbackHostsOf(c, rec.srv.URL)
		c.Egress.Proxies = proxies
	}})
	e.run(e.server) // River delivers webhooks
	fakeAddr := strings.TrimPrefix(e.fake.URL(), "https://")
	tunnelled := func(p *egresstest.Proxy, target string) int {
		n := 0
		for _, c := range p.Connects() {
			if c.Authorization != wantAuth {
				t.Fatalf("a CONNECT carried %q", c.Authorization)
			}
			if c.Target == target {
				n++
			}
		}
		return n
	}
	a := e.newMCPServer("alpha", "fake")
	if _, _, err := e.server.Webhooks().Create(context.Background(), a.client.ID, rec.srv.URL+"/hooks", nil); err != nil {
		t.Fatal(err)
	}
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	if tunnelled(token, fakeAddr) == 0 || e.fake.Counts().Exchange != 1 {
		t.Fatalf("the code exchange did not go through the token proxy: %+v", token.Connects())
	}
	// Signing alice in at the IdP (discovery, JWKS, its token endpoint):
	// the identity client's calls, which take the all-class proxy.
	if tunnelled(all, strings.TrimPrefix(e.idps[0].srv.URL, "https://")) == 0 {
		t.Fatalf("the IdP calls did not go through the all-class proxy: %+v", all.Connects())
	}

	if st, body := proxiedCall(t, a, e.srv.URL, "files", "alice"); st != http.StatusOK {
		t.Fatalf("proxied: %d %s", st, body)
	}
	if tunnelled(api, fakeAddr) == 0 {
		t.Fatalf("the API call did not go through the api proxy: %+v", api.Connects())
	}

	e.clock.Advance(59*time.Minute + 30*time.Second) // within the vault's refresh skew
	refreshes := e.fake.Counts().Refresh
	tokenOf(t, a, "alice")
	if e.fake.Counts().Refresh != refreshes+1 || tunnelled(refresh, fakeAddr) == 0 {
		t.Fatalf("the refresh did not go through the refresh proxy: %d refreshes, %+v", e.fake.Counts().Refresh-refreshes, refresh.Connects())
	}

	deadline := time.Now().Add(20 * time.Second)
	for rec.count() == 0 || len(hooks.Connects()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no webhook delivered through the webhooks proxy (%d delivered, %+v)", rec.count(), hooks.Connects())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if tunnelled(hooks, strings.TrimPrefix(rec.srv.URL, "https://")) == 0 {
		t.Fatalf("webhook CONNECTs %+v", hooks.Connects())
	}

	if st, out := a.call(http.MethodDelete, "/v1/connections/fake", "alice", nil); st != http.StatusOK {
		t.Fatalf("unlink: %d %v", st, out)
	}
	for len(e.fake.Revocations()) == 0 {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatal("no revocation at the provider")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if tunnelled(revoke, fakeAddr) == 0 {
		t.Fatalf("the revocation did not go through the revoke proxy: %+v", revoke.Connects())
	}
	if n := tunnelled(hooks, fakeAddr); n != 0 {
		t.Errorf("the webhooks proxy tunnelled %d calls to the provider", n)
	}
	for _, r := range e.fake.APIRequests() {
		if v := r.Header.Get("Proxy-Authorization"); v != "" {
			t.Fatalf("the provider saw Proxy-Authorization %q", v)
		}
	}

	// A replica whose API proxy refuses the credential (407): the call is
	// 503 provider_unavailable, and the credential is nowhere.
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	refusing := egresstest.New(t, egresstest.Options{User: "someone", Password: "else"})
	cfg := e.cfg
	cfg.Egress.Proxies = egress.Proxies{Default: proxyOf(all), Class: map[egress.Class]*egress.Proxy{egress.ClassAPI: proxyOf(refusing)}}
	_, base := e.replica(cfg)
	st, body := proxiedCall(t, a, base, "files", "alice")
	if st != http.StatusServiceUnavailable || !strings.Contains(body, `"provider_unavailable"`) {
		t.Fatalf("through a refusing proxy: %d %s", st, body)
	}
	if len(refusing.Connects()) != 1 {
		t.Fatalf("the refusing proxy saw %+v", refusing.Connects())
	}
	if logs := e.logs.String(); !strings.Contains(logs, "egress proxy did not open a tunnel: "+refusing.URL()+": CONNECT answered HTTP 407") {
		t.Fatal("no log line names the refusing proxy and its 407")
	}
	for _, secret := range []string{pw, base64.StdEncoding.EncodeToString([]byte(user + ":" + pw))} {
		if strings.Contains(body, secret) || strings.Contains(e.logs.String(), secret) {
			t.Fatal("the proxy credential is in an answer or a log line")
		}
	}
}
