package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/vault"
)

// options are the harness's knobs (flags, some with environment defaults).
type options struct {
	binary   string
	replicas int
	users    int
	levels   []int
	duration time.Duration
	openRate int
	jsonOut  string
	docOut   string
	skip     map[string]bool
	// profile, when set, is a directory: during the token scenario at
	// profileLevel the harness saves a CPU and an allocation profile of
	// replica 0 there (go tool pprof bin/connectd DIR/token-cpu.pprof).
	profile      string
	profileLevel int
}

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("connectd-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{skip: map[string]bool{}}
	replicas, _ := strconv.Atoi(getenv("REPLICAS"))
	if replicas <= 0 {
		replicas = 1
	}
	fs.StringVar(&o.binary, "connectd", "bin/connectd", "connectd binary to benchmark")
	fs.IntVar(&o.replicas, "replicas", replicas, "connectd replicas (env REPLICAS)")
	fs.IntVar(&o.users, "users", 10000, "users seeded with a connection")
	levels := fs.String("levels", "16,64,256", "concurrency levels")
	fs.DurationVar(&o.duration, "duration", 4*time.Second, "measurement time per scenario and level")
	fs.IntVar(&o.openRate, "open-rate", 5000, "offered req/s of the open-loop token scenario")
	fs.StringVar(&o.jsonOut, "json", "test-output/bench.json", "where to write the results as JSON")
	fs.StringVar(&o.docOut, "doc", "docs/performance.md", "where to write the results as Markdown ('' skips)")
	fs.StringVar(&o.profile, "profile", "", "directory for CPU and allocation profiles of replica 0 during the token scenario")
	fs.IntVar(&o.profileLevel, "profile-level", 64, "concurrency level at which -profile captures")
	skip := fs.String("skip", "", "comma-separated scenarios to skip (token,mint,status,open,flow,pgbench,trivial)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	for _, l := range strings.Split(*levels, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(l))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-levels: %q is not a positive integer", l)
		}
		o.levels = append(o.levels, n)
	}
	for _, s := range strings.Split(*skip, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.skip[s] = true
		}
	}
	return o, nil
}

