package scaleout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/vault"
)

// The numbers of TestSlowProvider, and why.
const (
	// providerTimeout is CONNECTD_PROVIDER_TIMEOUT here: the hang has to
	// outlast it (so every call to the slow provider times out) several
	// times over, and 3 s keeps the test short. The default is 30 s.
	providerTimeout = 3 * time.Second
	// defaultHang is how long the slow provider hangs unless
	// SCALEOUT_SLOW_HANG says otherwise (issue 22 says 60 s). 20 s is six
	// provider timeouts, and twice the client-key cache's TTL (10 s), so
	// the other provider's token reads must refill that cache from the pool
	// during the hang — the pool the code before the row lease
	// (faf3da0) held in a FOR UPDATE transaction across each provider call.
	defaultHang = 20 * time.Second
	// maxConns is CONNECTD_DB_MAX_CONNS. Each of the slowUsers connections
	// is read on both replicas, and in the old code each such read held a
	// pooled connection (its refresh's FOR UPDATE transaction, or its wait
	// for the other replica's row lock): up to 8 per replica, twice this
	// pool, which stayed drained for the provider's whole hang while mints,
	// readiness checks and cache refills waited behind it.
	maxConns = 4
	// providerSlots is CONNECTD_PROVIDER_MAX_CONCURRENCY: fewer than
	// slowUsers, so the bulkhead turns some callers away (503 within a
	// second) while the others wait out the timeout.
	providerSlots = 4
	fastUsers     = 16
	slowUsers     = 8 // half of them expired, half within the refresh skew but still valid
)

