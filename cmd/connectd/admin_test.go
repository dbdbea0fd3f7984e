package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/vault"
)

func TestAdminCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	keyLine := genKey(t, 1)
	withKeys := envOf(map[string]string{"CONNECTD_DATABASE_URL": dbURL, "CONNECTD_VAULT_KEYS": keyLine, "USER": "ops"})
	noKeys := envOf(map[string]string{"CONNECTD_DATABASE_URL": dbURL})
	adminRun := func(env func(string) string, args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"admin"}, args...), env, &out, io.Discard)
		return out.String(), err
	}

	// A linked account with a consent, as the connect flow leaves them.
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	keys, err := keyring.Parse(keyLine)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := vault.New(vault.Config{Pool: pool, Keyring: keys})
	if err != nil {
		t.Fatal(err)
	}
	user := identity.User{Issuer: "https://auth.example.com", Subject: "alice"}
	conn, err := vs.Put(ctx, user, "github", vault.Credential{AccessToken: "gho_SECRET_access_token_1234", RefreshToken: "ghr_SECRET_refresh_5678",
		Scopes: []string{"repo"}, AccountLabel: "octocat"})
	if err != nil {
		t.Fatal(err)
	}
	client, _, err := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool}).Create(ctx, "Acme tools",
		[]string{"https://mcp.acme.example/"}, []string{"github"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO consents (issuer, subject, client_id, provider, scopes, granted_at, updated_at, connection_id)
		VALUES ($1, $2, $3, 'github', '{repo}', now(), now(), $4)`, user.Issuer, user.Subject, client.ID, conn.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO audit_events (kind, actor) VALUES ('security.identity_mismatch', 'user')`); err != nil {
		t.Fatal(err)
	}
	secrets := []string{"gho_SECRET_access_token_1234", "ghr_SECRET_refresh_5678", keyLine}

	// Keys: created once, listed without the key, revoked.
	out, err := adminRun(noKeys, "keys", "create", "--name", "reports", "--expires", "30d")
	m := regexp.MustCompile(`(?m)^id: (akey_[a-z0-9]+)\nkey: (cka_[A-Za-z0-9_-]{43})\n$`).FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("keys create: %q %v", out, err)
	}
	secrets = append(secrets, m[2])
	if out, err = adminRun(noKeys, "keys", "list"); err != nil || !strings.Contains(out, m[1]) || !strings.Contains(out, "reports") ||
		!strings.Contains(out, "active") || strings.Contains(out, m[2][4:]) {
		t.Fatalf("keys list: %q %v", out, err)
	}

	var outputs []string
	check := func(env func(string) string, want []string, args ...string) {
		t.Helper()
		out, err := adminRun(env, args...)
		if err != nil {
			t.Fatalf("admin %v: %v\n%s", args, err, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Fatalf("admin %v lacks %q:\n%s", args, w, out)
			}
		}
		outputs = append(outputs, out)
	}
	check(noKeys, []string{conn.ID, "alice", "github", "active", "repo"}, "connections", "list")
	check(noKeys, []string{conn.ID}, "connections", "list", "--client", client.ID, "--user", "alice")
	check(withKeys, []string{conn.ID, "octocat", client.ID, "Acme tools", "repo"}, "connections", "show", conn.ID)
	check(noKeys, []string{"unknown: vault keys not configured"}, "connections", "show", conn.ID)
	check(noKeys, []string{"security.identity_mismatch", "1"}, "events")
	if out, _ := adminRun(noKeys, "connections", "list", "--provider", "slack"); strings.Contains(out, conn.ID) {
		t.Fatalf("provider filter: %s", out)
	}

	// Revoke: only with --yes, only with vault keys.
	if _, err := adminRun(withKeys, "connections", "revoke", conn.ID); exitCode(err) != 2 {
		t.Fatalf("revoke without --yes: %v", err)
	}
	if _, err := adminRun(noKeys, "connections", "revoke", conn.ID, "--yes"); exitCode(err) != 2 {
		t.Fatalf("revoke without vault keys: %v", err)
	}
	if _, _, err := vs.Get(ctx, user, "github", ""); err != nil {
		t.Fatal("a refused revoke deleted the connection")
	}
	check(withKeys, []string{"revoked " + conn.ID, "at the provider: not_supported", client.ID}, "connections", "revoke", conn.ID, "--yes")
	if _, _, err := vs.Get(ctx, user, "github", ""); err == nil {
		t.Fatal("the connection is still there")
	}
	var actor string
	if err := pool.QueryRow(ctx, `SELECT actor FROM audit_events WHERE kind = 'connection.revoked'`).Scan(&actor); err != nil || actor != "cli:ops" {
		t.Fatalf("revocation audit: %q %v", actor, err)
	}
	check(noKeys, []string{"connection.revoked", "consent.withdrawn", "admin.key_created"}, "events", "--all", "--window", "1h")
	if _, err := adminRun(noKeys, "connections", "show", conn.ID); exitCode(err) != 2 {
		t.Fatalf("show after revoke: %v", err)
	}
	if _, err := adminRun(noKeys, "keys", "revoke", m[1]); err != nil {
		t.Fatal(err)
	}
	if out, _ := adminRun(noKeys, "keys", "list"); !strings.Contains(out, "revoked") {
		t.Fatalf("keys list after revoke: %s", out)
	}
	for _, out := range outputs {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Fatalf("a secret reached the CLI output:\n%s", out)
			}
		}
	}

	for _, args := range [][]string{
		{},
		{"connections"},
		{"connections", "frobnicate"},
		{"connections", "show"},
		{"connections", "show", "cn_nope"},
		{"connections", "list", "--status", "bogus"},
		{"connections", "list", "--after", "garbage"},
		{"connections", "list", "--limit", "100000"},
		{"events", "--window", "forever"},
		{"events", "--kind", "x", "--all"},
		{"keys"},
		{"keys", "create"},
		{"keys", "create", "--name", "x", "--expires", "soon"},
		{"keys", "revoke", m[1]},
		{"keys", "revoke"},
	} {
		if _, err := adminRun(noKeys, args...); exitCode(err) != 2 {
			t.Errorf("admin %v: %v (exit %d), want a usage error", args, err, exitCode(err))
		}
	}
}

