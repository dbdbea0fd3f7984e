package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
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
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/vault"
)

// options are the harness's knobs (flags, some with environment defaults).
type options struct {
	binary   string
	baseline string // -baseline-connectd: measured beside tracing off ("" none)
	// tracingRounds is how many passes the tracing scenario makes over its
	// variants at each level, alternating in direction.
	tracingRounds int
	replicas      int
	users         int
	orgs          int // the orgs scenario's organizations
	orgUsers      int // and users in each
	levels        []int
	duration      time.Duration
	openRate      int
	jsonOut       string
	docOut        string
	skip          map[string]bool
	// During the token scenario at profileLevel the harness profiles replica
	// 0 (the report summarises the CPU profile); profile, when set, is a
	// directory to keep the profiles in (go tool pprof bin/connectd
	// DIR/token-64-cpu.pprof).
	profile      string
	profileLevel int
	selfProfile  string // CPU profile of the harness itself (load generator, IdP, provider)
	verbose      bool
	extraEnv     []string // -env: more variables for every replica
	memLimit     string   // GOMEMLIMIT of every replica ("" none)
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
	fs.IntVar(&o.tracingRounds, "tracing-rounds", 2, "passes of the tracing scenario over its variants at each level (the report shows medians)")
	fs.StringVar(&o.baseline, "baseline-connectd", "", "another connectd binary (built before a change) whose token lookup the tracing scenario measures beside tracing off")
	fs.IntVar(&o.replicas, "replicas", replicas, "connectd replicas (env REPLICAS)")
	fs.IntVar(&o.users, "users", 10000, "users seeded with a connection")
	fs.IntVar(&o.orgs, "orgs", 100, "organizations of the orgs scenario, each with its own client")
	fs.IntVar(&o.orgUsers, "org-users", 100, "users with a connection in each organization of the orgs scenario")
	levels := fs.String("levels", "16,64,256", "concurrency levels")
	fs.DurationVar(&o.duration, "duration", 4*time.Second, "measurement time per scenario and level")
	fs.IntVar(&o.openRate, "open-rate", 5000, "offered req/s of the open-loop token scenario")
	fs.StringVar(&o.jsonOut, "json", "test-output/bench.json", "where to write the results as JSON")
	fs.StringVar(&o.docOut, "doc", "docs/performance.md", "where to write the results as Markdown ('' skips)")
	fs.StringVar(&o.profile, "profile", "", "keep the CPU and allocation profiles of replica 0 during the token scenario and the proxied 1 KB GET (at -profile-level) in this directory")
	fs.IntVar(&o.profileLevel, "profile-level", 64, "concurrency level of the token scenario that is profiled")
	fs.StringVar(&o.selfProfile, "self-profile", "", "write a CPU profile of the harness itself (load generator, IdP, fake provider) to this file")
	fs.BoolVar(&o.verbose, "v", false, "log replica 0's memory after each token scenario")
	fs.StringVar(&o.memLimit, "memlimit", "46MiB", "GOMEMLIMIT of every replica, as docs/operations.md recommends for a 64 MB budget ('' for none)")
	fs.Func("env", "KEY=VALUE for every connectd replica, e.g. GOMEMLIMIT=40MiB (repeatable)", func(v string) error {
		if !strings.Contains(v, "=") {
			return errors.New("want KEY=VALUE")
		}
		o.extraEnv = append(o.extraEnv, v)
		return nil
	})
	skip := fs.String("skip", "", "comma-separated scenarios to skip (token,mint,status,open,flow,nocache,pgbench,trivial,"+
		"proxy: the 1 KB provider GET direct, through a bare reverse proxy and through connectd's, proxy256: the 256 KB one through the proxy, "+
		"tracing: the token lookup with tracing off, on at 1 % and on at 100 %, alternating, "+
		"orgs: the token lookup over -orgs organizations of -org-users users, each with its own client)")
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
	if o.orgs <= 0 || o.orgUsers <= 0 {
		o.skip["orgs"] = true
	}
	return o, nil
}

