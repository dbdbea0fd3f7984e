package main

import (
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
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/vault"
)

// options are the study's flags.
type options struct {
	binary  string
	doc     string
	only    map[string]bool
	timeout time.Duration
	verbose bool
	logs    string // where the replicas' logs go ("": a temporary directory, removed)
}

func parseOptions(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("connectd-faults", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{only: map[string]bool{}}
	fs.StringVar(&o.binary, "connectd", "bin/connectd", "connectd binary under study")
	fs.StringVar(&o.doc, "doc", "docs/faults.md", "document whose generated section gets the table ('' skips)")
	only := fs.String("only", "", "comma-separated faults to run (a,b,c,d,e,f,g,h,i,j,k,l; default all)")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "the whole study stops after this long")
	fs.BoolVar(&o.verbose, "v", false, "say more about each fault as it runs")
	fs.StringVar(&o.logs, "logs", "", "keep the replicas' logs in this directory (default: a temporary one, removed)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	for _, f := range strings.Split(*only, ",") {
		if f = strings.TrimSpace(f); f != "" {
			if !strings.Contains("abcdefghijkl", f) || len(f) != 1 {
				return nil, fmt.Errorf("-only: unknown fault %q", f)
			}
			o.only[f] = true
		}
	}
	return o, nil
}

// resource is the MCP server resource the study's client serves.
const resource = "https://faults.mcp.example/"

// The providers. loadProvider's tokens are valid all along (the load's
// reads are answered from cache); the others' are seeded expired, so every
// read of them refreshes: rotatingProvider rotates refresh tokens and
// revokes the grant when a rotated-away one comes back (reuse detection),
// graceProvider does too but accepts one again for 30 minutes (its
// template says refresh_reuse_grace). hangingProvider's API hangs while
// s.apiHang holds a channel (fault (l)); its tokens are valid.
const (
	loadProvider     = "fake"
	rotatingProvider = "rotating"
	graceProvider    = "grace"
	hangingProvider  = "hanging"
	loadUsers        = 200
	providerSecret   = "faults-provider-secret"
)

func loadUser(i int) string { return fmt.Sprintf("load-%03d", i%loadUsers) }