// devPublic is the host of start's CONNECTD_PUBLIC_URL: what redirects and
// the development IdP name, whichever instance serves them.
const devPublic = "127.0.0.1:8080"

// devBrowser is a browser of an instance that start runs with the development
// IdP (withDevIdP): it sends requests for devPublic to that instance (as a load balancer
// would), keeps its cookies by name and follows no redirect by itself.
type devBrowser struct {
	t       *testing.T
	client  *http.Client
	cookies map[string]string
}

func newDevBrowser(t *testing.T, in *instance) *devBrowser {
	actual := strings.TrimPrefix(in.base, "http://")
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == devPublic {
			addr = actual
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	t.Cleanup(transport.CloseIdleConnections)
	return &devBrowser{t: t, cookies: map[string]string{}, client: &http.Client{Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends a request to path (or an absolute URL) and returns the answer with
// its body read.
func (b *devBrowser) do(method, u string, form url.Values) (*http.Response, string) {
	b.t.Helper()
	if strings.HasPrefix(u, "/") {
		u = "http://" + devPublic + u
	}
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, u, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range b.cookies {
		req.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c.Value
		}
	}
	return resp, string(raw)
}

// signIn signs in at loginPath (/login or /admin/login) as user, picking
// the user at the development IdP (withDevIdP), and returns the callback's
// answer.
func (b *devBrowser) signIn(loginPath, user string) *http.Response {
	b.t.Helper()
	resp, _ := b.do("GET", loginPath, nil)
	u, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != 302 || err != nil || u.Path != "/authorize" || u.Host == devPublic {
		b.t.Fatalf("%s: %d %q", loginPath, resp.StatusCode, resp.Header.Get("Location"))
	}
	form := u.Query()
	form.Set("user", user)
	u.RawQuery = ""
	resp, _ = b.do("POST", u.String(), form)
	callback := resp.Header.Get("Location")
	if resp.StatusCode != 303 || !strings.HasPrefix(callback, "http://"+devPublic+loginPath+"/callback?") {
		b.t.Fatalf("picker answer: %d %q", resp.StatusCode, callback)
	}
	resp, _ = b.do("GET", callback, nil)
	return resp
}

// TestServeAdminSignIn runs connectd as main does with the development IdP
// as the admin issuer: alice (allow-listed) reaches the admin pages through a
// real sign-in, bob is refused, and the admin API takes a key from the CLI.
func TestServeAdminSignIn(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	in := start(t, withDevIdP(t, map[string]string{
		"CONNECTD_DATABASE_URL":   dbURL,
		"CONNECTD_ADMIN_ISSUER":   "dev",
		"CONNECTD_ADMIN_SUBJECTS": "alice",
	}))
	signIn := func(user string, wantCallback int) (*http.Response, map[string]string) {
		t.Helper()
		b := newDevBrowser(t, in)
		if resp := b.signIn("/admin/login", user); resp.StatusCode != wantCallback {
			t.Fatalf("admin login callback for %s: %d, want %d", user, resp.StatusCode, wantCallback)
		}
		page, _ := b.do("GET", "/admin/connections", nil)
		return page, b.cookies
	}
	if page, _ := signIn("alice", http.StatusSeeOther); page.StatusCode != http.StatusOK {
		t.Fatalf("alice on /admin/connections: %d\n%s", page.StatusCode, in.logs.String())
	}
	// bob, refused, has no admin session: the page sends him to sign in.
	if page, cookies := signIn("bob", http.StatusForbidden); page.StatusCode != http.StatusSeeOther ||
		!strings.Contains(page.Header.Get("Location"), "/admin/login?return_to=") || cookies["__Host-connectd_admin"] != "" {
		t.Fatalf("bob on /admin/connections: %d %s", page.StatusCode, page.Header.Get("Location"))
	}

	var out bytes.Buffer
	if err := run(context.Background(), []string{"admin", "keys", "create", "--name", "ci"},
		envOf(map[string]string{"CONNECTD_DATABASE_URL": dbURL}), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	key := regexp.MustCompile(`key: (\S+)`).FindStringSubmatch(out.String())[1]
	for _, tt := range []struct {
		authz string
		want  int
	}{{"Bearer " + key, http.StatusOK}, {"", http.StatusForbidden}, {"Bearer cka_nope", http.StatusForbidden}} {
		req, _ := http.NewRequest("GET", in.base+"/admin/api/clients", nil)
		if tt.authz != "" {
			req.Header.Set("Authorization", tt.authz)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("admin API with %q: %d, want %d", tt.authz, resp.StatusCode, tt.want)
		}
	}
	if strings.Contains(in.logs.String(), key) {
		t.Fatal("the admin key reached the log")
	}
}

// TestAdminEndSessions: `connectd admin sessions end` ends every browser
// session of one user (issuer, subject) — alice's two, not bob's, not
// alice's at another issuer, not "alice "'s — and audits it; without both
// --user and --issuer, or with a value that is not an identity connectd
// accepts, it ends nothing. --user "alice " is that user byte for byte,
// never alice.
func TestAdminEndSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	env := envOf(map[string]string{"CONNECTD_DATABASE_URL": dbURL, "USER": "ops"})
	adminRun := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"admin"}, args...), env, &out, io.Discard)
		return out.String(), err
	}
	pool := pgtest.NewPool(t, dbURL)
	sessions, err := session.New(session.Config{Pool: pool, Keys: []session.Key{session.NewKey()}})
	if err != nil {
		t.Fatal(err)
	}
	const issuer = "https://auth.example.com"
	signIn := func(issuer, subject string) *http.Request {
		t.Helper()
		w := httptest.NewRecorder()
		if _, err := sessions.Start(ctx, w, issuer, subject); err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		for _, c := range w.Result().Cookies() {
			r.AddCookie(c)
		}
		return r
	}
	alice1, alice2 := signIn(issuer, "alice"), signIn(issuer, "alice")
	bob, aliceElsewhere := signIn(issuer, "bob"), signIn("https://other.example.com", "alice")
	spaced := signIn(issuer, "alice ") // another user: identities are byte for byte

	for _, args := range [][]string{
		{"sessions", "end", "--user", "alice"},
		{"sessions", "end", "--issuer", issuer},
		{"sessions", "end", "--user", "alice", "--issuer", issuer, "extra"},
		{"sessions", "frobnicate"},
		{"sessions", "end", "--user", "", "--issuer", issuer},
		{"sessions", "end", "--user", "alice", "--issuer", ""},
		// Not identities connectd accepts (mcpauth.CheckSubject): refused,
		// never cleaned up into alice.
		{"sessions", "end", "--user", "alice\t", "--issuer", issuer},
		{"sessions", "end", "--user", "alice\n", "--issuer", issuer},
		{"sessions", "end", "--user", "alice", "--issuer", issuer + "\n"},
	} {
		if _, err := adminRun(args...); exitCode(err) != 2 {
			t.Errorf("admin %v: %v (exit %d), want a usage error", args, err, exitCode(err))
		}
	}
	for _, r := range []*http.Request{alice1, spaced} {
		if _, err := sessions.Get(r); err != nil {
			t.Fatalf("a refused command ended a session: %v", err)
		}
	}

	// "alice ": exactly hers, shown so that the space can be seen.
	out, err := adminRun("sessions", "end", "--user", "alice ", "--issuer", issuer)
	if err != nil || out != "ended 1 browser session(s) of \"alice \" at "+issuer+"\n" {
		t.Fatalf("sessions end of \"alice \": %q %v", out, err)
	}
	if _, err := sessions.Get(spaced); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("the session of \"alice \" survived: %v", err)
	}
	if _, err := sessions.Get(alice1); err != nil {
		t.Fatalf("ending \"alice \" signed alice out: %v", err)
	}

	out, err = adminRun("sessions", "end", "--user", "alice", "--issuer", issuer)
	if err != nil || !strings.Contains(out, "ended 2 browser session(s) of alice at "+issuer) {
		t.Fatalf("sessions end: %q %v", out, err)
	}
	for _, r := range []*http.Request{alice1, alice2} {
		if _, err := sessions.Get(r); !errors.Is(err, session.ErrNoSession) {
			t.Fatalf("alice's session survived: %v", err)
		}
	}
	for name, r := range map[string]*http.Request{"bob": bob, "alice at another issuer": aliceElsewhere} {
		if _, err := sessions.Get(r); err != nil {
			t.Fatalf("%s was signed out: %v", name, err)
		}
	}
	var actor, subject string
	var n int
	if err := pool.QueryRow(ctx, `SELECT actor, subject, (detail->>'sessions')::int FROM audit_events
		WHERE kind = 'sessions.ended' AND issuer = $1 ORDER BY id DESC LIMIT 1`, issuer).Scan(&actor, &subject, &n); err != nil ||
		actor != "cli:ops" || subject != "alice" || n != 2 {
		t.Fatalf("audit: %q %q %d %v", actor, subject, n, err)
	}
}

