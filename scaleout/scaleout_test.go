package scaleout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/flowtest"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keepalive"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/vault"
)

// binary is connectd, built once for all tests of the package.
var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// connectdBinary builds connectd once, or returns CONNECTD_SCALEOUT_BINARY
// when set: a binary built elsewhere, e.g. from an older commit, to see
// which of these tests it fails.
func connectdBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("CONNECTD_SCALEOUT_BINARY"); b != "" {
		return b
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "connectd-scaleout-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "connectd")
		out, err := exec.Command("go", "build", "-o", binary, "github.com/connectd/connectd/cmd/connectd").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary != "" {
		os.RemoveAll(filepath.Dir(binary))
	}
	os.Exit(code)
}

const resource = "https://files.mcp.example/"

// cluster is N connectd processes on one database behind a load balancer
// whose backend the test chooses per request. Every replica has the same
// public URL (the balancer's), session keys, vault keys, trusted issuer and
// provider catalog, as in production.
type cluster struct {
	t        *testing.T
	dbURL    string
	pool     *pgxpool.Pool
	idp      *devidp.Provider
	provider *providertest.Server // "fake"
	// providers are every fake provider by name, "fake" and those of
	// clusterOptions.providers.
	providers map[string]*providertest.Server
	lb        *httptest.Server
	env       []string
	replicas  []*replica

	// route picks the replica for a request through the balancer; nil:
	// round robin.
	route atomic.Pointer[func(*http.Request) int]
	next  atomic.Uint64

	clientKey string
	clientID  string
	hooks     *hookReceiver // the client's webhook endpoint
}

type replica struct {
	name     string
	addr     string // public listener, 127.0.0.1:port
	internal string
	cmd      *exec.Cmd
	logs     *bytes.Buffer
	mu       sync.Mutex
}

func (r *replica) url() string { return "http://" + r.addr }

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// serve starts an httptest server whose handler is made once its URL is
// known (issuers and providers need their own URL).
func serve(t *testing.T, make func(base string) http.Handler) *httptest.Server {
	t.Helper()
	var h http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	h = make(srv.URL)
	return srv
}

// clusterOptions adjust a cluster before its replicas start; the zero value
// is TestScaleOut's cluster.
type clusterOptions struct {
	// providers are fake providers besides "fake", by name, each served by
	// the test and registered for the cluster's client.
	providers map[string]providertest.Options
	// wrap, when set, stands between each provider and its requests: a
	// fault the test switches on and off.
	wrap func(name string, h http.Handler) http.Handler
	// env is set on every replica after the cluster's own variables, which
	// it overrides.
	env []string
}

func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	return newClusterWith(t, n, clusterOptions{})
}

