package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/connectd/connectd/internal/flowtest"
)

// load issues the benchmark's requests.
type load struct {
	key    string
	tokens []string
	// keys, when set, is the client key of each of tokens (the orgs
	// scenario: each user's organization's client); nil: key for all.
	keys   []string
	reps   []*process
	client *http.Client
	next   atomic.Uint64
	// minted numbers the mint requests: each names a request of its own
	// (request_digest), since minting the same request again while it is
	// pending answers the same elicitation instead of minting one.
	minted atomic.Uint64
	// trivialBase is the trivial handler's URL (the HTTP baseline).
	trivialBase string
	// upstreamBase is the bench provider's API (connectd-bench upstream),
	// which the proxy forwards to.
	upstreamBase string
	// bareBase is the bare reverse proxy in front of it (connectd-bench
	// bareproxy), the proxy's in-run bound.
	bareBase string

	mu  sync.Mutex
	ids []elicitationRef // minted elicitations, for the status scenario

	flows *flows // the browser-flow scenario's users
}

// flows hands each concurrent browser flow a user of its own.
type flows struct {
	tokens []string // MCP access tokens of flowUser(i)
	free   chan int
}

func newFlows(tokens []string) *flows {
	f := &flows{tokens: tokens, free: make(chan int, len(tokens))}
	for i := range tokens {
		f.free <- i
	}
	return f
}

type elicitationRef struct {
	id   string
	user int
}

func newLoad(key string, tokens []string, reps []*process) *load {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 2048
	t.MaxIdleConnsPerHost = 1024
	t.MaxConnsPerHost = 0
	return &load{key: key, tokens: tokens, reps: reps, client: &http.Client{Transport: t, Timeout: 30 * time.Second}}
}

// request is one unit of work; it returns an error for anything but the
// expected answer.
type request func(ctx context.Context) error

func (l *load) pick() (int, *process) {
	n := l.next.Add(1)
	return int(n % uint64(len(l.tokens))), l.reps[int(n%uint64(len(l.reps)))]
}

func (l *load) do(req *http.Request, user int, want int) ([]byte, error) {
	key := l.key
	if l.keys != nil {
		key = l.keys[user]
	}
	return l.doWith(req, key, l.tokens[user], want)
}

func (l *load) doAs(req *http.Request, userToken string, want int) ([]byte, error) {
	return l.doWith(req, l.key, userToken, want)
}

func (l *load) doWith(req *http.Request, key, userToken string, want int) ([]byte, error) {
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-User-Token", userToken)
	resp, err := l.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
	}
	return b, nil
}

func (l *load) token(ctx context.Context) error {
	u, p := l.pick()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/v1/connections/bench/token", nil)
	_, err := l.do(req, u, http.StatusOK)
	return err
}

// prime asks once for every user's token, unmeasured: a scenario then
// starts in the steady state of busy MCP servers, whose users' tokens have
// been verified and whose credentials are cached. (The first lookup of a
// user costs an ES256 verification and two queries; docs/performance.md.)
//
// Every replica has caches of its own, so every user is primed on every
// replica.
func (l *load) prime(ctx context.Context) error {
	return l.primePath(ctx, "/v1/connections/bench/token")
}

// primeProxy makes every user's proxied call once on every replica,
// unmeasured: the same caches as prime, and the sampled audit of proxied
// calls.
func (l *load) primeProxy(ctx context.Context) error {
	return l.primePath(ctx, "/v1/proxy/bench/"+apiSmall.path)
}