// TestServeSignInEndsTheCarriedSession is the copied-cookie attack on a
// shared browser, across two replicas run as main runs them (one database,
// one session keyring, each with its own notification listener and its 30 s
// cache of live sessions): alice signs in on the first, her cookie is copied
// into a browser that the load balancer sends to the second, which has
// answered "live" for it, and her browser signs in again — as bob, or as
// alice once more. The sign-in ends the session the browser's cookie carried,
// so the copy is refused on the first replica at once and on the second
// within a second, while the browser holds its new session. The same for the
// end users' /login and the admins' /admin/login.
func TestServeSignInEndsTheCarriedSession(t *testing.T) {
	t.Parallel()
	env := withDevIdP(t, map[string]string{
		"CONNECTD_DATABASE_URL":   pgtest.URL(t),
		"CONNECTD_ADMIN_ISSUER":   "dev",
		"CONNECTD_ADMIN_SUBJECTS": "alice,bob",
		"CONNECTD_SESSION_KEYS":   session.NewKey().Encode(),
	})
	one, two := start(t, env), start(t, env)
	for _, tc := range []struct {
		login, cookie string
		signedIn      func(*devBrowser) bool
	}{
		{"/login", session.CookieName, func(b *devBrowser) bool {
			resp, body := b.do("GET", "/session", nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("/session: %d", resp.StatusCode)
			}
			return !strings.Contains(body, "Not signed in")
		}},
		{"/admin/login", "__Host-connectd_admin", func(b *devBrowser) bool {
			resp, _ := b.do("GET", "/admin/clients", nil)
			return resp.StatusCode == http.StatusOK
		}},
	} {
		for _, next := range []string{"bob", "alice"} {
			t.Run(tc.login+" alice then "+next, func(t *testing.T) {
				b := newDevBrowser(t, one)
				if resp := b.signIn(tc.login, "alice"); resp.StatusCode != http.StatusSeeOther {
					t.Fatalf("alice's sign-in: %d", resp.StatusCode)
				}
				alices := b.cookies[tc.cookie]
				copyAt := func(in *instance, cookie string) *devBrowser {
					c := newDevBrowser(t, in)
					c.cookies[tc.cookie] = cookie
					return c
				}
				thief := copyAt(two, alices)
				for range 5 { // the second replica's cache holds "live" for it
					if !tc.signedIn(thief) {
						t.Fatal("the copied cookie does not work on the second replica before the sign-in")
					}
					time.Sleep(20 * time.Millisecond)
				}
				if resp := b.signIn(tc.login, next); resp.StatusCode != http.StatusSeeOther {
					t.Fatalf("the second sign-in as %s: %d", next, resp.StatusCode)
				}
				if tc.signedIn(copyAt(one, alices)) {
					t.Fatalf("alice's copied cookie still works on the replica where the browser signed in as %s", next)
				}
				for deadline := time.Now().Add(time.Second); tc.signedIn(thief); time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("alice's copied cookie still works on the second replica a second after the browser "+
							"signed in as %s", next)
					}
				}
				if b.cookies[tc.cookie] == alices || !tc.signedIn(b) || !tc.signedIn(copyAt(two, b.cookies[tc.cookie])) {
					t.Fatal("the browser kept its old cookie, or its new session does not sign it in")
				}
			})
		}
	}
}