// benchResource is the MCP server resource the seeded client serves.
const benchResource = "https://bench.mcp.example/"

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "trivial" {
		return trivialServer(ctx, args[1:], stdout)
	}
	if len(args) > 0 && args[0] == "upstream" {
		return upstreamServer(ctx, args[1:], stdout)
	}
	if len(args) > 0 && args[0] == "bareproxy" {
		return bareServer(ctx, args[1:], stdout)
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
	if o.selfProfile != "" {
		f, err := os.Create(o.selfProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	started := time.Now()

	// Every replica's addresses are chosen first, and held until it starts:
	// the issuer must know their login callbacks.
	main, off := make([]*process, o.replicas), make([]*process, o.replicas)
	var callbacks []string
	for _, set := range [][]*process{main, off} {
		for i := range set {
			if set[i], err = newProcess(); err != nil {
				return err
			}
			callbacks = append(callbacks, set[i].base+"/login/callback")
		}
	}

	// The trusted issuer, where MCP user tokens come from and browsers sign
	// in (flow users added to its picker), and the third-party provider of
	// the browser flows: both served by this process, as an MCP
	// authorization server and GitHub would be.
	for i := range flowUsers {
		devidp.Users = append(devidp.Users, devidp.User{Subject: flowUser(i), Name: flowUser(i)})
	}
	idpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	issuer := "http://" + idpLn.Addr().String()
	idpSecret := randomSecret()
	idp, err := devidp.New(devidp.Config{Issuer: issuer, AccessTokenTTL: 24 * time.Hour,
		Clients: []devidp.Client{{ID: "connectd", Secret: idpSecret, RedirectURIs: callbacks}}})
	if err != nil {
		return err
	}
	idpSrv := &http.Server{Handler: idp.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go idpSrv.Serve(idpLn)
	defer idpSrv.Close()
	provLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	flowSecret := randomSecret()
	fake, fakeHandler := providertest.NewHandler("http://"+provLn.Addr().String(),
		providertest.Options{RequirePKCE: true, ClientSecret: flowSecret})
	provSrv := &http.Server{Handler: fakeHandler, ReadHeaderTimeout: 5 * time.Second}
	go provSrv.Serve(provLn)
	defer provSrv.Close()
	// The provider's API behind connectd's proxy (issue 25): a process of
	// its own, as the trivial handler is, so that the load generator's CPU
	// is not its CPU; it runs until the end.
	upstream, err := startHelper(ctx, "upstream")
	if err != nil {
		return fmt.Errorf("upstream server: %w", err)
	}
	defer upstream.stop()
	// The bare reverse proxy in front of it (the proxy's in-run bound).
	bareProc, err := startHelper(ctx, "bareproxy", upstream.base)
	if err != nil {
		return fmt.Errorf("bare reverse proxy: %w", err)
	}
	defer bareProc.stop()

	logf("migrating and seeding %d users", o.users)
	if out, err := exec.CommandContext(ctx, o.binary, "migrate", "up").CombinedOutput(); err != nil {
		return fmt.Errorf("migrate: %v: %s", err, out)
	}
	keyLine, err := keyring.GenerateKey(1)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	seeding := time.Now()
	clientKey, err := seed(ctx, pool, keyLine, issuer, o.users)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	logf("seeded %d users in %s", o.users, time.Since(seeding).Round(time.Millisecond))
	// quiet vacuums and checkpoints connectd's database. Like pgbench, which
	// vacuums its tables before it measures, every connectd measurement that
	// follows writes starts on a quiet database, so that earlier rows do not
	// bring autovacuum and the checkpointer into its window.
	quiet := func() {
		if _, err := pool.Exec(ctx, "VACUUM (ANALYZE)"); err != nil {
			logf("vacuum: %v", err)
		}
		if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
			logf("checkpoint: %v", err)
		}
	}
	var orgs *orgSeed
	if !o.skip["orgs"] {
		if orgs, err = seedOrgs(ctx, pool, keyLine, issuer, idp, o.orgs, o.orgUsers); err != nil {
			return fmt.Errorf("seed organizations: %w", err)
		}
		logf("seeded %d organizations × %d users in %s", o.orgs, o.orgUsers, orgs.took.Round(time.Millisecond))
	}
	tokens := make([]string, o.users)
	for i := range tokens {
		if tokens[i], err = idp.AccessToken(userName(i), benchResource); err != nil {
			return err
		}
	}
	flowTokens := make([]string, flowUsers)
	for i := range flowTokens {
		if flowTokens[i], err = idp.AccessToken(flowUser(i), benchResource); err != nil {
			return err
		}
	}

	provFile := filepath.Join(os.TempDir(), fmt.Sprintf("connectd-bench-providers-%d.json", os.Getpid()))
	providers, _ := json.Marshal(map[string]any{"providers": []any{benchProvider(upstream.base), fake.ProviderConfig("flow", "BENCH_FLOW_SECRET")}})
	if err := os.WriteFile(provFile, providers, 0o600); err != nil {
		return err
	}
	defer os.Remove(provFile)
	issuers, _ := json.Marshal([]map[string]any{{"id": "bench", "issuer": issuer, "login": true,
		"client_id": "connectd", "client_secret_env": "BENCH_IDP_SECRET"}})
	env := []string{
		"CONNECTD_DEV=true",
		"CONNECTD_DATABASE_URL=" + dbURL,
		"CONNECTD_VAULT_KEYS=" + keyLine,
		"CONNECTD_SESSION_KEYS=" + randomSecret64(),
		"CONNECTD_PROVIDERS_FILE=" + provFile,
		"CONNECTD_ISSUERS=" + string(issuers),
		"BENCH_IDP_SECRET=" + idpSecret,
		"BENCH_FLOW_SECRET=" + flowSecret,
		"CONNECTD_EGRESS_ALLOW_HOSTS=" + idpLn.Addr().String() + "," + provLn.Addr().String() + "," + strings.TrimPrefix(upstream.base, "http://"),
		"CONNECTD_LOG_LEVEL=error",
		// The rate limiters stay in the path (their cost is part of every
		// request) with budgets the load never reaches.
		"CONNECTD_RATE_API=" + unlimited, "CONNECTD_RATE_API_PER_IP=" + unlimited, "CONNECTD_RATE_BROWSER=" + unlimited,
		"CONNECTD_RATE_LOGIN=" + unlimited, "CONNECTD_RATE_MINT=" + unlimited,
		// CONNECTD_DB_MAX_CONNS stays at its default (20): two cores do not
		// need more, and every pooled connection costs memory.
	}
	if o.memLimit != "" {
		// Deployed as docs/operations.md says: a soft memory limit that
		// keeps the process within its budget (RSS is about this plus 15-18
		// MB of mapped binary and runtime outside the limit).
		env = append(env, "GOMEMLIMIT="+o.memLimit)
	}
	env = append(env, o.extraEnv...)

	res := &results{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Replicas: o.replicas, MemLimit: o.memLimit,
		Users: o.users, Duration: o.duration.String(), OpenRate: o.openRate, ProfileLevel: o.profileLevel}
	if orgs != nil {
		res.Orgs, res.OrgUsers, res.OrgSeed = o.orgs, o.orgUsers, orgs.took.Round(time.Millisecond).String()
	}

	// 1. Baselines, on the same cluster and cores, before any connectd runs
	// (pgbench at 256 clients and connectd's pools together would pass
	// Postgres's max_connections).
	triv, err := startHelper(ctx, "trivial")
	if err != nil {
		return fmt.Errorf("trivial server: %w", err)
	}
	lg := newLoad(clientKey, tokens, nil)
	lg.trivialBase = triv.base
	if !o.skip["trivial"] {
		for _, c := range o.levels {
			res.add(measure(ctx, scenarioTrivial, c, o.duration, []*process{triv}, lg.trivial))
		}
		if !o.skip["open"] {
			// The open loop's baseline: what this machine's scheduler, the
			// load generator and Go's HTTP stack alone add to the tail.
			res.add(openLoop(ctx, scenarioTrivialOpen, o.openRate, o.duration, []*process{triv}, lg.trivial))
		}
	}
	triv.stop()
	if !o.skip["pgbench"] {
		for _, c := range o.levels {
			res.add(pgbench(ctx, adminURL, c, o.duration, logf))
		}
	}
	logf("baselines done")

	// 2. connectd as deployed, every cache on: the read path first, before
	// any scenario writes (the writes leave Postgres autovacuum work that
	// would otherwise run under the read measurements).
	quiet()
	if err := startSet(ctx, o.binary, env, main); err != nil {
		return err
	}
	defer stopSet(main)
	logf("%d replica(s) ready", len(main))
	lg = newLoad(clientKey, tokens, main)
	lg.flows = newFlows(flowTokens)
	// With -profile, the other scenarios are profiled too (kept, not
	// summarised).
	keep := func(c int) *profiler {
		if c == o.profileLevel && o.profile != "" {
			return &profiler{dir: o.profile, binary: o.binary, logf: logf}
		}
		return nil
	}
	var unused []profileLine
	if !o.skip["token"] {
		for _, c := range o.levels {
			if err := lg.prime(ctx); err != nil {
				return err
			}
			var pr *profiler
			if c == o.profileLevel {
				pr = &profiler{dir: o.profile, binary: o.binary, logf: logf}
			}
			pr.during(ctx, fmt.Sprintf("token-%d", c), main[0], o.duration, func() {
				res.add(measure(ctx, scenarioToken, c, o.duration, main, lg.token))
			}, &res.Profile)
			if o.verbose {
				memory(main[0], logf)
			}
		}
	}
	if !o.skip["open"] {
		if err := lg.prime(ctx); err != nil {
			return err
		}
		res.add(openLoop(ctx, scenarioOpen, o.openRate, o.duration, main, lg.token))
	}
	logf("read path done")

	// 2b. The token lookup across organizations (issue 34), read-only like
	// the read path, on replicas of its own: the caches of step 2's
	// replicas stay those of the one-organization users, whose figures the
	// later scenarios and earlier runs are compared with.
	if orgs != nil {
		if err := measureOrgs(ctx, o, env, orgs, res, logf); err != nil {
			return err
		}
		logf("organizations done")
	}

	// 3. The same token lookups with the credential cache off: a database
	// round trip per lookup, compared with pgbench -S.
	if !o.skip["nocache"] {
		if err := startSet(ctx, o.binary, append(env, "CONNECTD_CREDENTIAL_CACHE=false"), off); err != nil {
			return err
		}
		defer stopSet(off)
		lgOff := newLoad(clientKey, tokens, off)
		for _, c := range o.levels {
			if err := lgOff.prime(ctx); err != nil {
				return err
			}
			keep(c).during(ctx, fmt.Sprintf("nocache-%d", c), off[0], o.duration, func() {
				res.add(measure(ctx, scenarioNoCache, c, o.duration, off, lgOff.token))
			}, &unused)
		}
		stopSet(off)
		logf("credential cache off done")
	}

	// 3b. The token lookup with tracing off, on at 1 % and on at 100 %
	// sampled (exporting to the harness's OTLP sink), alternating, each on
	// replicas of its own started together: read-only, so before the writes
	// like the rest of the read path.
	if !o.skip["tracing"] {
		quiet()
		if err := measureTracing(ctx, o, env, clientKey, tokens, res, logf); err != nil {
			return err
		}
	}

	// 4. The write paths, on the replicas of step 2, each on a quiet
	// database.
	for _, c := range o.levels {
		quiet()
		if !o.skip["status"] {
			res.add(measure(ctx, "elicitation status", c, o.duration, main, lg.status))
		}
		if !o.skip["mint"] {
			quiet()
			keep(c).during(ctx, fmt.Sprintf("mint-%d", c), main[0], o.duration, func() {
				res.add(measure(ctx, scenarioMint, c, o.duration, main, lg.mint))
			}, &unused)
		}
		if !o.skip["flow"] && c <= flowUsers {
			quiet()
			keep(c).during(ctx, fmt.Sprintf("flow-%d", c), main[0], o.duration, func() {
				res.add(measure(ctx, scenarioFlow, c, o.duration, main, lg.flow))
			}, &unused)
		}
		logf("writes at %d done", c)
	}

	// 5. The provider API proxy (issue 25) on the same replicas, last, so
	// that the outbound connections it opens and closes cannot weigh on any
	// figure before it: a GET straight to the provider's API and the same
	// GET through connectd, back to back at each level, then a large answer
	// through connectd (its RSS: streamed, not buffered). Each proxied
	// measurement starts primed, every user's call made once unmeasured:
	// caches warm as for the token lookup, and the sampled proxy.call audit
	// row (one per user, client and provider an hour) already written, the
	// database quieted after those writes.
	if !o.skip["proxy"] || !o.skip["proxy256"] {
		lg.upstreamBase, lg.bareBase = upstream.base, bareProc.base
		primed := false
		prime := func() error {
			if err := lg.primeProxy(ctx); err != nil {
				return err
			}
			if !primed {
				quiet() // after the audit rows of the first priming
				primed = true
			}
			return nil
		}
		for _, c := range o.levels {
			if !o.skip["proxy"] {
				res.add(measure(ctx, scenarioDirect, c, o.duration, []*process{upstream}, lg.direct(apiSmall)))
				res.add(measure(ctx, scenarioBare, c, o.duration, []*process{bareProc}, lg.bare(apiSmall)))
				if err := prime(); err != nil {
					return err
				}
				// Profiled at the profiled level as the token lookup is
				// (summarised in the report; kept with -profile).
				var pr *profiler
				if c == o.profileLevel {
					pr = &profiler{dir: o.profile, binary: o.binary, logf: logf, frames: proxyProfileFrames}
				}
				pr.during(ctx, fmt.Sprintf("proxy-%d", c), main[0], o.duration, func() {
					res.add(measure(ctx, scenarioProxy, c, o.duration, main, lg.proxied(apiSmall)))
				}, &res.ProxyProfile)
			}
			if !o.skip["proxy256"] {
				if err := prime(); err != nil {
					return err
				}
				keep(c).during(ctx, fmt.Sprintf("proxy256-%d", c), main[0], o.duration, func() {
					res.add(measure(ctx, scenarioProxyLarge, c, o.duration, main, lg.proxied(apiLarge)))
				}, &unused)
			}
		}
		logf("proxy done")
	}
	stopSet(main)

	res.Elapsed = time.Since(started).Round(time.Second).String()
	res.ratios()
	res.tracingRatios()
	res.orgsRatios()
	res.print(stdout)
	if err := res.write(o.jsonOut, o.docOut); err != nil {
		return err
	}
	logf("done in %s", res.Elapsed)
	return nil
}

// Scenario names (the report's targets refer to them).
const (
	scenarioTrivial = "trivial Go handler"
	scenarioToken   = "token lookup (client key + ES256 user token)"
	scenarioNoCache = "token lookup, credential cache off"
	scenarioOpen    = "token lookup, open loop (Poisson)"
	// scenarioTrivialOpen is the trivial handler under the open loop's load.
	scenarioTrivialOpen = "trivial Go handler, open loop (Poisson)"
	scenarioMint        = "mint"
	scenarioFlow        = "browser flow (mint, login, consent, provider, callback, token, unlink)"
	// The provider API proxy (issue 25): the direct GET is its baseline.
	scenarioDirect = "provider GET 1 KB, direct"
	// scenarioBare is the same GET through a bare reverse proxy of the
	// standard library (bare.go): the proxy's in-run bound. Its CPU is the
	// bare proxy's own.
	scenarioBare       = "provider GET 1 KB, bare reverse proxy"
	scenarioProxy      = "provider GET 1 KB through the proxy"
	scenarioProxyLarge = "provider GET 256 KB through the proxy"
)

// apiCall is a GET of the upstream's API: its path below the API base and
// the size of the answer.
type apiCall struct {
	path string
	size int64
}

var (
	apiSmall = apiCall{"api/small", 1 << 10}
	apiLarge = apiCall{"api/large", 256 << 10}
)

// flowUsers are the dev IdP accounts the browser flows sign in as, one per
// concurrent flow (two flows of one user would unlink each other's
// connection); the flow scenario runs at levels up to this.
const flowUsers = 64

func flowUser(i int) string { return fmt.Sprintf("flow-%02d", i) }

func randomSecret() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// randomSecret64 is a session key: 64 random bytes, base64.
func randomSecret64() string {
	var b [64]byte
	_, _ = rand.Read(b[:])
	return base64.StdEncoding.EncodeToString(b[:])
}

func startSet(ctx context.Context, binary string, env []string, set []*process) error {
	var wg sync.WaitGroup
	errs := make([]error, len(set))
	for i, p := range set {
		wg.Go(func() { errs[i] = p.start(ctx, binary, env) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		stopSet(set)
		return err
	}
	return nil
}

func stopSet(set []*process) {
	for _, p := range set {
		p.stop()
	}
}

// unlimited is the largest budget CONNECTD_RATE_* accept.
const unlimited = "1000000/1s"

func userName(i int) string { return fmt.Sprintf("user-%05d", i) }

// benchProvider is the provider of the seeded connections: its OAuth
// endpoints are never called (seeded tokens do not expire during the run);
// its API, at apiBase, is the upstream server (connectd-bench upstream) the
// proxy scenarios call. The browser flows use "flow", the fake provider this
// process serves.
func benchProvider(apiBase string) map[string]any {
	return map[string]any{"name": "bench", "kind": "oauth2", "display_name": "Bench",
		"authorize_url": "http://127.0.0.1:9/authorize", "token_url": "http://127.0.0.1:9/token",
		"client_id": "bench", "client_secret_env": "PATH", "api_base_url": apiBase}
}

// benchAccessToken is the access token seeded for user i: made up here,
// issued by no server; the upstream accepts any token of this shape.
func benchAccessToken(i int) string { return fmt.Sprintf("bench-access-%d-%032x", i, i) }

// seed registers the bench client and gives every user a connection the
// client holds consent for. It returns the client key.
func seed(ctx context.Context, pool *pgxpool.Pool, keyLine, issuer string, users int) (string, error) {
	keys, err := keyring.Parse(keyLine)
	if err != nil {
		return "", err
	}
	store, err := vault.New(vault.Config{Pool: pool, Keyring: keys})
	if err != nil {
		return "", err
	}
	clients := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool, AllowHTTP: true, Logger: slog.New(slog.DiscardHandler)})
	c, key, err := clients.Create(ctx, "bench", []string{benchResource}, []string{"bench", "flow"})
	if err != nil {
		return "", err
	}
	// Request rules on the proxied provider, as an operator sets them: the
	// proxied GET is decided by them (issue 36: a call under rules that do
	// not ask costs nothing measurable). None asks: the client also reads
	// tokens, which a client with an ask rule may not.
	if err := clients.SetProxyRules(ctx, c.ID, "bench", &clientauth.ProxyRules{Rules: []string{"DELETE /admin/*",
		"POST /files/*/comments", "GET /*"}, Description: "the bench's calls"}); err != nil {
		return "", err
	}
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < users; i += 8 {
				cred := vault.Credential{AccessToken: benchAccessToken(i), RefreshToken: "bench-refresh",
					TokenType: "Bearer", Expiry: time.Now().Add(30 * 24 * time.Hour), Scopes: []string{"read"}}
				if _, err := store.Put(ctx, identity.User{Issuer: issuer, Subject: userName(i)}, "bench", cred); err != nil {
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
	// Consents belong to internal/consent; the harness writes them directly
	// as the consent page would have: the exact scope set, and the account
	// hash of a credential that names no account (consent.AccountHash of
	// ""; a mismatch would answer every lookup with consent_required, which
	// the run reports as errors).
	_, err = pool.Exec(ctx, `INSERT INTO consents (issuer, subject, client_id, provider, scopes, account_hash, granted_at, updated_at,
			connection_id)
		SELECT $1, cn.subject, $2, 'bench', '{read}', $3, now(), now(), cn.id
		FROM connections cn WHERE cn.issuer = $1 AND cn.provider = 'bench' AND cn.subject LIKE 'user-%'
		ON CONFLICT DO NOTHING`, issuer, c.ID, consent.AccountHash(""))
	return key, err
}

// process is a child process under measurement.
type process struct {
	cmd      *exec.Cmd
	exited   chan struct{} // closed once cmd has exited
	addr     string
	base     string
	internal string // operators' listener (pprof, metrics); "" for the trivial server
	iaddr    string
	pid      int
	held     []net.Listener // addr and iaddr, reserved until the process starts
}

// newProcess reserves a replica's addresses; start runs it.
func newProcess() (*process, error) {
	ln, err := reserve()
	if err != nil {
		return nil, err
	}
	iln, err := reserve()
	if err != nil {
		ln.Close()
		return nil, err
	}
	addr, iaddr := ln.Addr().String(), iln.Addr().String()
	return &process{addr: addr, base: "http://" + addr, iaddr: iaddr, internal: "http://" + iaddr,
		held: []net.Listener{ln, iln}}, nil
}

// release lets go of p's reserved addresses.
func (p *process) release() {
	for _, ln := range p.held {
		ln.Close()
	}
	p.held = nil
}

// start runs connectd serve on p's addresses (its public URL is its own
// address: each flow stays on one replica) and waits until it is ready.
func (p *process) start(ctx context.Context, binary string, env []string) error {
	cmd := exec.CommandContext(ctx, binary, "serve")
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, "CONNECTD_ADDR="+p.addr, "CONNECTD_INTERNAL_ADDR="+p.iaddr, "CONNECTD_PUBLIC_URL="+p.base)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	p.release() // only now, for connectd to bind them
	if err := cmd.Start(); err != nil {
		return err
	}
	p.running(cmd)
	if err := waitReady(ctx, p.base+"/readyz", p.exited); err != nil {
		p.stop()
		return fmt.Errorf("connectd serve on %s: %w", p.addr, err)
	}
	return nil
}

// running records cmd, just started, as p's process.
func (p *process) running(cmd *exec.Cmd) {
	p.cmd, p.pid, p.exited = cmd, cmd.Process.Pid, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
}

func (p *process) stop() {
	p.release()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	p.cmd = nil
}

// startHelper starts a server of this binary (command "trivial",
// "upstream" or "bareproxy" with its arguments), which listens on a port of
// its own choosing and reports it.
func startHelper(ctx context.Context, command string, args ...string) (*process, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, append([]string{command}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	addr, err := bufio.NewReader(out).ReadString('\n') // read before Wait, which closes out
	p := &process{}
	p.running(cmd)
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("the %s server did not report its address: %w", command, err)
	}
	p.base = "http://" + strings.TrimSpace(addr)
	return p, nil
}

// waitReady polls u until it answers 200, the process exits or 30 s pass.
func waitReady(ctx context.Context, u string, exited <-chan struct{}) error {
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
		case <-exited:
			return errors.New("exited before it was ready (its log is above)")
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after 30s", u)
}

// trivialServer answers every request with the same 1 KB JSON document: the
// cost of Go's HTTP stack alone.
func trivialServer(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) != 0 {
		return errors.New("usage: connectd-bench trivial")
	}
	body := []byte(`{"provider":"bench","kind":"oauth2","token_type":"Bearer","access_token":"` +
		strings.Repeat("x", 900) + `","scopes":["read"]}`)
	return serveReported(ctx, stdout, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
}

// upstreamServer is the bench provider's API, the proxy's upstream: GET
// /api/small answers 1 KB of JSON and GET /api/large 256 KB, each with its
// Content-Length, to any request whose Authorization is
// "Bearer bench-access-…" (the shape of the seeded tokens; it verifies
// nothing further, and answers 401 to anything else). The direct scenario
// calls it with the user's access token itself, the proxy scenarios through
// connectd, which attaches it.
func upstreamServer(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) != 0 {
		return errors.New("usage: connectd-bench upstream")
	}
	return serveReported(ctx, stdout, upstreamHandler())
}

func upstreamHandler() http.Handler {
	doc := func(size int64) []byte {
		head, tail := `{"provider":"bench","data":"`, `"}`
		return []byte(head + strings.Repeat("x", int(size)-len(head)-len(tail)) + tail)
	}
	mux := http.NewServeMux()
	for _, c := range []apiCall{apiSmall, apiLarge} {
		body, length := doc(c.size), strconv.FormatInt(c.size, 10)
		mux.HandleFunc("GET /"+c.path, func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer bench-access-") {
				w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", length)
			w.Write(body)
		})
	}
	return mux
}

// serveReported serves h on a free port of 127.0.0.1 until ctx ends,
// having written the address to stdout, its first line: nothing can take
// the port between being chosen and being listened on.
func serveReported(ctx context.Context, stdout io.Writer, h http.Handler) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, ln.Addr())
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: h}
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
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