func newClusterWith(t *testing.T, n int, opts clusterOptions) *cluster {
	t.Helper()
	c := &cluster{t: t, dbURL: pgtest.EmptyURL(t), providers: map[string]*providertest.Server{}} // replicas migrate it themselves
	bin := connectdBinary(t)

	// The load balancer: one public origin for every replica.
	c.lb = httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		i := int(c.next.Add(1) % uint64(len(c.replicas)))
		if f := c.route.Load(); f != nil {
			i = (*f)(pr.In)
		}
		target, _ := url.Parse(c.replicas[i].url())
		pr.SetURL(target)
		pr.Out.Host = pr.In.Host
		pr.SetXForwarded()
	}})
	t.Cleanup(c.lb.Close)

	const idpSecret = "scaleout-idp-secret"
	idpSrv := serve(t, func(base string) http.Handler {
		p, err := devidp.New(devidp.Config{Issuer: base, Clients: []devidp.Client{{ID: "connectd", Secret: idpSecret,
			RedirectURIs: []string{c.lb.URL + "/login/callback"}}}})
		if err != nil {
			t.Fatal(err)
		}
		c.idp = p
		return p.Handler()
	})
	provOpts := map[string]providertest.Options{"fake": {RequirePKCE: true, RotateRefreshTokens: true}}
	for name, o := range opts.providers {
		provOpts[name] = o
	}
	var (
		entries  []any
		names    []string
		provHost []string
	)
	for _, name := range slices.Sorted(maps.Keys(provOpts)) {
		o := provOpts[name]
		o.ClientSecret = "scaleout-provider-secret" // every provider's, in SCALEOUT_PROVIDER_SECRET
		o.RedirectURIs = []string{c.lb.URL + "/oauth/callback"}
		srv := serve(t, func(base string) http.Handler {
			p, h := providertest.NewHandler(base, o)
			c.providers[name] = p
			if opts.wrap != nil {
				h = opts.wrap(name, h)
			}
			return h
		})
		entry := c.providers[name].ProviderConfig(name, "SCALEOUT_PROVIDER_SECRET")
		entry["refresh_idle_lifetime"] = "48h" // the health job renews connections idle for a day
		entries, names = append(entries, entry), append(names, name)
		provHost = append(provHost, strings.TrimPrefix(srv.URL, "http://"))
	}
	c.provider = c.providers["fake"]
	providers, _ := json.Marshal(map[string]any{"providers": entries})
	provFile := filepath.Join(t.TempDir(), "providers.json")
	if err := os.WriteFile(provFile, providers, 0o600); err != nil {
		t.Fatal(err)
	}
	issuers, _ := json.Marshal([]map[string]any{{"id": "test", "issuer": c.idp.Issuer(), "login": true,
		"client_id": "connectd", "client_secret_env": "SCALEOUT_IDP_SECRET"}})
	vaultKey, err := keyring.GenerateKey(1)
	if err != nil {
		t.Fatal(err)
	}
	c.hooks = newHookReceiver(t)
	host := func(u string) string { return strings.TrimPrefix(u, "http://") }
	unlimited := "1000000/1s" // every request of the test comes from one address
	c.env = []string{
		"CONNECTD_DEV=true",
		"CONNECTD_DEV_IDP=false",
		"CONNECTD_DATABASE_URL=" + c.dbURL,
		"CONNECTD_AUTO_MIGRATE=true",
		"CONNECTD_PUBLIC_URL=" + c.lb.URL,
		"CONNECTD_SESSION_KEYS=" + session.NewKey().Encode(),
		"CONNECTD_VAULT_KEYS=" + vaultKey,
		"CONNECTD_ISSUERS=" + string(issuers),
		"SCALEOUT_IDP_SECRET=" + idpSecret,
		"CONNECTD_PROVIDERS_FILE=" + provFile,
		"SCALEOUT_PROVIDER_SECRET=scaleout-provider-secret",
		"CONNECTD_EGRESS_ALLOW_HOSTS=" + strings.Join(append(provHost, host(idpSrv.URL), host(c.hooks.srv.URL)), ","),
		// A job whose replica died is taken over after 3 s; retries come
		// after 1 s.
		"CONNECTD_JOBS_RESCUE_AFTER=3s", "CONNECTD_WEBHOOK_BACKOFF=1s,1s,1s,1s,1s",
		"CONNECTD_LOG_LEVEL=warn",
		"CONNECTD_LOG_FORMAT=text",
		"CONNECTD_DB_MAX_CONNS=4",
		"CONNECTD_SHUTDOWN_GRACE=1s",
		"CONNECTD_RATE_API=" + unlimited, "CONNECTD_RATE_API_PER_IP=" + unlimited,
		"CONNECTD_RATE_BROWSER=" + unlimited, "CONNECTD_RATE_LOGIN=" + unlimited, "CONNECTD_RATE_MINT=" + unlimited,
	}
	c.env = append(c.env, opts.env...)
	for i := range n {
		c.replicas = append(c.replicas, &replica{name: string(rune('A' + i)), addr: freeAddr(t), internal: freeAddr(t)})
	}
	// All start at once, each migrating the empty database at start-up.
	var wg sync.WaitGroup
	for _, r := range c.replicas {
		c.start(bin, r)
		wg.Go(func() { c.waitReady(r) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, r := range c.replicas {
			c.stop(r)
		}
		if t.Failed() {
			for _, r := range c.replicas {
				r.mu.Lock()
				t.Logf("replica %s log:\n%s", r.name, r.logs.String())
				r.mu.Unlock()
			}
		}
	})
	c.pool = pgtest.NewPool(t, c.dbURL)
	c.waitListening()
	clients := clientauth.NewClients(clientauth.ClientsConfig{Pool: c.pool})
	cl, key, err := clients.Create(context.Background(), "Files", []string{resource}, names)
	if err != nil {
		t.Fatal(err)
	}
	c.clientKey, c.clientID = key, cl.ID
	return c
}

// lockedWriter lets a process write its log while the test reads it.
type lockedWriter struct{ r *replica }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	return w.r.logs.Write(p)
}

