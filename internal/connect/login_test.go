package connect_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/session"
)

func TestLoginFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	b := e.browser()
	ctx := context.Background()

	r := b.get(e.srv.URL + "/login?issuer=idp0&return_to=" + url.QueryEscape("/c/abc?x=1"))
	if r.status != http.StatusFound || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("/login: %d %v", r.status, r.header)
	}
	if r.setCookie(session.BindingCookieName) == "" {
		t.Fatal("/login set no state-binding cookie")
	}
	authz, _ := url.Parse(r.location)
	q := authz.Query()
	if authz.Scheme+"://"+authz.Host != e.idps[0].srv.URL || authz.Path != "/authorize" {
		t.Fatalf("redirected to %s", r.location)
	}
	for k, want := range map[string]string{"response_type": "code", "client_id": "connectd",
		"redirect_uri": e.srv.URL + "/login/callback", "code_challenge_method": "S256", "scope": "openid"} {
		if q.Get(k) != want {
			t.Errorf("%s = %q, want %q", k, q.Get(k), want)
		}
	}
	state := q.Get("state")
	if len(state) < 43 || len(q.Get("nonce")) < 43 || len(q.Get("code_challenge")) != 43 {
		t.Fatalf("state %d, nonce %d, challenge %d characters", len(state), len(q.Get("nonce")), len(q.Get("code_challenge")))
	}
	// The database knows the state only by its hash, and nothing about PKCE.
	var dump string
	var hash []byte
	if err := e.pool.QueryRow(ctx, `SELECT row_to_json(s)::text, state_hash FROM login_states s`).Scan(&dump, &hash); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte(state)); string(hash) != string(sum[:]) {
		t.Fatal("login_states does not key the state by its SHA-256")
	}
	for _, secret := range []string{state, q.Get("nonce"), q.Get("code_challenge")} {
		if strings.Contains(dump, secret) {
			t.Fatal("a login secret is stored in clear")
		}
	}

	cb := b.get(e.pick(b, r.location, "alice"))
	if cb.status != http.StatusSeeOther || cb.location != e.srv.URL+"/c/abc?x=1" {
		t.Fatalf("callback: %d %q %s", cb.status, cb.location, cb.body)
	}
	sess, err := e.session(b)
	if err != nil || sess.Subject != "alice" || sess.Issuer != e.idps[0].Issuer() {
		t.Fatalf("session %+v %v", sess, err)
	}
	page := b.get(e.srv.URL + "/session")
	if page.status != 200 || !strings.Contains(page.body, "alice") || !strings.Contains(page.body, `name="csrf_token"`) {
		t.Fatalf("/session: %d %s", page.status, page.body)
	}
	var left int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM login_states`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d login states left after the callback", left)
	}
	for _, secret := range []string{state, cb.location} {
		if strings.Contains(e.logs.String(), secret) && secret != "" {
			t.Fatal("a login secret reached the log")
		}
	}
}

// TestCookieAttributesOnTheWire asserts the raw Set-Cookie headers connectd
// sends during login and logout.
func TestCookieAttributesOnTheWire(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	b := e.browser()
	attrs := func(raw string) []string {
		parts := strings.Split(raw, "; ")
		a := slices.Clone(parts[1:])
		slices.Sort(a)
		return a
	}
	start := b.get(e.srv.URL + "/login?issuer=idp0")
	cb := b.get(e.pick(b, start.location, "alice"))
	page := b.get(e.srv.URL + "/session")
	csrf := between(page.body, `name="csrf_token" value="`, `"`)
	out := b.do(http.MethodPost, e.srv.URL+"/logout", url.Values{"csrf_token": {csrf}})
	tests := []struct {
		name, raw string
		want      []string
	}{
		{"binding", start.setCookie(session.BindingCookieName), []string{"HttpOnly", "Max-Age=600", "Path=/", "SameSite=Lax", "Secure"}},
		{"session", cb.setCookie(session.CookieName), []string{"HttpOnly", "Max-Age=43200", "Path=/", "SameSite=Lax", "Secure"}},
		{"logout", out.setCookie(session.CookieName), []string{"HttpOnly", "Max-Age=0", "Path=/", "SameSite=Lax", "Secure"}},
	}
	for _, tt := range tests {
		if !strings.HasPrefix(tt.raw, "__Host-") {
			t.Fatalf("%s: %q", tt.name, tt.raw)
		}
		if got := attrs(tt.raw); !slices.Equal(got, tt.want) {
			t.Errorf("%s: attributes %v, want exactly %v", tt.name, got, tt.want)
		}
	}
}

func between(s, from, to string) string {
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, to)
	return v
}

// TestLoginStateRefusals: every way of presenting a state other than "the one
// this browser was just given, once" is refused.
func TestLoginStateRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})

	t.Run("replayed state", func(t *testing.T) {
		t.Parallel()
		b := e.browser()
		cbURL := e.pick(b, e.startLogin(b, "issuer=idp0"), "alice")
		if r := b.get(cbURL); r.status != http.StatusSeeOther {
			t.Fatalf("first use: %d", r.status)
		}
		delete(b.Cookies, session.CookieName)
		e.refused(b.get(cbURL), 400, "invalid_state")
	})
	t.Run("missing state", func(t *testing.T) {
		t.Parallel()
		b := e.browser()
		cbURL, _ := url.Parse(e.pick(b, e.startLogin(b, "issuer=idp0"), "alice"))
		q := cbURL.Query()
		q.Del("state")
		cbURL.RawQuery = q.Encode()
		e.refused(b.get(cbURL.String()), 400, "invalid_state")
	})
	t.Run("unknown state", func(t *testing.T) {
		t.Parallel()
		b := e.browser()
		cbURL, _ := url.Parse(e.pick(b, e.startLogin(b, "issuer=idp0"), "alice"))
		q := cbURL.Query()
		q.Set("state", flipFirst(q.Get("state"))) // well-formed, never issued
		cbURL.RawQuery = q.Encode()
		e.refused(b.get(cbURL.String()), 400, "invalid_state")
	})
	t.Run("state from another browser without a binding cookie", func(t *testing.T) {
		t.Parallel()
		victim := e.browser()
		cbURL := e.pick(victim, e.startLogin(victim, "issuer=idp0"), "alice")
		e.refused(e.browser().get(cbURL), 400, "state_mismatch")
	})
	t.Run("state from another browser with its own binding (login CSRF)", func(t *testing.T) {
		t.Parallel()
		attacker, victim := e.browser(), e.browser()
		attackerCallback := e.pick(attacker, e.startLogin(attacker, "issuer=idp0"), "bob")
		e.startLogin(victim, "issuer=idp0") // the victim has a binding cookie of its own
		e.refused(victim.get(attackerCallback), 400, "state_mismatch")
		if _, err := e.session(victim); err == nil {
			t.Fatal("the victim was signed in as the attacker")
		}
	})
	t.Run("issuer cancels", func(t *testing.T) {
		t.Parallel()
		b := e.browser()
		cbURL := e.pick(b, e.startLogin(b, "issuer=idp0"), "")
		e.refused(b.get(cbURL), 403, "login_denied")
		e.refused(b.get(cbURL), 400, "invalid_state") // the state was spent
	})
	t.Run("RFC 9207 iss of another issuer", func(t *testing.T) {
		t.Parallel()
		b := e.browser()
		cbURL, _ := url.Parse(e.pick(b, e.startLogin(b, "issuer=idp0"), "alice"))
		q := cbURL.Query()
		q.Set("iss", "https://evil.example")
		cbURL.RawQuery = q.Encode()
		e.refused(b.get(cbURL.String()), 400, "issuer_mismatch")
	})
	t.Run("RFC 9207 iss missing where the issuer sends it", func(t *testing.T) {
		t.Parallel()
		b := e.browser()
		cbURL, _ := url.Parse(e.pick(b, e.startLogin(b, "issuer=idp0"), "alice"))
		q := cbURL.Query()
		q.Del("iss")
		cbURL.RawQuery = q.Encode()
		e.refused(b.get(cbURL.String()), 400, "issuer_mismatch")
	})
	t.Run("code of another login", func(t *testing.T) {
		t.Parallel()
		b := e.browser()
		first, _ := url.Parse(e.pick(b, e.startLogin(b, "issuer=idp0"), "alice"))
		second, _ := url.Parse(e.pick(b, e.startLogin(b, "issuer=idp0"), "bob"))
		q := first.Query()
		q.Set("code", second.Query().Get("code")) // bound to the other login's PKCE challenge
		first.RawQuery = q.Encode()
		e.refused(b.get(first.String()), 400, "login_failed")
	})
	t.Run("unknown issuer", func(t *testing.T) {
		t.Parallel()
		e.refused(e.browser().get(e.srv.URL+"/login?issuer=nope"), 400, "unknown_issuer")
	})
}

func TestLoginStateExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	b := e.browser()
	authz := e.startLogin(b, "issuer=idp0")
	e.clock.Advance(10*time.Minute + time.Second)
	e.refused(b.get(e.pick(b, authz, "alice")), 400, "invalid_state")
}

// TestLoginIDTokenRefusals plays an issuer whose ID token is wrong in one
// way each; connectd must refuse to sign the browser in.
func TestLoginIDTokenRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		mod  func(jwt.MapClaims)
	}{
		{"wrong nonce", func(c jwt.MapClaims) { c["nonce"] = "attacker-chosen" }},
		{"no nonce", func(c jwt.MapClaims) { delete(c, "nonce") }},
		{"for another audience", func(c jwt.MapClaims) { c["aud"], c["azp"] = "another-client", "another-client" }},
		{"several audiences, azp another client", func(c jwt.MapClaims) {
			c["aud"], c["azp"] = []string{"connectd", "another-client"}, "another-client"
		}},
		{"another issuer", func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }},
		{"expired", func(c jwt.MapClaims) {
			c["iat"], c["exp"] = time.Now().Add(-time.Hour).Unix(), time.Now().Add(-30*time.Minute).Unix()
		}},
		{"no sub", func(c jwt.MapClaims) { delete(c, "sub") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{idTokenClaims: tt.mod})
			e.refused(e.login(e.browser(), "alice", ""), 400, "invalid_id_token")
		})
	}
}

// TestSessionCookieRefusals: a session cookie that was tampered with, or that
// only a retired key can open, signs nobody in.
func TestSessionCookieRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	b := e.browser()
	e.login(b, "alice", "")
	good := b.Cookies[session.CookieName]
	signedIn := func(base string, cookie string) bool {
		t.Helper()
		c := e.browser()
		c.Cookies[session.CookieName] = cookie
		r := c.get(base + "/session")
		if r.status != 200 {
			t.Fatalf("/session: %d", r.status)
		}
		return strings.Contains(r.body, "Signed in")
	}
	if !signedIn(e.srv.URL, good) {
		t.Fatal("the genuine cookie does not sign in")
	}
	tampered := []byte(good)
	tampered[len(tampered)/2] ^= 0x01
	if signedIn(e.srv.URL, string(tampered)) {
		t.Fatal("a tampered cookie signs in")
	}
	if !signedIn(e.withKeys(session.NewKey(), e.keys[0]), good) {
		t.Fatal("during rotation the previous key must still be read")
	}
	if signedIn(e.withKeys(session.NewKey()), good) {
		t.Fatal("a cookie signed by a rotated-out key signs in")
	}
}

// TestSessionFixation: a session cookie present before login (planted by an
// attacker, or left by another user) is replaced by a new session id, and the
// session it carried ends on the server (issue 23 N3): no copy of the planted
// cookie — the attacker's own — goes on working.
func TestSessionFixation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	attacker := e.browser()
	e.login(attacker, "bob", "")
	planted, err := e.session(attacker)
	if err != nil {
		t.Fatal(err)
	}
	victim := e.browser()
	victim.Cookies[session.CookieName] = attacker.Cookies[session.CookieName]
	if r := e.login(victim, "alice", ""); r.setCookie(session.CookieName) == "" {
		t.Fatal("login did not issue a new session cookie")
	}
	got, err := e.session(victim)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID == planted.ID || got.Subject != "alice" {
		t.Fatalf("after login: id reused %v, subject %q", got.ID == planted.ID, got.Subject)
	}
	if _, err := e.session(attacker); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("the planted session outlived the login: %v", err)
	}
}

// TestOpenRedirect: return_to must be a plain path on this site; every
// other shape is refused before the browser is sent anywhere.
func TestOpenRedirect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	shapes := []string{
		"//evil.example",
		"///evil.example",
		`/\evil.example`,
		`\\evil.example`,
		`/\/evil.example`,
		"https:evil.example",
		"https://evil.example",
		"javascript:alert(1)",
		"evil.example/path",
		"/%2F%2Fevil.example",
		"%2F%2Fevil.example",
		"/%2fevil.example",
		"/%5Cevil.example",
		"/%5cevil.example",
		"/%09/evil.example",
		"/%0d%0aSet-Cookie:%20x=y",
		"/%20/evil.example",
		"/%252F%252Fevil.example",
		"/%2e%2e/evil",
		"/a/../../evil",
		"/\t/evil.example",
		"/ /evil.example",
		"/\x00evil",
		"/path#@evil.example",
		"/%zz",
		"/%",
		"/é",
		"/" + strings.Repeat("a", 2000),
	}
	for _, s := range shapes {
		t.Run(s, func(t *testing.T) {
			t.Parallel()
			r := e.browser().get(e.srv.URL + "/login?issuer=idp0&return_to=" + url.QueryEscape(s))
			code := "invalid_return_to"
			if strings.ContainsFunc(s, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
				code = "invalid_request" // a control character: refused before routing (web.TextOnly)
			}
			if r.status != 400 || e.code(r) != code || r.location != "" {
				t.Errorf("got %d %q (location %q), want 400 %q: %s", r.status, e.code(r), r.location, code, r.body)
			}
		})
	}
}

// TestReturnToRecheckedAtCallback: a stored return_to that is not a plain path
// (as if the database or an older release let one through) is not followed.
func TestReturnToRecheckedAtCallback(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	b := e.browser()
	e.startLogin(b, "issuer=idp0") // gives the browser its binding cookie
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.AddCookie(&http.Cookie{Name: session.BindingCookieName, Value: b.Cookies[session.BindingCookieName]})
	binding, err := e.sessions.ReadBinding(r)
	if err != nil {
		t.Fatal(err)
	}
	authz, err := e.rp.Start(context.Background(), "idp0", "//evil.example", binding, false)
	if err != nil {
		t.Fatal(err)
	}
	cb := b.get(e.pick(b, authz, "alice"))
	if cb.status != http.StatusSeeOther || cb.location != e.srv.URL+"/session" {
		t.Fatalf("callback redirected to %q", cb.location)
	}
}

func TestLogout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	b := e.browser()
	e.login(b, "alice", "")
	page := b.get(e.srv.URL + "/session")
	csrf := between(page.body, `name="csrf_token" value="`, `"`)
	if csrf == "" {
		t.Fatalf("no CSRF token on the page: %s", page.body)
	}
	other := e.browser()
	e.login(other, "bob", "")
	otherCSRF := between(other.get(e.srv.URL+"/session").body, `name="csrf_token" value="`, `"`)

	for name, form := range map[string]url.Values{
		"no token":                {},
		"wrong token":             {"csrf_token": {flipFirst(csrf)}},
		"another session's token": {"csrf_token": {otherCSRF}},
	} {
		r := b.do(http.MethodPost, e.srv.URL+"/logout", form)
		if r.status != http.StatusForbidden || e.code(r) != "csrf_failed" || r.setCookie(session.CookieName) != "" {
			t.Fatalf("%s: %d %q", name, r.status, e.code(r))
		}
	}
	if _, err := e.session(b); err != nil {
		t.Fatal("a refused logout ended the session")
	}
	r := b.do(http.MethodPost, e.srv.URL+"/logout", url.Values{"csrf_token": {csrf}})
	if r.status != 200 || r.setCookie(session.CookieName) == "" {
		t.Fatalf("logout: %d", r.status)
	}
	if _, err := e.session(b); err == nil {
		t.Fatal("still signed in after logout")
	}
	if page := b.get(e.srv.URL + "/session"); !strings.Contains(page.body, "Not signed in") {
		t.Fatal("/session still shows a user")
	}
}

func TestMultipleIssuers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{issuers: 2})
	// With two issuers the caller must pick one.
	e.refused(e.browser().get(e.srv.URL+"/login"), 400, "unknown_issuer")
	for _, pick := range []string{"idp1", e.idps[1].Issuer()} {
		b := e.browser()
		authz := e.startLogin(b, url.Values{"issuer": {pick}}.Encode())
		if !strings.HasPrefix(authz, e.idps[1].Issuer()+"/") {
			t.Fatalf("issuer=%s went to %s", pick, authz)
		}
		b.get(e.pick(b, authz, "bob"))
		if s, err := e.session(b); err != nil || s.Issuer != e.idps[1].Issuer() || s.Subject != "bob" {
			t.Fatalf("session %+v %v", s, err)
		}
	}
	page := e.browser().get(e.srv.URL + "/session")
	if !strings.Contains(page.body, "/login?issuer=idp0") || !strings.Contains(page.body, "/login?issuer=idp1") {
		t.Fatalf("sign-in links missing: %s", page.body)
	}
}

// flipFirst changes the first character of s (to another base64url one).
func flipFirst(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}

// sessionReplica is a second connectd on the same database, on a pool of its
// own, whose session store caches "this session is live" for an hour and is
// kept fresh by the replica's own listener, as in production. It returns the
// replica's base URL and its session store.
func (e *env) sessionReplica() (string, *session.Store) {
	e.t.Helper()
	pool, err := pgxpool.New(context.Background(), e.pool.Config().ConnString())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(pool.Close)
	cfg := e.cfg
	cfg.Pool, cfg.Logger = pool, slog.New(slog.DiscardHandler)
	cfg.Identity.SessionCacheTTL = time.Hour
	srv, base := e.replica(cfg)
	e.run(srv)
	return base, srv.Sessions()
}

// TestCopiedCookieRefusedAfterSignOut is the stolen-cookie attack: alice
// signs in through the real login flow, her session cookie is copied into a
// second browser, and she signs out in the first. The copy is refused from
// then on — sent to sign in again on the consent page, not signed in on
// /session, unable to submit the consent form — on the replica she signed
// out at, and within a second on another replica whose cache had already
// answered "live" for it.
func TestCopiedCookieRefusedAfterSignOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	replica, replicaSessions := e.sessionReplica()
	m := e.newMCPServer("files", "fake")
	connectURL := m.mint("alice", map[string]any{"provider": "fake"})["url"].(string)
	onReplica := replica + strings.TrimPrefix(connectURL, e.srv.URL)

	alice := e.browser()
	consent := e.openAs(alice, connectURL, "alice")
	if consent.status != http.StatusOK {
		t.Fatalf("consent page: %d %s", consent.status, consent.body)
	}
	thief := e.browser()
	thief.Cookies[session.CookieName] = alice.Cookies[session.CookieName]
	// The copy works before sign-out, on both replicas; on the second one
	// until the answer comes from its cache.
	if r := thief.get(connectURL); r.status != http.StatusOK {
		t.Fatalf("the copied cookie does not open the consent page before sign-out: %d", r.status)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		before := replicaSessions.CacheStats().Hits
		if r := thief.get(onReplica); r.status != http.StatusOK {
			t.Fatalf("consent page on the replica: %d %s", r.status, r.body)
		}
		if replicaSessions.CacheStats().Hits > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica does not answer from its session cache")
		}
		time.Sleep(5 * time.Millisecond)
	}

	page := alice.get(e.srv.URL + "/session")
	out := alice.do(http.MethodPost, e.srv.URL+"/logout", url.Values{"csrf_token": {csrfOf(t, page.body)}})
	if out.status != http.StatusOK || !strings.Contains(out.setCookie(session.CookieName), "Max-Age=0") {
		t.Fatalf("logout: %d %s", out.status, out.body)
	}

	loginFirst := func(where string, r response) {
		t.Helper()
		if r.status != http.StatusFound || !strings.Contains(r.location, "/login?") {
			t.Fatalf("%s: the copied cookie still opens the consent page after sign-out: %d %s", where, r.status, r.location)
		}
	}
	loginFirst("same replica", thief.get(connectURL))
	if r := thief.get(e.srv.URL + "/session"); !strings.Contains(r.body, "Not signed in") {
		t.Fatal("/session still shows alice to the copied cookie")
	}
	r := thief.do(http.MethodPost, connectURL, url.Values{"csrf_token": {csrfOf(t, consent.body)}, "decision": {"allow"}})
	if r.status == http.StatusOK || r.status == http.StatusSeeOther {
		t.Fatalf("the copied cookie still submits the consent form: %d %s", r.status, r.location)
	}
	deadline = time.Now().Add(time.Second)
	for {
		r := thief.get(onReplica)
		if r.status == http.StatusFound {
			loginFirst("other replica", r)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other replica still accepts the copied cookie a second after sign-out: %d", r.status)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := e.count("browser_sessions WHERE ended_at IS NOT NULL"); n != 1 {
		t.Fatalf("%d sessions ended, want alice's one", n)
	}
}
