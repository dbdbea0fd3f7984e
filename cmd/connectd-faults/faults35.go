package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The faults of issue 35: short outages ridden out, and waits bounded by
// the caller's deadline rather than by a third party's.

// (h) Four Postgres restarts (pg_ctl restart -m fast) 20 s apart under the
// standard load: each cuts every pooled connection; what is pooled when
// Postgres is back must not fail a request.
func (s *study) pgRestarts(ctx context.Context) error {
	var took []string
	run, t0, err := s.during(ctx, s.standardLoad(), 3*time.Second, 9*time.Second, func() error {
		for i := range 4 {
			if i > 0 {
				sleep(ctx, 20*time.Second)
			}
			start := time.Now()
			if err := s.pg.restart(ctx); err != nil {
				return err
			}
			took = append(took, fmt.Sprintf("%.1f", time.Since(start).Seconds()))
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.dbRows("(h) four Postgres restarts, 20 s apart", run, t0, "pg_ctl restart took "+strings.Join(took, ", ")+" s")
	return nil
}

// (i) 300 long-polls (GET /v1/elicitations/{id}?wait=10s) sent at once to
// replica A with a pool of 10 connections, on a healthy database: each is
// held for its whole wait and answered 200 pending, none refused. The
// long-poll cap per client is raised for it (CONNECTD_MAX_WAITERS_PER_CLIENT,
// 64 by default, answers 429 past it: a different rule).
func (s *study) longPolls(ctx context.Context) error {
	const polls, wait = 300, 10 * time.Second
	if err := s.startReplicas(ctx, "CONNECTD_DB_MAX_CONNS=10", "CONNECTD_MAX_WAITERS_PER_CLIENT=1000"); err != nil {
		return err
	}
	a := s.reps[0]
	user := loadUser(0)
	m := s.c.do(ctx, http.MethodPost, a.base+"/v1/elicitations", user,
		fmt.Sprintf(`{"provider":%q,"scopes":["files.read"],"request_digest":"faults-longpoll-%d"}`, loadProvider, time.Now().UnixNano()))
	if m.status != http.StatusCreated && m.status != http.StatusOK {
		return fmt.Errorf("mint for the long-polls: %s", m.describe())
	}
	id, err := s.mintedID(ctx, a.base, user)
	if err != nil {
		return err
	}
	t := newTally()
	var (
		mu   sync.Mutex
		held int
		wg   sync.WaitGroup
	)
	start := make(chan struct{})
	for range polls {
		wg.Go(func() {
			<-start
			r := s.c.do(ctx, http.MethodGet, a.base+"/v1/elicitations/"+id+"?wait="+wait.String(), user, "")
			t.add(r)
			if r.status == http.StatusOK && r.took >= wait-500*time.Millisecond {
				mu.Lock()
				held++
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	s.addRow("(i) 300 long-polls at once, pool of 10", "long-polls of one elicitation (wait=10s)", t, "—",
		fmt.Sprintf("%d of %d held for the whole wait and answered 200 pending; CONNECTD_DB_MAX_CONNS=10, CONNECTD_MAX_WAITERS_PER_CLIENT=1000, replica A", held, polls))
	return s.startReplicas(ctx)
}

// mintedID is the elicitation the last mint of user made: its id, from the
// answer of minting the same request again (idempotent) would need the
// body; the caller's answers keep only codes, so it is read here.
func (s *study) mintedID(ctx context.Context, base, user string) (string, error) {
	var id string
	err := s.pool.QueryRow(ctx, `SELECT id FROM elicitations WHERE subject = $1 AND status = 'pending'
		AND request_digest LIKE 'faults-longpoll-%' ORDER BY created_at DESC LIMIT 1`, user).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("the long-polls' elicitation: %w", err)
	}
	return id, nil
}

// hangable serves h, the requests whose path match says hanging while hang
// holds a channel: each is accepted and not answered until that is closed,
// or the caller gives up. The issuer's JWKS (fault (j)) and
// hangingProvider's API (fault (l)) are served so.
func hangable(h http.Handler, hang *atomic.Pointer[chan struct{}], match func(path string) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ch := hang.Load(); ch != nil && match(r.URL.Path) {
			select {
			case <-*ch:
			case <-r.Context().Done():
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// (j) The issuer's JWKS hangs (accepts the connection, never answers)
// while 100 token reads come with user tokens naming keys the JWKS does
// not have — forged ones, signed with a key of the caller's own, each a
// kid of its own, issued now — spread over both replicas, after the
// unknown-key interval (5 s) has passed since the last fetch: each must be
// answered within a second (503 issuer_unavailable with Retry-After), not
// after the fetch's timeout (10 s), while valid tokens keep being read.
func (s *study) hangingJWKS(ctx context.Context) error {
	const forged = 100
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	release := make(chan struct{})
	s.jwksHang.Store(&release)
	defer func() { s.jwksHang.Store(nil); close(release) }()
	sleep(ctx, 6*time.Second) // past the unknown-key interval since any fetch
	t := newTally()
	var wg sync.WaitGroup
	start := time.Now()
	for i := range forged {
		wg.Go(func() {
			now := time.Now()
			tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": s.idp.Issuer(), "sub": loadUser(i),
				"aud": []string{resource}, "client_id": "mcp-client", "scope": "", "iat": now.Unix(),
				"exp": now.Add(time.Hour).Unix(), "jti": fmt.Sprintf("forged-%d", i)})
			tok.Header["kid"] = fmt.Sprintf("forged-%d-%d", i, now.UnixNano())
			tok.Header["typ"] = "at+jwt"
			signed, err := tok.SignedString(key)
			if err != nil {
				t.add(answer{err: err})
				return
			}
			t.add(s.c.forgedToken(ctx, s.reps[i%len(s.reps)].base, signed))
		})
	}
	wg.Wait()
	within := time.Since(start)
	valid := s.reads(ctx, loadProvider, s.loadConns(20), s.reps)
	before := len(s.problems)
	s.addRow("(j) issuer JWKS hangs", fmt.Sprintf("%d token reads, unknown kids", forged), t, "—",
		fmt.Sprintf("all answered %.1f s after the first was sent; meanwhile valid tokens: %s", within.Seconds(), summary(valid)))
	// 503 jwks_unavailable is this fault's right answer (the table's
	// classes are the database's and the provider's): a problem only when
	// it is not all there is, or took longer than a second.
	if t.others["503 jwks_unavailable"] == t.n {
		s.problems = s.problems[:before]
	}
	if t.max > time.Second {
		s.problems = append(s.problems, fmt.Sprintf("(j) issuer JWKS hangs: an unknown kid waited %s, over a second", t.max.Round(time.Millisecond)))
	}
	return nil
}

// loadConns are the first n load users' connections, for reads.
func (s *study) loadConns(n int) []seeded {
	out := make([]seeded, n)
	for i := range out {
		out[i] = seeded{user: loadUser(i)}
	}
	return out
}

// forgedToken reads a token with the client's key and the given user
// token.
func (c *caller) forgedToken(ctx context.Context, base, userToken string) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/connections/"+loadProvider+"/token", nil)
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+c.clientKey)
	req.Header.Set("X-User-Token", userToken)
	sent := time.Now()
	resp, err := c.client.Do(req)
	if err != nil {
		return answer{err: err, sent: sent, took: time.Since(sent)}
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	a := answer{status: resp.StatusCode, sent: sent, took: time.Since(sent), err: err, retryAfter: resp.Header.Get("Retry-After") != ""}
	var out struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(raw, &out)
	a.code = out.Error
	return a
}

// proxyGet is one proxied GET of provider's API path for user.
func (c *caller) proxyGet(ctx context.Context, r *replica, provider, user, path string) answer {
	return c.do(ctx, http.MethodGet, r.base+"/v1/proxy/"+provider+"/"+path, user, "")
}

// (l) A provider API that hangs (accepts each call, never answers) under
// 120 proxied calls sent at once, spread over both replicas, with every
// setting at its default (the proxy's answer deadline,
// CONNECTD_PROXY_ANSWER_TIMEOUT, 15 s): each must be answered 504
// provider_timeout with Retry-After within that deadline, while proxied
// calls to another provider (100 a second, an open loop, from just before
// the 120 to their last answer) keep their p99 under a second.
func (s *study) hangingAPI(ctx context.Context) error {
	const callers, deadline = 120, 15 * time.Second
	for i := range callers { // the hanging provider's connections, valid tokens
		tok := s.providers[hangingProvider].Grant([]string{"files.read"}, 24*time.Hour)
		if err := s.connect(ctx, loadUser(i), hangingProvider, tok, tok.Expiry); err != nil {
			return err
		}
	}
	// Each answers at once before the hang (and so is cached on both
	// replicas, as a busy server's would be).
	warm := newTally()
	for i := range callers {
		warm.add(s.c.proxyGet(ctx, s.reps[i%len(s.reps)], hangingProvider, loadUser(i), "files"))
	}
	if warm.classes[class2xx] != callers {
		return fmt.Errorf("the hanging provider's API before the hang: %s", summary(warm))
	}
	release := make(chan struct{})
	s.apiHang.Store(&release)
	defer func() { s.apiHang.Store(nil); close(release) }()

	lctx, stopOther := context.WithCancel(ctx)
	other := newTally()
	var (
		mu    sync.Mutex
		took  []time.Duration
		owg   sync.WaitGroup
		retry int
	)
	owg.Go(func() { // the other provider, an open loop
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		var wg sync.WaitGroup
		defer wg.Wait()
		for i := 0; ; i++ {
			select {
			case <-lctx.Done():
				return
			case <-tick.C:
			}
			wg.Go(func() {
				a := s.c.proxyGet(context.WithoutCancel(lctx), s.reps[i%len(s.reps)], loadProvider, loadUser(i*7), "files")
				other.add(a)
				mu.Lock()
				took = append(took, a.took)
				mu.Unlock()
			})
		}
	})
	sleep(ctx, time.Second)
	hung := newTally()
	var wg sync.WaitGroup
	start := time.Now()
	for i := range callers {
		wg.Go(func() {
			a := s.c.proxyGet(ctx, s.reps[i%len(s.reps)], hangingProvider, loadUser(i), "files")
			hung.add(a)
			if a.status == http.StatusGatewayTimeout && a.retryAfter {
				mu.Lock()
				retry++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	all := time.Since(start)
	stopOther()
	owg.Wait()
	slices.Sort(took)
	p := func(q float64) time.Duration {
		if len(took) == 0 {
			return 0
		}
		return took[min(len(took)-1, int(q*float64(len(took))))]
	}
	before := len(s.problems)
	s.addRow("(l) provider API hangs", fmt.Sprintf("%d proxied calls to it", callers), hung, "—",
		fmt.Sprintf("%d of %d answered 504 provider_timeout with Retry-After, the last %.1f s after the first was sent (answer deadline %s, the default)",
			retry, callers, all.Seconds(), deadline))
	s.addRow("(l) provider API hangs", "proxied calls to another provider meanwhile", other, "—",
		fmt.Sprintf("p50 %s, p99 %s, longest %s, over %.1f s", p(0.50).Round(time.Millisecond), p(0.99).Round(time.Millisecond),
			other.max.Round(time.Millisecond), all.Seconds()+1))
	// 504 provider_timeout is this fault's right answer for the hanging
	// provider's callers: a problem only when it is not all there is, or
	// came past the deadline.
	if hung.others["504 provider_timeout"] == hung.n && other.classes[class2xx] == other.n {
		s.problems = s.problems[:before]
	}
	if hung.max > deadline+time.Second {
		s.problems = append(s.problems, fmt.Sprintf("(l) provider API hangs: a proxied caller waited %s, past the %s deadline", hung.max.Round(time.Millisecond), deadline))
	}
	if p(0.99) > time.Second {
		s.problems = append(s.problems, fmt.Sprintf("(l) provider API hangs: the other provider's proxied calls' p99 is %s, over a second", p(0.99).Round(time.Millisecond)))
	}
	return nil
}
