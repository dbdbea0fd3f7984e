package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/testkit"
)

// instance is a connectd started through run, as main starts it.
type instance struct {
	base, internal string
	logs           *testkit.LogBuffer
	stop           context.CancelFunc
	done           chan error
}

// start runs `connectd serve` with env (plus test defaults) and waits until it
// listens.
func start(t *testing.T, env map[string]string) *instance {
	t.Helper()
	full := map[string]string{
		"CONNECTD_DEV":            "true",
		"CONNECTD_PUBLIC_URL":     "http://127.0.0.1:8080",
		"CONNECTD_ADDR":           "127.0.0.1:0",
		"CONNECTD_INTERNAL_ADDR":  "127.0.0.1:0",
		"CONNECTD_SHUTDOWN_GRACE": "5s",
	}
	for k, v := range env {
		full[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{logs: &testkit.LogBuffer{}, stop: cancel, done: make(chan error, 1)}
	go func() { in.done <- run(ctx, []string{"serve"}, envOf(full), io.Discard, in.logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-in.done:
		case <-time.After(10 * time.Second):
			t.Error("connectd did not stop")
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(in.logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "listening" {
				in.base = "http://" + m["addr"].(string)
				in.internal = "http://" + m["internal_addr"].(string)
				return in
			}
		}
		select {
		case err := <-in.done:
			t.Fatalf("connectd exited: %v\n%s", err, in.logs.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("connectd did not start:\n%s", in.logs.String())
	return nil
}

func getJSON(t *testing.T, u string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("GET %s: body not JSON: %v", u, err)
	}
	return resp.StatusCode, m
}

func TestServeAutoMigrateAndProbes(t *testing.T) {
	t.Parallel()
	in := start(t, map[string]string{
		"CONNECTD_DATABASE_URL": pgtest.EmptyURL(t),
		"CONNECTD_AUTO_MIGRATE": "true",
	})
	for _, base := range []string{in.base, in.internal} {
		if code, m := getJSON(t, base+"/healthz"); code != 200 || m["status"] != "ok" {
			t.Fatalf("%s/healthz: %d %v", base, code, m)
		}
		if code, m := getJSON(t, base+"/readyz"); code != 200 || m["status"] != "ready" {
			t.Fatalf("%s/readyz: %d %v", base, code, m)
		}
	}
	if code, m := getJSON(t, in.base+"/no/such/thing"); code != 404 || m["error"] != "not_found" {
		t.Fatalf("unknown path: %d %v", code, m)
	}
	in.stop()
	if err := <-in.done; err != nil {
		t.Fatalf("run returned %v after a clean stop", err)
	}
	in.done <- nil // let Cleanup see it stopped
}

func TestReadyzSchemaOutdatedWithoutMigrations(t *testing.T) {
	t.Parallel()
	in := start(t, map[string]string{"CONNECTD_DATABASE_URL": pgtest.EmptyURL(t)})
	code, m := getJSON(t, in.base+"/readyz")
	if code != 503 || m["reason"] != "schema_outdated" {
		t.Fatalf("readyz on an unmigrated database: %d %v", code, m)
	}
}

// cutProxy forwards TCP to a backend until cut; while cut it drops every
// connection, as an unreachable database would look to connectd.
type cutProxy struct {
	ln      net.Listener
	backend string
	mu      sync.Mutex
	cut     bool
	conns   map[net.Conn]struct{}
}

func newCutProxy(t *testing.T, backend string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, backend: backend, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go p.serve()
	return p
}

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			c.Close()
			continue
		}
		b, err := net.Dial("tcp", p.backend)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[b] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go func() { io.Copy(b, c); b.Close() }()
		go func() { io.Copy(c, b); c.Close() }()
	}
}

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
		p.conns = map[net.Conn]struct{}{}
	}
}

func TestReadyzFollowsDatabaseReachability(t *testing.T) {
	t.Parallel()
	dbURL, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, dbURL.Host)
	dbURL.Host = proxy.ln.Addr().String()
	in := start(t, map[string]string{"CONNECTD_DATABASE_URL": dbURL.String()})

	if code, m := getJSON(t, in.base+"/readyz"); code != 200 {
		t.Fatalf("before the cut: %d %v", code, m)
	}
	proxy.setCut(true)
	code, m := getJSON(t, in.base+"/readyz")
	if code != 503 || m["reason"] != "database_unreachable" {
		t.Fatalf("database cut: %d %v", code, m)
	}
	if code, _ := getJSON(t, in.base+"/healthz"); code != 200 {
		t.Fatalf("healthz must not depend on the database: %d", code)
	}
	proxy.setCut(false)
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, m = getJSON(t, in.base+"/readyz")
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz did not recover: %d %v", code, m)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(in.logs.String(), dbURL.User.String()) {
		t.Fatal("database credentials appear in the logs")
	}
}

