package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// profiler saves pprof profiles of one replica while a scenario runs, so the
// report can say where the time of the hot path goes, measured under the
// same load as the table (docs/performance.md).
type profiler struct {
	dir    string // where to keep the profiles; "" keeps them only for the summary
	binary string // the connectd binary, for symbols
	logf   func(string, ...any)
	// frames are the summary's frames (nil: profileFrames, the token
	// lookup's).
	frames []struct{ frame, what string }
}

// profileLine is one frame of the CPU profile summary: its inclusive share
// of the replica's CPU time.
type profileLine struct {
	Frame string  `json:"frame"`
	What  string  `json:"what"`
	Cum   float64 `json:"cum_percent"`
}

// profileFrames are the frames the summary reports, in order: the HTTP
// server, the middleware, the handler and what it calls, and the runtime.
var profileFrames = []struct{ frame, what string }{
	{"net/http.(*conn).serve", "the whole HTTP server goroutine (everything below)"},
	{"net/http.(*conn).readRequest", "reading and parsing requests"},
	{"net/http.(*response).finishRequest", "flushing responses (write syscalls)"},
	{"internal/web.Public.RequestContext", "internal/web chain (web.Public): request id, access log and metrics, recover, security headers, cross-origin, rate limits, and the handler"},
	{"internal/web.(*Limiter).Allow", "rate limiting"},
	{"internal/api.(*Server).token", "the token handler"},
	{"internal/api.(*Server).authenticate", "client key and user token"},
	{"internal/mcpauth.(*Verifier).VerifyAccessToken", "user token (verified-token cache)"},
	{"internal/mcpauth.(*Clients).Authenticate", "client key (client-key cache)"},
	{"internal/connect.(*Server).consent", "consent (consent cache)"},
	{"internal/vault.(*Store).Token", "credential (sealed-credential cache, AES-GCM open)"},
	{"internal/api.(*Server).sampleRead", "sampled audit"},
	{"internal/web.WriteJSON", "JSON response (encoding, headers, write)"},
	{"jackc/pgx/v5.(*Conn).Query", "database queries"},
	{"runtime.gcBgMarkWorker", "garbage collector"},
	{"runtime.mallocgc", "allocation"},
}

// proxyProfileFrames are the frames of the proxied 1 KB GET's summary:
// the same server and middleware, then the proxy's own path, its outbound
// exchange and the runtime.
var proxyProfileFrames = []struct{ frame, what string }{
	{"net/http.(*conn).serve", "the whole HTTP server goroutine (the caller's side, everything below)"},
	{"net/http.(*conn).readRequest", "reading and parsing the caller's requests"},
	{"net/http.(*response).finishRequest", "flushing the answers to the caller (write syscalls)"},
	{"internal/web.Public.RequestContext", "internal/web chain (web.Public) and the handler"},
	{"internal/api.(*Server).proxyCall", "the proxy handler"},
	{"internal/api.(*Server).authenticate", "client key and user token"},
	{"internal/api.(*Server).release", "the release decision (consent, credential)"},
	{"internal/api.(*Server).whileAllowed", "the watch for the client being disabled"},
	{"internal/proxy.(*Forwarder).Forward", "the forwarder (rules, bulkhead, deadline, reverse proxy)"},
	{"internal/proxy.Clean", "the path rule"},
	{"net/http/httputil.(*ReverseProxy).ServeHTTP", "httputil.ReverseProxy (request copy, headers, body copy)"},
	{"net/http.(*Transport).roundTrip", "the outbound exchange, as the handler waits for it"},
	{"net/http.(*persistConn).writeLoop", "writing outbound requests (write syscalls)"},
	{"net/http.(*persistConn).readLoop", "reading the provider's answers"},
	{"internal/api.(*Server).sampleProxy", "sampled audit"},
	{"runtime.gcBgMarkWorker", "garbage collector"},
	{"runtime.mallocgc", "allocation"},
}

// during runs f while capturing a CPU profile and the allocations of p over
// d (after a warm-up of d/4, as measure does) and, when they are in, fills
// summary from the CPU profile. A nil profiler just runs f.
func (pr *profiler) during(ctx context.Context, name string, p *process, d time.Duration, f func(), summary *[]profileLine) {
	if pr == nil || p.internal == "" {
		f()
		return
	}
	dir := pr.dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "connectd-bench-profile-")
		if err != nil {
			f()
			return
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		pr.logf("profile: %v", err)
		f()
		return
	}
	cpu := filepath.Join(dir, name+"-cpu.pprof")
	secs := max(1, int(d.Seconds()))
	var wg sync.WaitGroup
	for kind, file := range map[string]string{"profile": cpu, "allocs": filepath.Join(dir, name+"-allocs.pprof")} {
		wg.Go(func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d / 4): // measure's warm-up
			}
			if err := fetch(ctx, fmt.Sprintf("%s/debug/pprof/%s?seconds=%d", p.internal, kind, secs), file); err != nil {
				pr.logf("profile %s: %v", kind, err)
			}
		})
	}
	f()
	wg.Wait()
	// What the replica holds after the scenario (in-use heap).
	if err := fetch(ctx, p.internal+"/debug/pprof/heap", filepath.Join(dir, name+"-heap.pprof")); err != nil {
		pr.logf("profile heap: %v", err)
	}
	frames := profileFrames
	if pr.frames != nil {
		frames = pr.frames
	}
	lines, err := profileSummary(ctx, pr.binary, cpu, frames)
	if err != nil {
		pr.logf("profile summary: %v", err)
		return
	}
	*summary = lines
	if pr.dir != "" {
		pr.logf("profiles in %s (go tool pprof %s %s)", pr.dir, pr.binary, cpu)
	}
}

func fetch(ctx context.Context, u, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// profileSummary reads the inclusive share of each of profileFrames from
// `go tool pprof -top -cum`.
func profileSummary(ctx context.Context, binary, cpuProfile string, frames []struct{ frame, what string }) ([]profileLine, error) {
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-cum", "-nodecount=1000", binary, cpuProfile).Output()
	if err != nil {
		return nil, err
	}
	cum := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.HasSuffix(f[4], "%") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(f[4], "%"), 64)
		if err != nil {
			continue
		}
		name := strings.Join(f[5:], " ")
		for _, pf := range frames {
			if strings.Contains(name, pf.frame) && v > cum[pf.frame] {
				cum[pf.frame] = v
			}
		}
	}
	var lines []profileLine
	for _, pf := range frames {
		lines = append(lines, profileLine{Frame: pf.frame, What: pf.what, Cum: cum[pf.frame]})
	}
	return lines, nil
}

// memory logs replica p's memory as its /metrics reports it.
func memory(p *process, logf func(string, ...any)) {
	resp, err := http.Get(p.internal + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var parts []string
	for sc.Scan() {
		l := sc.Text()
		for _, name := range []string{"go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes",
			"go_memstats_stack_inuse_bytes", "go_memstats_sys_bytes", "process_resident_memory_bytes", "go_goroutines", "go_gc_gogc_percent", "go_gc_gomemlimit_bytes"} {
			if v, ok := strings.CutPrefix(l, name+" "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				if strings.HasSuffix(name, "bytes") {
					parts = append(parts, fmt.Sprintf("%s=%.1fMB", strings.TrimPrefix(name, "go_memstats_"), f/1e6))
				} else {
					parts = append(parts, fmt.Sprintf("%s=%.0f", name, f))
				}
			}
		}
	}
	logf("memory of %s: %s", p.base, strings.Join(parts, " "))
}
