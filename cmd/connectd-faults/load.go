package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connectd/connectd/internal/devidp"
)

// answer is one response as the study judges it.
type answer struct {
	status     int // 0: none (err)
	code       string
	retryAfter bool
	token      string // access_token of a token answer
	sent       time.Time
	took       time.Duration
	err        error
}

// Status classes of the table, in its column order.
const (
	class2xx      = "2xx"
	class409      = "409 reauthorization_required"
	class500      = "500 internal_error"
	class503DB    = "503 database_unavailable"
	class503Prov  = "503 provider_unavailable"
	classOther    = "other"
	classNoAnswer = "no answer"
)

func (a answer) class() string {
	switch {
	case a.err != nil:
		return classNoAnswer
	case a.status >= 200 && a.status < 300:
		return class2xx
	case a.status == http.StatusConflict && a.code == "reauthorization_required":
		return class409
	case a.status == http.StatusInternalServerError:
		return class500
	case a.status == http.StatusServiceUnavailable && a.code == "database_unavailable":
		return class503DB
	case a.status == http.StatusServiceUnavailable && a.code == "provider_unavailable":
		return class503Prov
	}
	return classOther
}

func (a answer) describe() string {
	if a.err != nil {
		return "no answer (" + cause(a.err) + ")"
	}
	return strings.TrimSpace(fmt.Sprintf("%d %s", a.status, a.code))
}

// tally counts the answers of one kind of request during one fault.
type tally struct {
	mu      sync.Mutex
	n       int
	classes map[string]int
	others  map[string]int // "other" and "no answer", by what they were
	max     time.Duration
	slow    int // answers that took a second or more
	with503 int // 503s carrying Retry-After
	all503  int
	// firstBad and lastBad are when the first and the last request whose
	// answer was not a 2xx were sent.
	firstBad, lastBad time.Time
}

func newTally() *tally { return &tally{classes: map[string]int{}, others: map[string]int{}} }

func (t *tally) add(a answer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n++
	c := a.class()
	t.classes[c]++
	if c == classOther || c == classNoAnswer {
		t.others[a.describe()]++
	}
	t.max = max(t.max, a.took)
	if a.took >= time.Second {
		t.slow++
	}
	if c != class2xx {
		if t.firstBad.IsZero() || a.sent.Before(t.firstBad) {
			t.firstBad = a.sent
		}
		if a.sent.After(t.lastBad) {
			t.lastBad = a.sent
		}
	}
	if a.status == http.StatusServiceUnavailable {
		t.all503++
		if a.retryAfter {
			t.with503++
		}
	}
}

// otherText lists what the "other" answers were.
func (t *tally) otherText() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(t.others)) {
		d := k
		if len(d) > 120 {
			d = d[:120] + "…"
		}
		parts = append(parts, fmt.Sprintf("%d × %s", t.others[k], d))
	}
	return strings.Join(parts, "; ")
}

// caller makes the study's requests: as the MCP server of the seeded
// client, for the users of the dev IdP.
type caller struct {
	idp       *devidp.Provider
	clientKey string
	client    *http.Client
	minted    atomic.Int64

	mu     sync.Mutex
	tokens map[string]string // one MCP access token per user, reused as an MCP server would
}

func newCaller(idp *devidp.Provider, clientKey string) *caller {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 512, 256
	// Longer than any wait a fault may cause (a lease left by a killed
	// replica lasts the provider timeout and 30 s, and twice the timeout
	// with a reuse grace): a hang shows as a latency, not as our timeout.
	return &caller{idp: idp, clientKey: clientKey, client: &http.Client{Transport: t, Timeout: 150 * time.Second},
		tokens: map[string]string{}}
}

func (c *caller) userToken(user string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.tokens[user]; ok {
		return t
	}
	t, err := c.idp.AccessToken(user, resource)
	if err != nil {
		panic(err) // an ES256 signature with a key in memory
	}
	c.tokens[user] = t
	return t
}