func (c *cluster) start(bin string, r *replica) {
	c.t.Helper()
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(append(os.Environ(), c.env...), "CONNECTD_ADDR="+r.addr, "CONNECTD_INTERNAL_ADDR="+r.internal)
	if r.logs == nil {
		r.logs = &bytes.Buffer{}
	}
	cmd.Stdout, cmd.Stderr = lockedWriter{r}, lockedWriter{r}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	r.cmd = cmd
}

func (c *cluster) waitReady(r *replica) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(r.url() + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Errorf("replica %s not ready after 30s", r.name)
}

// waitListening waits until every replica's notification listener is up (its
// caches live, its long-polls wakeable).
func (c *cluster) waitListening() {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := c.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1`, cache.ListenerApplicationName).Scan(&n); err != nil {
			c.t.Fatal(err)
		}
		if n >= len(c.replicas) {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%d of %d replicas listening", n, len(c.replicas))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *cluster) stop(r *replica) {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-done
	}
	r.cmd = nil
}

// kill ends r with SIGKILL: no shutdown of any kind.
func (c *cluster) kill(r *replica) {
	c.t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	_ = r.cmd.Wait()
	r.cmd = nil
}

// restart starts r again on the same addresses.
func (c *cluster) restart(r *replica) {
	c.t.Helper()
	c.start(connectdBinary(c.t), r)
	c.waitReady(r)
	c.waitListening()
}

// pin routes every request through the balancer with f (nil: round robin).
func (c *cluster) pin(f func(*http.Request) int) {
	if f == nil {
		c.route.Store(nil)
		return
	}
	c.route.Store(&f)
}

// byPath sends /login* to replica b, /oauth/callback to replica cb and
// everything else to replica a.
func byPath(a, b, cb int) func(*http.Request) int {
	return func(r *http.Request) int {
		switch {
		case strings.HasPrefix(r.URL.Path, "/login"):
			return b
		case r.URL.Path == "/oauth/callback":
			return cb
		}
		return a
	}
}

// api makes a /v1 request as the MCP server for user at base (a replica or
// the balancer).
func (c *cluster) api(base, method, path, user string) (int, map[string]any) {
	c.t.Helper()
	tok, err := c.idp.AccessToken(user, resource)
	if err != nil {
		c.t.Fatal(err)
	}
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"provider":"fake","scopes":["files.read"]}`)
	}
	req, _ := http.NewRequest(method, base+path, body)
	req.Header.Set("Authorization", "Bearer "+c.clientKey)
	req.Header.Set(mcpauth.UserTokenHeader, tok)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		c.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

// mint creates an elicitation for user on replica r and returns its id and
// connect URL (the balancer's origin).
func (c *cluster) mint(r *replica, user string) (string, string) {
	c.t.Helper()
	st, out := c.api(r.url(), http.MethodPost, "/v1/elicitations", user)
	if st != http.StatusCreated {
		c.t.Fatalf("mint on %s: %d %v", r.name, st, out)
	}
	u := out["url"].(string)
	if !strings.HasPrefix(u, c.lb.URL+"/c/") {
		c.t.Fatalf("connect URL %s is not on the public origin %s", u, c.lb.URL)
	}
	return out["elicitation_id"].(string), u
}

func (c *cluster) token(r *replica, user string) (int, map[string]any) {
	c.t.Helper()
	return c.api(r.url(), http.MethodGet, "/v1/connections/fake/token", user)
}

func (c *cluster) browser() *flowtest.Browser {
	return flowtest.New(&http.Client{Timeout: 10 * time.Second})
}