// study is everything the faults share.
type study struct {
	o         *options
	pg        *postgres
	pool      *pgxpool.Pool
	store     *vault.Store
	idp       *devidp.Provider
	providers map[string]*providertest.Server
	clientID  string
	c         *caller
	env       []string
	reps      []*replica
	rows      []row
	problems  []string // 500s, hangs and log lines worth a report
	logf      func(string, ...any)
	seq       int                           // numbers seeded users
	jwksHang  atomic.Pointer[chan struct{}] // non-nil: the issuer's JWKS hangs until it is closed
	apiHang   atomic.Pointer[chan struct{}] // non-nil: hangingProvider's API hangs until it is closed
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	adminURL := getenv("CONNECTD_TEST_DATABASE_URL")
	if adminURL == "" {
		return errors.New("CONNECTD_TEST_DATABASE_URL is not set: run `make faults` (scripts/pg provides the cluster)")
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	started := time.Now()
	s := &study{o: o, providers: map[string]*providertest.Server{},
		logf: func(format string, a ...any) { fmt.Fprintf(stderr, "faults: "+format+"\n", a...) }}
	if s.pg, err = findPostgres(ctx, adminURL); err != nil {
		return err
	}
	// Whatever happens from here on, a frozen Postgres is thawed.
	defer func() {
		if err := s.pg.thaw(); err != nil {
			s.logf("thaw: %v", err)
		}
	}()
	dir, err := os.MkdirTemp("", "connectd-faults-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logDir := dir
	if o.logs != "" {
		if err := os.MkdirAll(o.logs, 0o700); err != nil {
			return err
		}
		logDir = o.logs
	}
	defer func() {
		for _, r := range s.reps {
			r.stop()
		}
		if s.pool != nil {
			s.pool.Close()
		}
	}()
	if err := s.setup(ctx, adminURL, dir, logDir); err != nil {
		return err
	}

	faults := []struct {
		key string
		run func(context.Context) error
	}{
		{"a", s.pgRestart}, {"b", s.pgOutage}, {"c", s.pgFrozen}, {"d", s.poolExhausted},
		{"e", s.lateAnswers}, {"f", s.killedMidRefresh}, {"g", s.garbageAnswers},
		{"h", s.pgRestarts}, {"i", s.longPolls}, {"j", s.hangingJWKS},
		{"k", s.pgKilledCachedReads}, {"l", s.hangingAPI},
	}
	for _, f := range faults {
		if len(o.only) > 0 && !o.only[f.key] {
			continue
		}
		t0 := time.Now()
		offsets := make([]int64, len(s.reps))
		for i, r := range s.reps {
			offsets[i] = r.logSize()
		}
		if err := f.run(ctx); err != nil {
			return fmt.Errorf("fault (%s): %w", f.key, err)
		}
		s.scanLogs(f.key, offsets)
		s.logf("fault (%s) done in %s", f.key, time.Since(t0).Round(time.Second))
		if err := s.healthy(ctx); err != nil {
			return fmt.Errorf("after fault (%s): %w", f.key, err)
		}
	}

	rep := &report{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Elapsed: time.Since(started).Round(time.Second).String(),
		Rows: s.rows, Problems: s.problems}
	rep.print(stdout)
	if o.doc != "" {
		if err := rep.write(o.doc); err != nil {
			return err
		}
		s.logf("wrote %s", o.doc)
	}
	return nil
}

// setup creates the study's own database, the issuer, the providers, the
// client and the load users' connections, and starts two replicas.
func (s *study) setup(ctx context.Context, adminURL, dir, logDir string) error {
	dbURL, err := freshDatabase(ctx, adminURL, "connectd_faults")
	if err != nil {
		return err
	}
	migrate := exec.CommandContext(ctx, s.o.binary, "migrate", "up")
	migrate.Env = append(os.Environ(), "CONNECTD_DATABASE_URL="+dbURL)
	if out, err := migrate.CombinedOutput(); err != nil {
		if errors.Is(err, exec.ErrNotFound) || os.IsNotExist(err) {
			return fmt.Errorf("%s: build it first (make build)", s.o.binary)
		}
		return fmt.Errorf("migrate: %v: %s", err, out)
	}
	for _, name := range []string{"A", "B"} {
		r, err := newReplica(name, logDir)
		if err != nil {
			return err
		}
		s.reps = append(s.reps, r)
	}

	// The issuer and the providers, served here on loopback addresses.
	idpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	idpSecret := randomSecret()
	var callbacks []string
	for _, r := range s.reps {
		callbacks = append(callbacks, r.base+"/login/callback")
	}
	s.idp, err = devidp.New(devidp.Config{Issuer: "http://" + idpLn.Addr().String(), AccessTokenTTL: 24 * time.Hour,
		Clients: []devidp.Client{{ID: "connectd", Secret: idpSecret, RedirectURIs: callbacks}}})
	if err != nil {
		return err
	}
	go serveOn(ctx, idpLn, hangable(s.idp.Handler(), &s.jwksHang, func(p string) bool { return p == "/jwks" }))
	hosts := []string{idpLn.Addr().String()}
	var entries []any
	for _, name := range []string{loadProvider, rotatingProvider, graceProvider, hangingProvider} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		opts := providertest.Options{RotateRefreshTokens: true, ClientSecret: providerSecret}
		if name == graceProvider {
			opts.ReuseGrace = 30 * time.Minute
		}
		p, h := providertest.NewHandler("http://"+ln.Addr().String(), opts)
		if name == hangingProvider {
			h = hangable(h, &s.apiHang, func(p string) bool { return strings.HasPrefix(p, "/api/") })
		}
		go serveOn(ctx, ln, h)
		s.providers[name] = p
		e := p.ProviderConfig(name, "FAULTS_PROVIDER_SECRET")
		if name == graceProvider {
			e["refresh_reuse_grace"] = "30m"
		}
		entries = append(entries, e)
		hosts = append(hosts, ln.Addr().String())
	}
	provFile := filepath.Join(dir, "providers.json")
	b, _ := json.Marshal(map[string]any{"providers": entries})
	if err := os.WriteFile(provFile, b, 0o600); err != nil {
		return err
	}
	issuers, _ := json.Marshal([]map[string]any{{"id": "faults", "issuer": s.idp.Issuer(), "login": true,
		"client_id": "connectd", "client_secret_env": "FAULTS_IDP_SECRET"}})
	keyLine, err := keyring.GenerateKey(1)
	if err != nil {
		return err
	}
	const unlimited = "1000000/1s" // all the load comes from one address
	s.env = []string{
		"CONNECTD_DEV=true", "CONNECTD_DEV_IDP=false",
		"CONNECTD_DATABASE_URL=" + dbURL,
		"CONNECTD_VAULT_KEYS=" + keyLine,
		"CONNECTD_SESSION_KEYS=" + randomSecret64(),
		"CONNECTD_PROVIDERS_FILE=" + provFile,
		"CONNECTD_ISSUERS=" + string(issuers),
		"FAULTS_IDP_SECRET=" + idpSecret,
		"FAULTS_PROVIDER_SECRET=" + providerSecret,
		"CONNECTD_EGRESS_ALLOW_HOSTS=" + strings.Join(hosts, ","),
		"CONNECTD_LOG_LEVEL=warn", "CONNECTD_LOG_FORMAT=text",
		"CONNECTD_SHUTDOWN_GRACE=2s",
		"CONNECTD_RATE_API=" + unlimited, "CONNECTD_RATE_API_PER_IP=" + unlimited, "CONNECTD_RATE_BROWSER=" + unlimited,
		"CONNECTD_RATE_LOGIN=" + unlimited, "CONNECTD_RATE_MINT=" + unlimited,
		// Everything else at its default: the pool (20), the database
		// deadlines (acquire 2 s, statement 5 s, 64 waiting), the provider
		// timeout (30 s) and bulkhead (16), the caches' TTLs.
	}

	// The client and the load users' connections, as the consent page
	// would have left them.
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return err
	}
	cfg.MaxConns = 4
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return err
	}
	keys, err := keyring.Parse(keyLine)
	if err != nil {
		return err
	}
	if s.store, err = vault.New(vault.Config{Pool: s.pool, Keyring: keys}); err != nil {
		return err
	}
	clients := clientauth.NewClients(clientauth.ClientsConfig{Pool: s.pool, Logger: slog.New(slog.DiscardHandler)})
	cl, key, err := clients.Create(ctx, "faults", []string{resource}, []string{loadProvider, rotatingProvider, graceProvider, hangingProvider})
	if err != nil {
		return err
	}
	s.clientID = cl.ID
	s.c = newCaller(s.idp, key)
	s.logf("seeding %d users", loadUsers)
	for i := range loadUsers {
		tok := s.providers[loadProvider].Grant([]string{"files.read"}, 24*time.Hour)
		if err := s.connect(ctx, loadUser(i), loadProvider, tok, tok.Expiry); err != nil {
			return err
		}
	}
	return s.startReplicas(ctx)
}