// benchResource is the MCP server resource the seeded client serves.
const benchResource = "https://bench.mcp.example/"

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "trivial" {
		return trivialServer(ctx, args[1:])
	}
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	dbURL := getenv("CONNECTD_DATABASE_URL")
	adminURL := getenv("CONNECTD_TEST_DATABASE_URL")
	if dbURL == "" || adminURL == "" {
		return errors.New("CONNECTD_DATABASE_URL and CONNECTD_TEST_DATABASE_URL are not set: run `make bench`")
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", a...) }
	started := time.Now()

	// The trusted issuer: a dev IdP served by this process, as an MCP
	// authorization server would be.
	idpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	issuer := "http://" + idpLn.Addr().String()
	idp, err := devidp.New(devidp.Config{Issuer: issuer, AccessTokenTTL: 24 * time.Hour})
	if err != nil {
		return err
	}
	idpSrv := &http.Server{Handler: idp.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go idpSrv.Serve(idpLn)
	defer idpSrv.Close()

	logf("migrating and seeding %d users", o.users)
	if out, err := exec.CommandContext(ctx, o.binary, "migrate", "up").CombinedOutput(); err != nil {
		return fmt.Errorf("migrate: %v: %s", err, out)
	}
	keyLine, err := vault.GenerateKey(1)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	clientKey, err := seed(ctx, pool, keyLine, issuer, o.users)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	tokens := make([]string, o.users)
	for i := range tokens {
		if tokens[i], err = idp.AccessToken(userName(i), benchResource); err != nil {
			return err
		}
	}

	provFile := filepath.Join(os.TempDir(), fmt.Sprintf("connectd-bench-providers-%d.json", os.Getpid()))
	if err := os.WriteFile(provFile, []byte(benchProviders), 0o600); err != nil {
		return err
	}
	defer os.Remove(provFile)
	issuers, _ := json.Marshal([]map[string]any{{"id": "bench", "issuer": issuer, "login": false}})
	env := []string{
		"CONNECTD_DEV=true",
		"CONNECTD_DATABASE_URL=" + dbURL,
		"CONNECTD_VAULT_KEYS=" + keyLine,
		"CONNECTD_PROVIDERS_FILE=" + provFile,
		"CONNECTD_ISSUERS=" + string(issuers),
		"CONNECTD_EGRESS_ALLOW_HOSTS=" + idpLn.Addr().String(),
		"CONNECTD_LOG_LEVEL=error",
		// The rate limiters stay in the path (their cost is part of every
		// request) with budgets the load never reaches.
		"CONNECTD_RATE_API=" + unlimited, "CONNECTD_RATE_API_PER_IP=" + unlimited, "CONNECTD_RATE_BROWSER=" + unlimited,
		"CONNECTD_RATE_LOGIN=" + unlimited, "CONNECTD_RATE_MINT=" + unlimited,
		"CONNECTD_DB_MAX_CONNS=" + strconv.Itoa(max(8, 64/o.replicas)),
	}
	var reps []*process
	defer func() {
		for _, p := range reps {
			p.stop()
		}
	}()
	for i := range o.replicas {
		p, err := startReplica(ctx, o.binary, env, i)
		if err != nil {
			return fmt.Errorf("replica %d: %w", i, err)
		}
		reps = append(reps, p)
	}
	logf("%d replica(s) ready", len(reps))
	triv, err := startTrivial(ctx)
	if err != nil {
		return fmt.Errorf("trivial server: %w", err)
	}
	defer triv.stop()

	res := &results{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Replicas: o.replicas,
		Users: o.users, Duration: o.duration.String()}
	lg := newLoad(clientKey, tokens, reps)
	lg.trivialBase = triv.base
	for _, c := range o.levels {
		if !o.skip["trivial"] {
			res.add(measure(ctx, "trivial Go handler", c, o.duration, []*process{triv}, lg.trivial))
		}
		if !o.skip["pgbench"] {
			res.add(pgbench(ctx, adminURL, c, o.duration, logf))
		}
		if !o.skip["token"] {
			var pr *profiler
			if o.profile != "" && c == o.profileLevel {
				pr = &profiler{dir: o.profile, logf: logf}
			}
			pr.during(ctx, fmt.Sprintf("token-%d", c), reps[0], o.duration, func() {
				res.add(measure(ctx, "token lookup (client key + ES256 user token)", c, o.duration, reps, lg.token))
			})
		}
		if !o.skip["status"] {
			res.add(measure(ctx, "elicitation status", c, o.duration, reps, lg.status))
		}
		if !o.skip["mint"] {
			res.add(measure(ctx, "mint", c, o.duration, reps, lg.mint))
		}
		logf("level %d done", c)
	}
	if !o.skip["open"] {
		res.add(openLoop(ctx, "token lookup, open loop (Poisson)", o.openRate, o.duration, reps, lg.token))
	}
	res.Elapsed = time.Since(started).Round(time.Second).String()
	res.ratios()
	res.print(stdout)
	if err := res.write(o.jsonOut, o.docOut); err != nil {
		return err
	}
	logf("done in %s", res.Elapsed)
	return nil
}

// unlimited is the largest budget CONNECTD_RATE_* accept.
const unlimited = "1000000/1s"

func userName(i int) string { return fmt.Sprintf("user-%05d", i) }

// benchProviders is the catalog of the run: one OAuth provider whose
// endpoints are never called (seeded tokens do not expire during the run).
const benchProviders = `{"providers":[{"name":"bench","kind":"oauth2","display_name":"Bench",
 "authorize_url":"http://127.0.0.1:9/authorize","token_url":"http://127.0.0.1:9/token",
 "client_id":"bench","client_secret_env":"PATH"}]}`

// seed registers the bench client and gives every user a connection the
// client holds consent for. It returns the client key.
func seed(ctx context.Context, pool *pgxpool.Pool, keyLine, issuer string, users int) (string, error) {
	keys, err := vault.ParseKeyring(keyLine)
	if err != nil {
		return "", err
	}
	store, err := vault.New(vault.Config{Pool: pool, Keyring: keys})
	if err != nil {
		return "", err
	}
	clients := mcpauth.NewClients(mcpauth.ClientsConfig{Pool: pool, AllowHTTP: true, Logger: slog.New(slog.DiscardHandler)})
	c, key, err := clients.Create(ctx, "bench", []string{benchResource}, []string{"bench"})
	if err != nil {
		return "", err
	}
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < users; i += 8 {
				cred := vault.Credential{AccessToken: fmt.Sprintf("bench-access-%d-%032x", i, i), RefreshToken: "bench-refresh",
					TokenType: "Bearer", Expiry: time.Now().Add(30 * 24 * time.Hour), Scopes: []string{"read"}}
				if _, err := store.Put(ctx, vault.UserRef{Issuer: issuer, Subject: userName(i)}, "bench", cred); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return "", err
	}
	// Consents belong to internal/connect; the harness writes them directly
	// as the consent page would have.
	_, err = pool.Exec(ctx, `INSERT INTO consents (issuer, subject, client_id, provider, scopes, granted_at, updated_at)
		SELECT $1, format('user-%s', lpad(g::text, 5, '0')), $2, 'bench', '{read}', now(), now()
		FROM generate_series(0, $3 - 1) AS g ON CONFLICT DO NOTHING`, issuer, c.ID, users)
	return key, err
}

// process is a child process under measurement.
type process struct {
	cmd      *exec.Cmd
	base     string
	internal string // operators' listener (pprof, metrics); "" for the trivial server
	pid      int
}

func (p *process) stop() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
		}
	}
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func startReplica(ctx context.Context, binary string, env []string, i int) (*process, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	iaddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, binary, "serve")
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, "CONNECTD_ADDR="+addr, "CONNECTD_INTERNAL_ADDR="+iaddr, "CONNECTD_PUBLIC_URL=http://"+addr)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, base: "http://" + addr, internal: "http://" + iaddr, pid: cmd.Process.Pid}
	if err := waitReady(ctx, p.base+"/readyz"); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

func startTrivial(ctx context.Context) (*process, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, "trivial", addr)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, base: "http://" + addr, pid: cmd.Process.Pid}
	if err := waitReady(ctx, p.base+"/"); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

func waitReady(ctx context.Context, u string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(u)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after 30s", u)
}

// trivialServer answers every request with the same 1 KB JSON document: the
// cost of Go's HTTP stack alone.
func trivialServer(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: connectd-bench trivial ADDR")
	}
	body := []byte(`{"provider":"bench","kind":"oauth2","token_type":"Bearer","access_token":"` +
		strings.Repeat("x", 900) + `","scopes":["read"]}`)
	srv := &http.Server{Addr: args[0], ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
		})}
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				model = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
		if len(f) >= 2 {
			if kb, err := strconv.Atoi(f[1]); err == nil {
				mem = fmt.Sprintf("%.0f GiB", float64(kb)/1024/1024)
			}
		}
	}
	return fmt.Sprintf("%d cores (%s), %s RAM, %s %s/%s, load generator on the same cores",
		runtime.NumCPU(), model, mem, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