// TestSlowProvider is issue 22's fault scenario: two replicas, one provider
// ("slow") hanging at its token endpoint for longer than the provider
// timeout, while the connections to another ("fake", tokens valid and
// cached) keep answering from cache within their normal latency, mints keep
// working and /readyz stays 200. The slow provider's callers get 503
// provider_unavailable (or their still-valid token) within the provider
// timeout and a margin, never a 500 or a hang; and no refresh token is lost:
// once the provider answers again, every one of its connections refreshes.
func TestSlowProvider(t *testing.T) {
	hang := defaultHang
	if v := os.Getenv("SCALEOUT_SLOW_HANG"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 2*providerTimeout || d > 100*time.Second {
			// Past 100 s the "still valid" tokens (expiring 119 s after
			// seeding) would expire during the hang.
			t.Fatalf("SCALEOUT_SLOW_HANG=%q: want a duration from %s to 100s", v, 2*providerTimeout)
		}
		hang = d
	}
	// The hang: a token request waits until it ends, and is given up with
	// nothing done when its caller leaves first (a provider that never got
	// to it), so no refresh token is rotated behind connectd's back.
	var hangUntil atomic.Int64 // unix nanoseconds; 0: no hang
	wrap := func(name string, h http.Handler) http.Handler {
		if name != "slow" {
			return h
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if until := hangUntil.Load(); r.URL.Path == "/token" && until != 0 {
				// net/http notices a caller that left (and cancels
				// r.Context()) only once the request body has been read.
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				select {
				case <-time.After(time.Until(time.Unix(0, until))):
				case <-r.Context().Done():
					return
				}
			}
			h.ServeHTTP(w, r)
		})
	}
	c := newClusterWith(t, 2, clusterOptions{
		providers: map[string]providertest.Options{"slow": {RotateRefreshTokens: true}},
		wrap:      wrap,
		env: []string{
			"CONNECTD_PROVIDER_TIMEOUT=" + providerTimeout.String(),
			fmt.Sprintf("CONNECTD_PROVIDER_MAX_CONCURRENCY=%d", providerSlots),
			fmt.Sprintf("CONNECTD_DB_MAX_CONNS=%d", maxConns),
		},
	})
	ctx := context.Background()
	slow := c.providers["slow"]

	// Seed the connections, each approved for the client as the consent
	// page would have it.
	store, err := vault.New(vault.Config{Pool: c.pool, Keyring: keyringOf(t, c.env)})
	if err != nil {
		t.Fatal(err)
	}
	connect := func(user, provider string, tok providertest.Tokens, expiry time.Time) {
		t.Helper()
		u := identity.User{Issuer: c.idp.Issuer(), Subject: user}
		conn, err := store.Put(ctx, u, provider, vault.Credential{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken,
			TokenType: "Bearer", Expiry: expiry, Scopes: tok.Scopes, AccountID: "user-1"})
		if err != nil {
			t.Fatal(err)
		}
		if err := consent.Record(ctx, c.pool, consent.Grant{User: u, ClientID: c.clientID, Provider: provider,
			Scopes: tok.Scopes, AccountID: "user-1", ConnectionID: conn.ID, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range fastUsers {
		tok := c.provider.Grant([]string{"files.read"}, time.Hour)
		connect(fmt.Sprintf("fast-%02d", i), "fake", tok, tok.Expiry)
	}
	slowSeeded, stillValid := map[string]providertest.Tokens{}, map[string]bool{}
	for i := range slowUsers {
		user := fmt.Sprintf("slow-%02d", i)
		tok := slow.Grant([]string{"files.read"}, time.Hour)
		expiry := time.Now().Add(-time.Minute) // expired: only a refresh can answer
		if i%2 == 1 {
			expiry = time.Now().Add(119 * time.Second) // within the 2 min skew: refreshed first, yet still valid
			stillValid[user] = true
		}
		connect(user, "slow", tok, expiry)
		slowSeeded[user] = tok
	}

	h := &faultLoad{c: c, client: &http.Client{Timeout: time.Minute}}
	// Every fast user's token is read once on each replica: verified,
	// cached, as for a busy MCP server.
	for i := range fastUsers {
		for _, r := range c.replicas {
			if a := h.token(r, "fake", fmt.Sprintf("fast-%02d", i)); a.status != http.StatusOK {
				t.Fatalf("priming fast-%02d on %s: %s", i, r.name, a)
			}
		}
	}
	fastRefreshes := c.provider.Counts().Refresh

	// Baseline, then the hang, under the same load (paced, so that the
	// latencies are the service's and not those of two saturated cores).
	before := h.drive(3*time.Second, false)
	hangUntil.Store(time.Now().Add(hang).UnixNano())
	during := h.drive(hang, true)
	hangUntil.Store(0)

	reads0, reads1 := before.latencies("read"), during.latencies("read")
	mints0, mints1 := before.latencies("mint"), during.latencies("mint")
	t.Logf("fast provider's token reads: before the hang %d, p50 %s, p99 %s, max %s; during the %s hang %d, p50 %s, p99 %s, max %s",
		len(reads0), pct(reads0, 50), pct(reads0, 99), pct(reads0, 100), hang, len(reads1), pct(reads1, 50), pct(reads1, 99), pct(reads1, 100))
	t.Logf("mints: before %d, p50 %s, p99 %s; during %d, p50 %s, p99 %s",
		len(mints0), pct(mints0, 50), pct(mints0, 99), len(mints1), pct(mints1, 50), pct(mints1, 99))
	t.Logf("slow provider's callers during the hang: %s", during.summary("slow"))
	t.Logf("readiness checks during the hang: %s", during.summary("ready"))

	for _, a := range append(before.of("read"), during.of("read")...) {
		if a.status != http.StatusOK {
			t.Errorf("a token read of the fast provider answered %s", a)
			break
		}
	}
	// Generous bounds: the machine is shared; what matters is that the
	// hang does not show, not the figures themselves.
	if limit := max(250*time.Millisecond, 5*pct(reads0, 99)); pct(reads1, 99) > limit {
		t.Errorf("the fast provider's token reads took %s at p99 during the hang (before: %s), over %s",
			pct(reads1, 99), pct(reads0, 99), limit)
	}
	// Not one of them waited as long as the database acquire timeout (2 s):
	// none queued for a pooled connection the slow provider's callers held.
	if pct(reads1, 100) >= 2*time.Second {
		t.Errorf("a token read of the fast provider took %s during the hang", pct(reads1, 100))
	}
	for _, a := range append(before.of("mint"), during.of("mint")...) {
		if a.status != http.StatusCreated {
			t.Errorf("a mint answered %s", a)
			break
		}
	}
	if limit := max(time.Second, 5*pct(mints0, 99)); pct(mints1, 99) > limit {
		t.Errorf("mints took %s at p99 during the hang (before: %s), over %s", pct(mints1, 99), pct(mints0, 99), limit)
	}
	for _, a := range append(before.of("ready"), during.of("ready")...) {
		if a.status != http.StatusOK {
			t.Errorf("/readyz answered %s", a)
			break
		}
	}
	if len(during.of("slow")) == 0 {
		t.Fatal("no call of the slow provider's connections was answered during the hang")
	}
	// A caller may wait for the other replica's call in flight before it
	// makes its own: two timeouts, and a margin for a slow machine.
	bound := 2*providerTimeout + 4*time.Second
	for _, a := range during.of("slow") {
		switch {
		case a.took > bound:
			t.Errorf("a call for %s waited %s, over %s (provider timeout %s): %s", a.user, a.took, bound, providerTimeout, a)
		case a.status == http.StatusServiceUnavailable && a.code == "provider_unavailable" && a.retryAfter:
		case a.status == http.StatusOK && a.accessToken == slowSeeded[a.user].AccessToken && stillValid[a.user]:
			// the token still valid
		case a.status == http.StatusOK && a.accessToken != slowSeeded[a.user].AccessToken && slow.Valid(a.accessToken):
			// refreshed as the hang ended
		default:
			t.Errorf("a call for %s answered %s during the hang, want 503 provider_unavailable with Retry-After "+
				"or (for a token still valid) that token", a.user, a)
		}
	}

	// The hang is over: every slow connection refreshes, on either
	// replica, and the provider never saw a refresh token twice.
	for user, seeded := range slowSeeded {
		deadline := time.Now().Add(3 * providerTimeout)
		for {
			a := h.token(c.replicas[0], "slow", user)
			if a.status == http.StatusOK && a.accessToken != seeded.AccessToken && slow.Valid(a.accessToken) {
				if b := h.token(c.replicas[1], "slow", user); b.status != http.StatusOK || b.accessToken != a.accessToken {
					t.Errorf("%s on B after its refresh on A: %s", user, b)
				}
				break
			}
			if a.status == http.StatusConflict || time.Now().After(deadline) {
				t.Fatalf("%s after the hang: %s", user, a)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if slow.Revoked(seeded.RefreshToken) {
			t.Errorf("the provider revoked %s's grant: a refresh token was presented twice", user)
		}
	}
	var reauth int
	if err := c.pool.QueryRow(ctx, `SELECT count(*) FROM connections WHERE status <> 'active'`).Scan(&reauth); err != nil {
		t.Fatal(err)
	}
	if reauth != 0 {
		t.Errorf("%d connections are not active after the hang", reauth)
	}
	if n := c.provider.Counts().Refresh - fastRefreshes; n != 0 {
		t.Errorf("%d refreshes reached the fast provider, whose tokens were all valid", n)
	}
}

// faultLoad drives the requests of TestSlowProvider and records every
// answer.
type faultLoad struct {
	c      *cluster
	client *http.Client
	mu     sync.Mutex
	tokens map[string]string // user tokens, one per user as an MCP server keeps them
	minted atomic.Int64
}

// faultAnswer is one answer as the fault tests judge it.
type faultAnswer struct {
	kind        string // "read", "mint", "slow", "ready"
	user        string
	status      int    // 0: no answer (err)
	code        string // the JSON error code, or /readyz's reason
	retryAfter  bool
	accessToken string
	took        time.Duration
	err         error
}

func (a faultAnswer) String() string {
	if a.err != nil {
		return fmt.Sprintf("no answer after %s: %v", a.took.Round(time.Millisecond), a.err)
	}
	s := fmt.Sprintf("%d %s in %s", a.status, a.code, a.took.Round(time.Millisecond))
	if a.retryAfter {
		s += " (Retry-After)"
	}
	return s
}

func (h *faultLoad) userToken(user string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if tok, ok := h.tokens[user]; ok {
		return tok
	}
	tok, err := h.c.idp.AccessToken(user, resource)
	if err != nil {
		panic(err) // an ES256 signature with a key in memory
	}
	if h.tokens == nil {
		h.tokens = map[string]string{}
	}
	h.tokens[user] = tok
	return tok
}

func (h *faultLoad) do(kind, user, method, u, body string) faultAnswer {
	a := faultAnswer{kind: kind, user: user}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, u, rd)
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+h.c.clientKey)
		req.Header.Set(mcpauth.UserTokenHeader, h.userToken(user))
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := h.client.Do(req)
	if err != nil {
		a.took, a.err = time.Since(start), err
		return a
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	a.took, a.status, a.err = time.Since(start), resp.StatusCode, err
	a.retryAfter = resp.Header.Get("Retry-After") != ""
	var out struct {
		Error, Reason string
		AccessToken   string `json:"access_token"`
	}
	_ = json.Unmarshal(raw, &out)
	a.code, a.accessToken = out.Error+out.Reason, out.AccessToken
	return a
}

func (h *faultLoad) token(r *replica, provider, user string) faultAnswer {
	kind := "read"
	if provider == "slow" {
		kind = "slow"
	}
	return h.do(kind, user, http.MethodGet, r.url()+"/v1/connections/"+provider+"/token", "")
}

// faultRun is what one drive recorded.
type faultRun struct {
	mu      sync.Mutex
	answers []faultAnswer
}

func (f *faultRun) add(a faultAnswer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers = append(f.answers, a)
}

func (f *faultRun) of(kind string) []faultAnswer {
	var out []faultAnswer
	for _, a := range f.answers {
		if a.kind == kind {
			out = append(out, a)
		}
	}
	return out
}

func (f *faultRun) latencies(kind string) []time.Duration {
	var out []time.Duration
	for _, a := range f.of(kind) {
		out = append(out, a.took)
	}
	slices.Sort(out)
	return out
}

// summary counts a kind's answers by status and code, with the longest.
func (f *faultRun) summary(kind string) string {
	counts := map[string]int{}
	var longest time.Duration
	for _, a := range f.of(kind) {
		k := fmt.Sprintf("%d %s", a.status, a.code)
		if a.err != nil {
			k = "no answer"
		}
		counts[k]++
		longest = max(longest, a.took)
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d × %s", counts[k], strings.TrimSpace(k)))
	}
	return fmt.Sprintf("%s; longest %s", strings.Join(parts, ", "), longest.Round(time.Millisecond))
}

// pct is the p-th percentile of sorted latencies.
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)-1)*p/100]
}