func TestGracefulShutdownFinishesInFlightRequest(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		io.WriteString(w, "finished")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveHTTP(ctx, newHTTPServer(HTTPConfig{WriteTimeout: time.Minute}, h, logger), ln, 10*time.Second, logger)
	}()

	type result struct {
		body string
		err  error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/slow")
		if err != nil {
			res <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		res <- result{string(b), err}
	}()
	<-started
	cancel() // SIGTERM arrives while the request is in flight.
	time.Sleep(100 * time.Millisecond)
	// New connections are refused once shutdown began.
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Fatal("listener still accepts connections during shutdown")
	}
	select {
	case err := <-done:
		t.Fatalf("serveHTTP returned %v before the in-flight request finished", err)
	default:
	}
	close(release)
	r := <-res
	if r.err != nil || r.body != "finished" {
		t.Fatalf("in-flight request: %q, %v", r.body, r.err)
	}
	if err := <-done; err != nil {
		t.Fatalf("serveHTTP: %v", err)
	}
}

func TestGracefulShutdownGivesUpAfterGrace(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	defer close(block)
	started := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { close(started); <-block })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveHTTP(ctx, newHTTPServer(HTTPConfig{}, h, logger), ln, 200*time.Millisecond, logger)
	}()
	go http.Get("http://" + ln.Addr().String())
	<-started
	cancel()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "did not finish") {
		t.Fatalf("got %v, want a grace-exceeded error", err)
	}
}

func TestRunUsageAndConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		env  map[string]string
		code int
		want string
	}{
		{nil, nil, 2, "no command"},
		{[]string{"frobnicate"}, nil, 2, "unknown command"},
		{[]string{"serve"}, map[string]string{"CONNECTD_PUBLIC_URL": "https://x.test"}, 2, "CONNECTD_DATABASE_URL: is required"},
		{[]string{"migrate"}, nil, 2, "usage"},
		{[]string{"migrate", "sideways"}, map[string]string{"CONNECTD_DATABASE_URL": "postgres://127.0.0.1:1/x"}, 2, "unknown migrate command"},
		{[]string{"migrate", "create", "Bad Name"}, nil, 2, "usage"},
	}
	for _, tt := range tests {
		err := run(context.Background(), tt.args, envOf(tt.env), io.Discard, io.Discard)
		if err == nil || exitCode(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("run %v: %v (exit %d), want exit %d and %q", tt.args, err, exitCode(err), tt.code, tt.want)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"version"}, envOf(nil), &out, io.Discard); err != nil ||
		!strings.HasPrefix(out.String(), "connectd ") {
		t.Fatalf("version: %q %v", out.String(), err)
	}
}

func TestMigrateCommands(t *testing.T) {
	t.Parallel()
	env := envOf(map[string]string{"CONNECTD_DATABASE_URL": pgtest.EmptyURL(t)})
	ctx := context.Background()
	var out bytes.Buffer
	for _, step := range [][]string{{"up"}, {"status"}, {"down"}, {"up"}} {
		out.Reset()
		if err := run(ctx, append([]string{"migrate"}, step...), env, &out, io.Discard); err != nil {
			t.Fatalf("migrate %v: %v", step, err)
		}
		if step[0] == "status" && !strings.Contains(out.String(), "applied") {
			t.Fatalf("status output:\n%s", out.String())
		}
	}
	// A wrong password must not be echoed back.
	bad := envOf(map[string]string{"CONNECTD_DATABASE_URL": "postgres://u:sekr1t-pw@127.0.0.1:1/x?connect_timeout=1"})
	err := run(ctx, []string{"migrate", "up"}, bad, io.Discard, io.Discard)
	if err == nil || strings.Contains(err.Error(), "sekr1t-pw") {
		t.Fatalf("unreachable database: %v", err)
	}
	if errors.Is(err, context.Canceled) {
		t.Fatal("unexpected cancel")
	}
}

// TestServeSaysWhichVariableWhenTheDatabaseIsUnreachable (issue 38 item
// 6): serve started without a database it can reach says so at once, in
// one line naming CONNECTD_DATABASE_URL, where it points and why — never
// the password — and serves on (/readyz 503) for the database to come.
func TestServeSaysWhichVariableWhenTheDatabaseIsUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	const password = "pw-not-for-logs-7d1c"
	in := start(t, map[string]string{"CONNECTD_DATABASE_URL": "postgres://ops:" + password + "@" + addr + "/connectd"})
	var line map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for line == nil && time.Now().Before(deadline) {
		for _, l := range strings.Split(in.logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && strings.HasPrefix(fmt.Sprint(m["msg"]), "database unreachable at start") {
				line = m
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if line == nil || !strings.Contains(line["msg"].(string), "CONNECTD_DATABASE_URL") || line["host"] != addr ||
		line["database"] != "connectd" || line["user"] != "ops" || !strings.Contains(fmt.Sprint(line["error"]), "refused") {
		t.Fatalf("no line naming the variable, where and why: %v\n%s", line, in.logs.String())
	}
	if strings.Contains(in.logs.String(), password) {
		t.Fatal("the database password is in the logs")
	}
	if code, m := getJSON(t, in.base+"/readyz"); code != 503 || m["reason"] != "database_unreachable" {
		t.Fatalf("readyz without a database: %d %v", code, m)
	}
}