// TestScaleOut runs three replicas that migrated one empty database
// together, then moves flows, long-polls, refreshes, revocations and a
// SIGKILL across them.
func TestScaleOut(t *testing.T) {
	c := newCluster(t, 3)
	A, B, C := c.replicas[0], c.replicas[1], c.replicas[2]
	ctx := context.Background()

	t.Run("concurrent migrations at start-up", func(t *testing.T) {
		// Every replica is ready (schema current); goose applied each
		// version exactly once.
		var versions, distinct int
		if err := c.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT version_id) FROM goose_db_version
			WHERE version_id > 0 AND is_applied`).Scan(&versions, &distinct); err != nil {
			t.Fatal(err)
		}
		if versions == 0 || versions != distinct {
			t.Fatalf("goose_db_version: %d applied rows, %d distinct versions", versions, distinct)
		}
	})

	t.Run("mint on A, log in on B, call back on C; long-poll on A wakes", func(t *testing.T) {
		id, u := c.mint(A, "alice")
		polled := make(chan map[string]any, 1)
		go func() {
			_, out := c.api(A.url(), http.MethodGet, "/v1/elicitations/"+id+"?wait=30s", "alice")
			polled <- out
		}()
		time.Sleep(50 * time.Millisecond) // the long-poll is waiting on A
		c.pin(byPath(0, 1, 2))
		defer c.pin(nil)
		exchanges := c.provider.Counts().Exchange
		if err := c.browser().Connect(u, "alice"); err != nil {
			t.Fatal(err)
		}
		done := time.Now()
		select {
		case out := <-polled:
			if out["status"] != "completed" {
				t.Fatalf("long-poll on A answered %v", out)
			}
			if d := time.Since(done); d > 5*time.Second {
				t.Fatalf("long-poll woke %s after completion", d)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the long-poll on A did not wake when the flow completed on C")
		}
		if n := c.provider.Counts().Exchange - exchanges; n != 1 {
			t.Fatalf("%d code exchanges, want 1", n)
		}
		// Each replica counted its part (/metrics on the operators' listener).
		c.waitMetric(B, `connectd_http_request_duration_seconds_count{code="303",route="GET /login/callback"}`, 1)
		c.waitMetric(C, `connectd_flows_total{outcome="completed"}`, 1)
		for _, r := range c.replicas {
			if st, out := c.token(r, "alice"); st != http.StatusOK || out["access_token"] == "" {
				t.Fatalf("token on %s: %d %v", r.name, st, out)
			}
		}
	})

	t.Run("refresh once across three replicas", func(t *testing.T) {
		// Replace alice's credential with one due for a refresh (60 s left,
		// inside the 2 min skew), from a rotating, reuse-detecting provider.
		store, err := vault.New(vault.Config{Pool: c.pool, Keyring: keyringOf(t, c.env)})
		if err != nil {
			t.Fatal(err)
		}
		tok := c.provider.Grant([]string{"files.read"}, time.Minute)
		alice := identity.User{Issuer: c.idp.Issuer(), Subject: "alice"}
		_, old, err := store.Get(ctx, alice, "fake", "")
		if err != nil {
			t.Fatal(err)
		}
		// The same provider account: the same connection, its credential replaced.
		if _, err := store.Put(ctx, alice, "fake", vault.Credential{AccessToken: tok.AccessToken,
			RefreshToken: tok.RefreshToken, TokenType: "Bearer", Expiry: tok.Expiry, Scopes: tok.Scopes,
			AccountID: old.AccountID}); err != nil {
			t.Fatal(err)
		}
		// The Put told every replica's cache: none holds a credential now.
		for _, r := range c.replicas {
			c.waitMetric(r, `connectd_cache_entries{cache="credential"}`, 0)
		}
		// Now 30 callers at once, spread over the three replicas, all find
		// the token due.
		refreshes := c.provider.Counts().Refresh
		const callers = 30
		got := make([]string, callers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range callers {
			wg.Go(func() {
				<-start
				st, out := c.token(c.replicas[i%3], "alice")
				if st != http.StatusOK {
					t.Errorf("caller %d on %s: %d %v", i, c.replicas[i%3].name, st, out)
					return
				}
				got[i], _ = out["access_token"].(string)
			})
		}
		close(start)
		wg.Wait()
		if n := c.provider.Counts().Refresh - refreshes; n != 1 {
			t.Fatalf("%d refresh requests reached the provider, want exactly 1", n)
		}
		for i, g := range got {
			if g == tok.AccessToken || g != got[0] {
				t.Fatalf("caller %d got %.10q, caller 0 %.10q (old %.10q)", i, g, got[0], tok.AccessToken)
			}
		}
		if c.provider.Revoked(tok.RefreshToken) {
			t.Fatal("the provider saw the rotated refresh token reused")
		}
	})

	t.Run("unlink on A: B and C answer not_connected within a second", func(t *testing.T) {
		for _, r := range []*replica{B, C} { // cached on both
			for range 2 {
				if st, _ := c.token(r, "alice"); st != http.StatusOK {
					t.Fatalf("token on %s: %d", r.name, st)
				}
			}
		}
		if st, out := c.api(A.url(), http.MethodDelete, "/v1/connections/fake", "alice"); st != http.StatusOK {
			t.Fatalf("unlink on A: %d %v", st, out)
		}
		deadline := time.Now().Add(time.Second)
		for _, r := range []*replica{B, C} {
			for {
				st, out := c.token(r, "alice")
				if st == http.StatusNotFound && out["error"] == "not_connected" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s still answers %d %v a second after the unlink", r.name, st, out)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	})

	t.Run("SIGKILL mid-flow loses no flow and no credential", func(t *testing.T) {
		// bob is connected before anything happens.
		_, u := c.mint(A, "bob")
		if err := c.browser().Connect(u, "bob"); err != nil {
			t.Fatal(err)
		}
		_, bobBefore := c.token(C, "bob")

		// alice: minted on A, signed in and consent page on B.
		id, u := c.mint(A, "alice")
		c.pin(func(*http.Request) int { return 1 }) // everything on B
		defer c.pin(nil)
		b := c.browser()
		r, err := b.Get(u)
		if err != nil || r.Status != http.StatusFound {
			t.Fatalf("open: %v %d", err, r.Status)
		}
		// Kill B while the browser holds a login in progress, then bring it
		// back: the login state lives in Postgres, the binding in a cookie.
		login, err := b.Get(r.Location)
		if err != nil || login.Status != http.StatusFound {
			t.Fatalf("login start: %v %d", err, login.Status)
		}
		c.kill(B)
		c.restart(B)
		if err := resumeLogin(b, login.Location, "alice"); err != nil {
			t.Fatal(err)
		}
		consent, err := b.Get(u)
		if err != nil || consent.Status != http.StatusOK {
			t.Fatalf("consent page after restart: %v %d %s", err, consent.Status, consent.Body)
		}
		// Allow on B, then kill B again while the browser is at the
		// provider: the OAuth state and PKCE verifier live in Postgres.
		form, ok := flowtest.AllowForm(consent.Body)
		if !ok {
			t.Fatalf("no consent form: %s", consent.Body)
		}
		redirect, err := b.Do(http.MethodPost, u, form)
		if err != nil || redirect.Status != http.StatusSeeOther {
			t.Fatalf("allow: %v %d %s", err, redirect.Status, redirect.Body)
		}
		c.kill(B)
		back, err := b.Get(redirect.Location)
		if err != nil || back.Status != http.StatusFound {
			t.Fatalf("provider: %v %d", err, back.Status)
		}
		c.restart(B)
		done, err := b.Follow(http.MethodGet, back.Location, nil) // to the link's success page
		if err != nil || done.Status != http.StatusOK || !strings.Contains(done.Body, "Connected") {
			t.Fatalf("callback after restart: %v %d %s", err, done.Status, done.Body)
		}
		c.pin(nil)
		if st, out := c.api(A.url(), http.MethodGet, "/v1/elicitations/"+id, "alice"); st != http.StatusOK || out["status"] != "completed" {
			t.Fatalf("elicitation on A: %d %v", st, out)
		}
		for _, r := range c.replicas {
			if st, out := c.token(r, "alice"); st != http.StatusOK {
				t.Fatalf("alice's token on %s: %d %v", r.name, st, out)
			}
			if st, out := c.token(r, "bob"); st != http.StatusOK || out["access_token"] != bobBefore["access_token"] {
				t.Fatalf("bob's token on %s: %d %v, before %v", r.name, st, out, bobBefore["access_token"])
			}
		}
	})

	t.Run("a webhook survives the replica killed while delivering it", func(t *testing.T) {
		// The receiver's loopback host:port is allow-listed, as the replicas'
		// CONNECTD_EGRESS_ALLOW_HOSTS does: registration refuses what delivery would.
		hooksURL, _ := url.Parse(c.hooks.srv.URL)
		wh, err := server.NewWebhooks(server.Config{Dev: true, Logger: slog.New(slog.DiscardHandler),
			Egress: server.EgressConfig{AllowHosts: []string{hooksURL.Host}}}, c.pool, keyringOf(t, c.env))
		if err != nil {
			t.Fatal(err)
		}
		_, secret, err := wh.Create(ctx, c.clientID, c.hooks.srv.URL+"/hooks", nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.hooks.wh, err = standardwebhooks.NewWebhook(secret); err != nil {
			t.Fatal(err)
		}
		// Only A runs now; bob's connection is unlinked through it, and A
		// starts delivering connection.revoked to the held receiver.
		c.stop(B)
		c.stop(C)
		c.pin(func(*http.Request) int { return 0 })
		defer c.pin(nil)
		c.hooks.hold()
		if st, out := c.api(A.url(), http.MethodDelete, "/v1/connections/fake", "bob"); st != http.StatusOK {
			t.Fatalf("unlink: %d %v", st, out)
		}
		c.hooks.waitFor(t, 20*time.Second, "A's delivery in flight", func() bool { return c.hooks.inFlight > 0 })
		c.kill(A)
		// Released only once the receiver has seen A go: released first, A's
		// held request would be recorded as delivered by a replica that died
		// before it could record it (and B's rescue would come later).
		c.hooks.waitFor(t, 20*time.Second, "A's delivery dropped", func() bool { return c.hooks.dropped > 0 })
		c.hooks.release()
		// B starts after A died: River's rescuer on B takes the job over.
		c.start(connectdBinary(t), B)
		c.waitReady(B)
		c.hooks.waitFor(t, 2*time.Minute, "the delivery by B", func() bool { return len(c.hooks.got) > 0 })
		c.hooks.mu.Lock()
		body, id, refused := c.hooks.got[0], c.hooks.ids[0], c.hooks.refused
		c.hooks.mu.Unlock()
		if refused != 0 || !strings.Contains(body, `"type":"connection.revoked"`) || !strings.Contains(body, `"subject":"bob"`) ||
			!strings.Contains(body, `"by":"client"`) {
			t.Fatalf("delivered %s (%d refused)", body, refused)
		}
		// B records the delivery once the receiver's answer is back: shortly
		// after the receiver has the body.
		var status string
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			err := c.pool.QueryRow(ctx, `SELECT status FROM webhook_deliveries WHERE id = $1`, id).Scan(&status)
			if err == nil && status == "delivered" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("delivery %s: %q %v", id, status, err)
			}
		}
		c.start(connectdBinary(t), A)
		c.start(connectdBinary(t), C)
		c.waitReady(A)
		c.waitReady(C)
	})

	t.Run("the health job marks a refused refresh once across three replicas", func(t *testing.T) {
		// alice's connection, stored two days ago (idle for the health job),
		// whose grant the provider no longer honours.
		twoDaysAgo := func() time.Time { return time.Now().Add(-48 * time.Hour) }
		store, err := vault.New(vault.Config{Pool: c.pool, Keyring: keyringOf(t, c.env), Now: twoDaysAgo})
		if err != nil {
			t.Fatal(err)
		}
		tok := c.provider.Grant([]string{"files.read"}, 72*time.Hour)
		alice := identity.User{Issuer: c.idp.Issuer(), Subject: "alice"}
		_, old, err := store.Get(ctx, alice, "fake", "")
		if err != nil {
			t.Fatal(err)
		}
		conn, err := store.Put(ctx, alice, "fake", vault.Credential{AccessToken: tok.AccessToken,
			RefreshToken: tok.RefreshToken, TokenType: "Bearer", Expiry: tok.Expiry, Scopes: tok.Scopes,
			AccountID: old.AccountID}) // her account: the connection the client is approved for
		if err != nil {
			t.Fatal(err)
		}
		revokeResp, err := http.PostForm(c.provider.RevocationURL(), url.Values{"token": {tok.RefreshToken},
			"client_id": {c.provider.ClientID}, "client_secret": {"scaleout-provider-secret"}})
		if err != nil {
			t.Fatal(err)
		}
		revokeResp.Body.Close()
		refreshes := c.provider.Counts().Refresh

		// Three runs of the job at once, one per replica's worker.
		rc, err := river.NewClient(riverpgxv5.New(c.pool), &river.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rc.InsertMany(ctx, []river.InsertManyParams{{Args: keepalive.Args{}}, {Args: keepalive.Args{}},
			{Args: keepalive.Args{}}}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			var done int
			if err := c.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'connection_health' AND state = 'completed'`).
				Scan(&done); err != nil {
				t.Fatal(err)
			}
			if done >= 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of 3 health jobs completed", done)
			}
			time.Sleep(100 * time.Millisecond)
		}
		var status, lastError string
		if err := c.pool.QueryRow(ctx, `SELECT status, last_error FROM connections WHERE id = $1`, conn.ID).
			Scan(&status, &lastError); err != nil || status != "reauthorization_required" || lastError != "invalid_grant" {
			t.Fatalf("connection after the health job: %q %q %v", status, lastError, err)
		}
		if n := c.provider.Counts().Refresh - refreshes; n != 1 {
			t.Fatalf("%d refreshes sent to the provider, want 1", n)
		}
		// Exactly one event, and one audit row, for the client approved for it.
		var events, audits int
		if err := c.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries
			WHERE event_type = 'connection.reauthorization_required' AND convert_from(payload, 'UTF8') LIKE '%' || $1 || '%'`,
			conn.ID).Scan(&events); err != nil {
			t.Fatal(err)
		}
		if err := c.pool.QueryRow(ctx, `SELECT count(*) FROM audit_events
			WHERE kind = 'connection.reauthorization_required' AND target = $1`, conn.ID).Scan(&audits); err != nil {
			t.Fatal(err)
		}
		if events != 1 || audits != 1 {
			t.Fatalf("%d webhook deliveries and %d audit rows for the refusal, want 1 and 1", events, audits)
		}
		c.hooks.waitFor(t, 30*time.Second, "the connection.reauthorization_required delivery", func() bool {
			for _, b := range c.hooks.got {
				if strings.Contains(b, `"type":"connection.reauthorization_required"`) && strings.Contains(b, conn.ID) {
					return true
				}
			}
			return false
		})
	})
}

// hookReceiver is the MCP server's webhook endpoint. While held, a request
// waits until it is released or its sender goes away; otherwise it is
// verified with the Standard Webhooks library and recorded.
type hookReceiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	wh       *standardwebhooks.Webhook
	held     chan struct{} // closed: released; nil: not held
	inFlight int
	dropped  int      // held requests whose sender went away
	got      []string // verified bodies
	ids      []string // their webhook-id
	refused  int
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		held := h.held
		h.inFlight++
		h.mu.Unlock()
		if held != nil {
			select {
			case <-held:
			case <-r.Context().Done(): // the sender died mid-delivery
				h.mu.Lock()
				h.dropped++
				h.mu.Unlock()
				return
			}
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.wh == nil || h.wh.Verify(body, r.Header) != nil {
			h.refused++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.got = append(h.got, string(body))
		h.ids = append(h.ids, r.Header.Get("webhook-id"))
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = make(chan struct{})
}

func (h *hookReceiver) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.held)
	h.held = nil
}

// waitFor polls cond (under the lock) until it holds or the time is up.
func (h *hookReceiver) waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		h.mu.Lock()
		ok := cond()
		h.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s in vain for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metric reads one sample from r's /metrics (operators' listener).
func (c *cluster) metric(r *replica, series string) (float64, bool) {
	c.t.Helper()
	resp, err := http.Get("http://" + r.internal + "/metrics")
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f, true
		}
	}
	return 0, false
}

// waitMetric waits up to a second for r's series to read want.
func (c *cluster) waitMetric(r *replica, series string, want float64) {
	c.t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		v, ok := c.metric(r, series)
		if ok && v == want {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s on %s: %v (present %v), want %v", series, r.name, v, ok, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// resumeLogin answers the IdP's picker at authorizeURL as user and follows
// the callback (the second half of a login whose first half happened
// before a replica was killed).
func resumeLogin(b *flowtest.Browser, authorizeURL, user string) error {
	if r, err := b.Get(authorizeURL); err != nil || r.Status != http.StatusOK {
		return fmt.Errorf("picker: %v %d", err, r.Status)
	}
	u, _ := url.Parse(authorizeURL)
	form := u.Query()
	form.Set("user", user)
	u.RawQuery = ""
	r, err := b.Do(http.MethodPost, u.String(), form)
	if err != nil || r.Status != http.StatusSeeOther {
		return fmt.Errorf("picker answer: %v %d", err, r.Status)
	}
	cb, err := b.Get(r.Location)
	if err != nil || cb.Status != http.StatusSeeOther {
		return fmt.Errorf("login callback: %v %d %s", err, cb.Status, cb.Body)
	}
	return nil
}

// keyringOf is the vault keyring the replicas run with.
func keyringOf(t *testing.T, env []string) *keyring.Keyring {
	t.Helper()
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "CONNECTD_VAULT_KEYS="); ok {
			k, err := keyring.Parse(v)
			if err != nil {
				t.Fatal(err)
			}
			return k
		}
	}
	t.Fatal("no CONNECTD_VAULT_KEYS")
	return nil
}