// drive runs, for d, paced token reads of the fast provider's users (4
// callers, one request each 20 ms), a mint every 100 ms, a readiness check
// of each replica every 200 ms, and with slowCallers one caller per slow
// connection asking for its token again as soon as it has an answer,
// alternating replicas. It returns once every request it sent has been
// answered.
func (h *faultLoad) drive(d time.Duration, slowCallers bool) *faultRun {
	run := &faultRun{}
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	paced := func(every time.Duration, f func(i int)) {
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				next := time.Now().Add(every)
				f(i)
				time.Sleep(time.Until(next))
			}
		})
	}
	reps := h.c.replicas
	for w := range 4 {
		paced(20*time.Millisecond, func(i int) {
			user := fmt.Sprintf("fast-%02d", (w*7+i)%fastUsers)
			run.add(h.token(reps[(w+i)%len(reps)], "fake", user))
		})
	}
	paced(100*time.Millisecond, func(i int) {
		body := fmt.Sprintf(`{"provider":"fake","scopes":["files.read"],"request_digest":"fault-%d"}`, h.minted.Add(1))
		run.add(h.do("mint", fmt.Sprintf("fast-%02d", i%fastUsers), http.MethodPost, reps[i%len(reps)].url()+"/v1/elicitations", body))
	})
	for _, r := range reps {
		paced(200*time.Millisecond, func(int) { run.add(h.do("ready", "", http.MethodGet, r.url()+"/readyz", "")) })
	}
	if slowCallers {
		for u := range slowUsers {
			paced(100*time.Millisecond, func(i int) {
				run.add(h.token(reps[(u+i)%len(reps)], "slow", fmt.Sprintf("slow-%02d", u)))
			})
		}
	}
	wg.Wait()
	return run
}