func (c *caller) do(ctx context.Context, method, url, user, body string) answer {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return answer{err: err}
	}
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+c.clientKey)
		req.Header.Set("X-User-Token", c.userToken(user))
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := c.client.Do(req)
	if err != nil {
		return answer{err: err, sent: start, took: time.Since(start)}
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	a := answer{status: resp.StatusCode, sent: start, took: time.Since(start), err: err,
		retryAfter: resp.Header.Get("Retry-After") != ""}
	var out struct {
		Error       string `json:"error"`
		Reason      string `json:"reason"`
		AccessToken string `json:"access_token"`
	}
	_ = json.Unmarshal(raw, &out)
	a.code, a.token = out.Error+out.Reason, out.AccessToken
	return a
}

func (c *caller) token(ctx context.Context, r *replica, provider, user string) answer {
	return c.do(ctx, http.MethodGet, r.base+"/v1/connections/"+provider+"/token", user, "")
}

func (c *caller) mint(ctx context.Context, r *replica, user string) answer {
	body := fmt.Sprintf(`{"provider":%q,"scopes":["files.read"],"request_digest":"faults-%d"}`, loadProvider, c.minted.Add(1))
	return c.do(ctx, http.MethodPost, r.base+"/v1/elicitations", user, body)
}

func (c *caller) ready(ctx context.Context, r *replica) answer {
	return c.do(ctx, http.MethodGet, r.base+"/readyz", "", "")
}

// load is the traffic a fault runs under: token reads of the load users
// (cached, valid tokens) and mints, and readiness checks of each replica
// every 250 ms. With readEvery and mintEvery set it is an open loop — one
// request each interval, each in its own goroutine, so that requests stuck
// in a fault do not hold back the next ones and every second of the fault
// is counted alike; otherwise a closed loop of readers and minters callers,
// each sending its next request when it has its answer.
type load struct {
	c                    *caller
	reps                 []*replica
	readEvery, mintEvery time.Duration
	readers, minters     int
}

// loadRun is what one run of the load recorded.
type loadRun struct {
	reads, mints *tally
	mu           sync.Mutex
	ready        map[string]int // /readyz answers by status and reason
}

func (r *loadRun) readyText() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.ready)) {
		parts = append(parts, fmt.Sprintf("%d × %s", r.ready[k], k))
	}
	return strings.Join(parts, ", ")
}

// run drives the load until ctx ends; it returns once every request it
// sent has its answer.
func (l load) run(ctx context.Context) *loadRun {
	out := &loadRun{reads: newTally(), mints: newTally(), ready: map[string]int{}}
	var wg sync.WaitGroup
	// Requests already sent finish on their own context: a fault's end
	// must not turn its slowest answers into cancellations.
	bg := context.WithoutCancel(ctx)
	read := func(i int) { out.reads.add(l.c.token(bg, l.reps[i%len(l.reps)], loadProvider, loadUser(i*7))) }
	mint := func(i int) { out.mints.add(l.c.mint(bg, l.reps[i%len(l.reps)], loadUser(i*13))) }
	inFlight := make(chan struct{}, 4096) // a bound on the open loop's goroutines, never reached in practice
	open := func(every time.Duration, f func(int)) {
		wg.Go(func() {
			t := time.NewTicker(every)
			defer t.Stop()
			for i := 0; ; i++ {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				inFlight <- struct{}{}
				wg.Go(func() {
					defer func() { <-inFlight }()
					f(i)
				})
			}
		})
	}
	closed := func(callers int, f func(int)) {
		for w := range callers {
			wg.Go(func() {
				for i := w; ctx.Err() == nil; i += callers {
					f(i)
				}
			})
		}
	}
	if l.readEvery > 0 {
		open(l.readEvery, read)
	} else {
		closed(l.readers, read)
	}
	if l.mintEvery > 0 {
		open(l.mintEvery, mint)
	} else {
		closed(l.minters, mint)
	}
	for _, r := range l.reps {
		wg.Go(func() {
			for ctx.Err() == nil {
				a := l.c.ready(bg, r)
				k := a.describe()
				if a.err != nil {
					k = classNoAnswer
				}
				out.mu.Lock()
				out.ready[k]++
				out.mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(250 * time.Millisecond):
				}
			}
		})
	}
	wg.Wait()
	return out
}

// cause names why a request got no answer, without the addresses and ports
// that make every error text different.
func cause(err error) string {
	msg := err.Error()
	for _, c := range []string{"EOF", "connection reset", "connection refused", "Client.Timeout exceeded", "context canceled"} {
		if strings.Contains(msg, c) {
			return c
		}
	}
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
}