// startReplicas starts every replica with the study's environment and
// extra, and primes the load users' tokens on each (verified, cached).
func (s *study) startReplicas(ctx context.Context, extra ...string) error {
	for _, r := range s.reps {
		r.stop()
	}
	env := append(slices.Clone(s.env), extra...)
	for _, r := range s.reps {
		if err := r.start(ctx, s.o.binary, env); err != nil {
			return err
		}
	}
	for _, r := range s.reps {
		for i := range loadUsers {
			if a := s.c.token(ctx, r, loadProvider, loadUser(i)); a.status != http.StatusOK {
				return fmt.Errorf("priming %s on %s: %s", loadUser(i), r.name, a.describe())
			}
		}
	}
	return nil
}

// connect stores a connection for user at provider, approved for the
// client.
func (s *study) connect(ctx context.Context, user, provider string, tok providertest.Tokens, expiry time.Time) error {
	u := identity.User{Issuer: s.idp.Issuer(), Subject: user}
	conn, err := s.store.Put(ctx, u, provider, vault.Credential{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken,
		TokenType: "Bearer", Expiry: expiry, Scopes: tok.Scopes, AccountID: "user-1"})
	if err != nil {
		return err
	}
	return consent.Record(ctx, s.pool, consent.Grant{User: u, ClientID: s.clientID, Provider: provider,
		Scopes: tok.Scopes, AccountID: "user-1", ConnectionID: conn.ID, At: time.Now()})
}