// TestAdminListIsByteExact: `connectd admin connections list --user/--issuer`
// matches identities byte for byte: "alice " lists hers only, alice hers
// only, and a value connectd never accepts as an identity is refused (exit
// 2), not cleaned up into alice.
func TestAdminListIsByteExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	keyLine := genKey(t, 1)
	env := envOf(map[string]string{"CONNECTD_DATABASE_URL": dbURL})
	adminRun := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"admin"}, args...), env, &out, io.Discard)
		return out.String(), err
	}
	pool := pgtest.NewPool(t, dbURL)
	keys, err := keyring.Parse(keyLine)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := vault.New(vault.Config{Pool: pool, Keyring: keys})
	if err != nil {
		t.Fatal(err)
	}
	const issuer = "https://auth.example.com"
	ids := map[string]string{}
	for _, sub := range []string{"alice", "alice ", " alice"} {
		c, err := vs.Put(ctx, identity.User{Issuer: issuer, Subject: sub}, "github", vault.Credential{AccessToken: "at"})
		if err != nil {
			t.Fatal(err)
		}
		ids[sub] = c.ID
	}
	for sub, id := range ids {
		out, err := adminRun("connections", "list", "--user", sub, "--issuer", issuer)
		if err != nil || !strings.Contains(out, id) {
			t.Fatalf("list --user %q: %v\n%s", sub, err, out)
		}
		for other, otherID := range ids {
			if other != sub && strings.Contains(out, otherID) {
				t.Fatalf("list --user %q lists the connection of %q:\n%s", sub, other, out)
			}
		}
	}
	for _, args := range [][]string{
		{"--user", "alice\t"},
		{"--user", "alice\x00"},
		{"--user", "alice\xff"},
		{"--issuer", issuer + "\n"},
	} {
		if out, err := adminRun(append([]string{"connections", "list"}, args...)...); exitCode(err) != 2 {
			t.Errorf("list %q: %v (exit %d), want a usage error\n%s", args, err, exitCode(err), out)
		}
	}
}