func (l *load) primePath(ctx context.Context, path string) error {
	var wg sync.WaitGroup
	var first atomic.Value
	var n atomic.Int64
	total := int64(len(l.tokens) * len(l.reps))
	for range 32 {
		wg.Go(func() {
			for i := n.Add(1) - 1; i < total && ctx.Err() == nil; i = n.Add(1) - 1 {
				u, p := int(i)%len(l.tokens), l.reps[int(i)/len(l.tokens)]
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
				if _, err := l.do(req, u, http.StatusOK); err != nil {
					first.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	if err, ok := first.Load().(error); ok {
		return fmt.Errorf("priming the caches: %w", err)
	}
	return nil
}

func (l *load) mint(ctx context.Context) error {
	u, p := l.pick()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.base+"/v1/elicitations",
		strings.NewReader(fmt.Sprintf(`{"provider":"bench","scopes":["read"],"request_digest":"m%d"}`, l.minted.Add(1))))
	req.Header.Set("Content-Type", "application/json")
	b, err := l.do(req, u, http.StatusCreated)
	if err != nil {
		return err
	}
	var out struct {
		ID string `json:"elicitation_id"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return err
	}
	l.mu.Lock()
	if len(l.ids) < 20000 {
		l.ids = append(l.ids, elicitationRef{out.ID, u})
	}
	l.mu.Unlock()
	return nil
}

func (l *load) status(ctx context.Context) error {
	l.mu.Lock()
	if len(l.ids) == 0 {
		l.mu.Unlock()
		return l.mint(ctx) // seed the pool of ids on first use
	}
	ref := l.ids[rand.IntN(len(l.ids))]
	l.mu.Unlock()
	p := l.reps[rand.IntN(len(l.reps))]
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/v1/elicitations/"+ref.id, nil)
	_, err := l.do(req, ref.user, http.StatusOK)
	return err
}

// flow is one whole connect flow as an MCP server and a user's browser
// live it: mint, then in a fresh browser sign in at the IdP, allow on the
// consent page, authorize at the provider, return through the callback; the
// MCP server then fetches the token, and unlinks, so that the next flow of
// this user goes through the provider again.
func (l *load) flow(ctx context.Context) error {
	var u int
	select {
	case u = <-l.flows.free:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { l.flows.free <- u }()
	p := l.reps[int(l.next.Add(1)%uint64(len(l.reps)))]
	tok := l.flows.tokens[u]
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.base+"/v1/elicitations",
		strings.NewReader(fmt.Sprintf(`{"provider":"flow","scopes":["files.read"],"request_digest":"f%d"}`, l.minted.Add(1))))
	req.Header.Set("Content-Type", "application/json")
	b, err := l.doAs(req, tok, http.StatusCreated)
	if err != nil {
		return fmt.Errorf("mint: %w", err)
	}
	var el struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(b, &el); err != nil {
		return err
	}
	if err := flowtest.New(l.client).Connect(el.URL, flowUser(u)); err != nil {
		return err
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/v1/connections/flow/token", nil)
	if _, err := l.doAs(req, tok, http.StatusOK); err != nil {
		return fmt.Errorf("token: %w", err)
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodDelete, p.base+"/v1/connections/flow", nil)
	if _, err := l.doAs(req, tok, http.StatusOK); err != nil {
		return fmt.Errorf("unlink: %w", err)
	}
	return nil
}

// direct is the GET an MCP server holding the user's access token makes
// straight to the provider's API: the proxy's baseline.
func (l *load) direct(c apiCall) request {
	return func(ctx context.Context) error {
		u, _ := l.pick()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, l.upstreamBase+"/"+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+benchAccessToken(u))
		return l.drain(req, c.size)
	}
}

// proxied is the same GET through connectd's proxy, authenticated as the
// token lookup is (client key and user token); connectd attaches the
// user's access token.
func (l *load) proxied(c apiCall) request {
	return func(ctx context.Context) error {
		u, p := l.pick()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/v1/proxy/bench/"+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+l.key)
		req.Header.Set("X-User-Token", l.tokens[u])
		return l.drain(req, c.size)
	}
}

// drain sends req and reads the answer to the end without keeping it (a
// 256 KB body is not held by the load generator either), expecting 200 and
// size bytes.
func (l *load) drain(req *http.Request, size int64) error {
	resp, err := l.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("%d bytes, want %d", n, size)
	}
	return nil
}

func (l *load) trivial(ctx context.Context) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, l.trivialBase+"/", nil)
	resp, err := l.client.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err
}

// result is one measured scenario at one concurrency.
type result struct {
	Scenario    string  `json:"scenario"`
	Concurrency int     `json:"concurrency"`
	Offered     int     `json:"offered_rps,omitempty"`
	Requests    int     `json:"requests"`
	Errors      int     `json:"errors"`
	RPS         float64 `json:"rps"`
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	P999ms      float64 `json:"p999_ms"`
	CPUPer1k    float64 `json:"cpu_seconds_per_1000,omitempty"`
	PeakRSSMB   float64 `json:"peak_rss_mb,omitempty"`
	VsTrivial   float64 `json:"ratio_vs_trivial,omitempty"`
	VsPgbench   float64 `json:"ratio_vs_pgbench,omitempty"`
	// The 1 KB GET through the proxy only: its req/s over the direct GET's
	// at the same concurrency, and how much later its p50 is (ms).
	VsDirect   float64  `json:"ratio_vs_direct,omitempty"`
	P50AddedMs *float64 `json:"p50_added_ms,omitempty"`
	// And against the bare reverse proxy at the same concurrency (its
	// in-run bound): req/s over its req/s, p50 added over its p50 (ms).
	VsBare         float64  `json:"ratio_vs_bare_proxy,omitempty"`
	P50AddedBareMs *float64 `json:"p50_added_vs_bare_proxy_ms,omitempty"`
	// The tracing comparison only: req/s over the mean of the tracing-off
	// rows at the same concurrency in the same run.
	VsTracingOff float64 `json:"ratio_vs_tracing_off,omitempty"`
	// The orgs rows only: req/s over the one-organization token lookup's at
	// the same concurrency in the same run.
	VsToken float64 `json:"ratio_vs_token,omitempty"`
	// Open loop only: how late the generator itself sent (p99, ms), part of
	// every latency above, and whether it ran at raised priority.
	SendLateP99ms float64 `json:"send_late_p99_ms,omitempty"`
	Priority      string  `json:"generator_priority,omitempty"`
	FirstError    string  `json:"first_error,omitempty"`
}

// cpuTicks is utime+stime of pid in clock ticks (USER_HZ, 100 on Linux).
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ut + st
}

// rss is the resident set of pid in MB now.
func rss(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.ParseFloat(strings.Fields(l)[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// rssSampler records the largest resident set of any of procs while a
// scenario runs (not the process's lifetime high-water mark, which would
// carry one scenario's peak into the next).
type rssSampler struct {
	stop chan struct{}
	done chan float64
}

func sampleRSS(procs []*process) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan float64, 1)}
	go func() {
		var peak float64
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			for _, p := range procs {
				peak = max(peak, rss(p.pid))
			}
			select {
			case <-s.stop:
				s.done <- peak
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) peak() float64 {
	close(s.stop)
	return <-s.done
}

func sum(ps []*process, f func(int) int64) int64 {
	var n int64
	for _, p := range ps {
		n += f(p.pid)
	}
	return n
}

// measure runs a closed loop: c workers issue requests back to back for d
// (after a short warm-up), recording each latency.
func measure(ctx context.Context, name string, c int, d time.Duration, procs []*process, req request) result {
	warm, cancelWarm := context.WithTimeout(ctx, d/4)
	runWorkers(warm, c, req, nil)
	cancelWarm()

	lat := make([][]time.Duration, c)
	var errs atomic.Int64
	var firstErr atomic.Value
	cpu0 := sum(procs, cpuTicks)
	mem := sampleRSS(procs)
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, d)
	runWorkers(rctx, c, req, func(w int, took time.Duration, err error) {
		if err != nil {
			if rctx.Err() == nil {
				errs.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
			}
			return
		}
		lat[w] = append(lat[w], took)
	})
	cancel()
	elapsed := time.Since(start)
	cpu := float64(sum(procs, cpuTicks)-cpu0) / 100
	all := slices.Concat(lat...)
	r := summarize(name, c, all, elapsed)
	r.Errors = int(errs.Load())
	if v, ok := firstErr.Load().(string); ok {
		r.FirstError = v
	}
	if r.Requests > 0 {
		r.CPUPer1k = cpu / float64(r.Requests) * 1000
	}
	r.PeakRSSMB = mem.peak()
	return r
}

func runWorkers(ctx context.Context, c int, req request, record func(int, time.Duration, error)) {
	var wg sync.WaitGroup
	for w := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t := time.Now()
				err := req(ctx)
				if record != nil {
					record(w, time.Since(t), err)
				}
			}
		}()
	}
	wg.Wait()
}

func summarize(name string, c int, lat []time.Duration, elapsed time.Duration) result {
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		i := int(float64(len(lat)-1) * p)
		return float64(lat[i].Microseconds()) / 1000
	}
	return result{Scenario: name, Concurrency: c, Requests: len(lat), RPS: float64(len(lat)) / elapsed.Seconds(),
		P50ms: q(0.50), P99ms: q(0.99), P999ms: q(0.999)}
}

// openLoop offers rate req/s with Poisson arrivals for d; each latency counts
// from the request's scheduled send time, so a stalled server cannot hide its
// queue (no coordinated omission). How late the generator itself sent is
// recorded too: on shared cores that is part of every latency measured.
//
// For its duration the harness raises its own scheduling priority when it
// may (root): a load generator elsewhere would not wait for a core behind the
// server it measures. The server's figures only lose by it (its threads are
// the ones preempted).
func openLoop(ctx context.Context, name string, rate int, d time.Duration, procs []*process, req request) result {
	var mu sync.Mutex
	var lat []time.Duration
	late := make([]time.Duration, 0, rate*int(d.Seconds()+1))
	var errs atomic.Int64
	var wg sync.WaitGroup
	rctx, cancel := context.WithTimeout(ctx, d+10*time.Second)
	defer cancel()
	prio := raisePriority()
	defer restorePriority()
	cpu0 := sum(procs, cpuTicks)
	mem := sampleRSS(procs)
	start := time.Now()
	next := start
	for next.Sub(start) < d {
		next = next.Add(time.Duration(rand.ExpFloat64() / float64(rate) * float64(time.Second)))
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait)
		}
		scheduled := next
		late = append(late, time.Since(scheduled))
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := req(rctx)
			took := time.Since(scheduled)
			if err != nil {
				errs.Add(1)
				return
			}
			mu.Lock()
			lat = append(lat, took)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	r := summarize(name, 0, lat, elapsed)
	r.Offered = rate
	r.Errors = int(errs.Load())
	r.SendLateP99ms = summarize("", 0, late, elapsed).P99ms
	r.Priority = prio
	if r.Requests > 0 {
		r.CPUPer1k = float64(sum(procs, cpuTicks)-cpu0) / 100 / float64(r.Requests) * 1000
	}
	r.PeakRSSMB = mem.peak()
	return r
}

// generatorNice is the nice value the harness takes during open loops.
const generatorNice = -10

// raisePriority sets every thread of the harness to generatorNice (Linux
// applies nice per thread; threads started later inherit it from theirs) and
// says whether that worked: "raised", or "normal" without the privilege.
func raisePriority() string {
	if setNice(generatorNice) != nil {
		setNice(0)
		return "normal"
	}
	return "raised"
}

func restorePriority() { setNice(0) }

func setNice(n int) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	var first error
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, n); err != nil && first == nil {
			first = err
		}
	}
	return first
}

var tpsLine = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// pgbench measures `pgbench -S` (select-only, prepared) at c clients on the
// same cluster, in its own database.
func pgbench(ctx context.Context, adminURL string, c int, d time.Duration, logf func(string, ...any)) result {
	r := result{Scenario: "pgbench -S (prepared)", Concurrency: c}
	dbURL := strings.Replace(adminURL, "/postgres?", "/pgbench?", 1)
	if _, err := exec.LookPath("pgbench"); err != nil {
		r.FirstError = "pgbench not installed"
		return r
	}
	initOnce.Do(func() {
		exec.CommandContext(ctx, "psql", adminURL, "-qc", "DROP DATABASE IF EXISTS pgbench").Run()
		if out, err := exec.CommandContext(ctx, "psql", adminURL, "-qc", "CREATE DATABASE pgbench").CombinedOutput(); err != nil {
			logf("pgbench: create database: %v %s", err, out)
		}
		if out, err := exec.CommandContext(ctx, "pgbench", "-i", "-q", "-s", "10", dbURL).CombinedOutput(); err != nil {
			logf("pgbench -i: %v %s", err, out)
		}
	})
	secs := max(1, int(d.Seconds()))
	out, err := exec.CommandContext(ctx, "pgbench", "-S", "-M", "prepared", "-c", strconv.Itoa(c),
		"-j", "2", "-T", strconv.Itoa(secs), dbURL).CombinedOutput()
	if err != nil {
		r.FirstError = fmt.Sprintf("%v: %.200s", err, out)
		return r
	}
	if m := tpsLine.FindStringSubmatch(string(out)); m != nil {
		r.RPS, _ = strconv.ParseFloat(m[1], 64)
	}
	return r
}

var initOnce sync.Once