// seeded is a connection a fault refreshes: its user and the tokens it was
// stored with.
type seeded struct {
	user string
	tok  providertest.Tokens
}

// needingRefresh stores n connections at provider whose access tokens
// expired a minute ago: every read of them must refresh first.
func (s *study) needingRefresh(ctx context.Context, provider, label string, n int) ([]seeded, error) {
	var out []seeded
	for range n {
		s.seq++
		sd := seeded{user: fmt.Sprintf("%s-%03d", label, s.seq), tok: s.providers[provider].Grant([]string{"files.read"}, time.Hour)}
		if err := s.connect(ctx, sd.user, provider, sd.tok, time.Now().Add(-time.Minute)); err != nil {
			return nil, err
		}
		out = append(out, sd)
	}
	return out, nil
}

// lost counts the connections of conns that are gone: marked
// reauthorization_required (or otherwise not active), or whose grant the
// provider revoked (a refresh token presented twice).
func (s *study) lost(ctx context.Context, provider string, conns []seeded) (int, error) {
	var users []string
	for _, c := range conns {
		users = append(users, c.user)
	}
	rows, err := s.pool.Query(ctx, `SELECT subject, status FROM connections WHERE provider = $1 AND subject = ANY($2)`,
		provider, users)
	if err != nil {
		return 0, err
	}
	status, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var v [2]string
		return v, r.Scan(&v[0], &v[1])
	})
	if err != nil {
		return 0, err
	}
	active := map[string]bool{}
	for _, v := range status {
		active[v[0]] = v[1] == "active"
	}
	n := 0
	for _, c := range conns {
		if !active[c.user] || s.providers[provider].Revoked(c.tok.RefreshToken) {
			n++
		}
	}
	return n, nil
}

// healthy waits until every replica is ready and answers a mint again.
func (s *study) healthy(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for _, r := range s.reps {
		for {
			if a := s.c.ready(ctx, r); a.status == http.StatusOK {
				if m := s.c.mint(ctx, r, loadUser(0)); m.status == http.StatusCreated {
					break
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("replica %s not ready again within 60 s", r.name)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// scanLogs keeps, for the report, what the replicas logged during a fault
// that points at a remaining problem: an internal_error or a panic.
func (s *study) scanLogs(fault string, offsets []int64) {
	for i, r := range s.reps {
		var n int
		var first string
		for _, l := range r.newLines(offsets[i]) {
			if strings.Contains(l, "internal_error") || strings.Contains(l, "panic") {
				if n == 0 {
					first = l
				}
				n++
			}
		}
		if n > 0 {
			if len(first) > 600 {
				first = first[:600] + "…"
			}
			s.problems = append(s.problems, fmt.Sprintf("(%s) replica %s logged %d internal_error/panic line(s); the first: `%s`",
				fault, r.name, n, first))
		}
	}
}

// freshDatabase (re)creates database name on the cluster and returns its URL.
func freshDatabase(ctx context.Context, adminURL, name string) (string, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return "", err
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

func serveOn(ctx context.Context, ln net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	_ = srv.Serve(ln)
}

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
