package main

import (
	"bytes"
	"context"
	"crypto/rand"
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
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/client"
	mcpserver "github.com/connectd/connectd/examples/mcp-server"
	"github.com/connectd/connectd/examples/mcp-server/devtoken"
	"github.com/connectd/connectd/internal/admin"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/web"
)

// The demo's fixed names.
const (
	defaultStateDir = ".cache/demo" // make demo's, next to its database in .cache/demo-pg
	demoProvider    = "demo-files"
	demoScope       = "files.read"
	demoClientName  = "Files Assistant (example MCP server)"
	demoIssuerID    = "demo"
	demoAdmin       = "admin" // a user of the demo's identity provider
)

// The demo's second organization: its own Demo Files app (a client id Demo
// Files knows beside the deployment's), its own brand (a colour, no logo:
// the demo works offline) and its own example MCP server, so a newcomer
// sees one user's connections kept apart by organization.
const (
	globexOrg        = "globex"
	globexName       = "Globex (second organization)"
	globexColor      = "#7c3aed"
	globexAppID      = "connectd-demo-globex" // its client id at Demo Files
	globexClientName = "Globex Files (example MCP server)"
)

// demoAccounts are the accounts at Demo Files: the first is the one a
// connect link gets without asking.
var demoAccounts = []providertest.Account{
	{Subject: "work-account", Label: "Work files"},
	{Subject: "home-account", Label: "Home files"},
}

// demoOptions are the demo's addresses.
type demoOptions struct {
	host         string // host in every URL the browser and the services use
	bind         string // host the listeners bind to
	port         int    // connectd
	idpPort      int    // identity provider
	providerPort int    // Demo Files
	mcpPort      int    // example MCP server (the default organization's)
	mcp2Port     int    // the second organization's example MCP server
	webhookPort  int    // the demo's webhook receiver (0: none)
	internalAddr string // connectd's operators' listener
	stateDir     string
}

func (o demoOptions) url(port int) string {
	return "http://" + net.JoinHostPort(o.host, strconv.Itoa(port))
}

func (o demoOptions) listen(port int) string { return net.JoinHostPort(o.bind, strconv.Itoa(port)) }

// run is the whole demo: main only supplies the process's context,
// arguments, environment (environ, as os.Environ) and output streams, so
// tests can call it directly.
//
// It runs the whole product on one machine: connectd in dev mode, an OIDC
// identity provider with the demo users alice and bob and the admin (the development IdP,
// internal/devidp), a third-party OAuth service with a file API (Demo Files,
// internal/provider/providertest), and the example MCP server
// (examples/mcp-server), all wired together; then it prints a walkthrough.
// A second organization (globex) has its own Demo Files app and brand,
// registered with connectd orgs as an operator does, and its own instance of
// the example MCP server (-mcp2-port), to show organizations kept apart.
// The example MCP server is registered proxy-only and calls Demo Files
// through connectd's proxy, so a newcomer sees the safest mode first;
// -credential token registers it without proxy-only and has it read tokens.
// The database comes from CONNECTD_DATABASE_URL (make demo starts a private
// one). Ctrl-C stops everything.
//
// connectd is the real binary (-connectd), started as `connectd migrate up`
// and then `connectd serve` on the demo's configuration, exactly as an
// operator runs it; the other three services run in this process. So the
// production binary links none of the demo's fakes, test support or the MCP
// SDK.
//
// The development identity provider is the demo's alone: connectd has none
// built in (issue 23 §5; its deps test keeps internal/devidp out of the
// binary), since it lets anyone sign in as anyone. The demo serves it on its
// own origin, with connectd's login client and a public client for MCP
// clients, and connectd trusts it through CONNECTD_ISSUERS and reaches it
// through CONNECTD_EGRESS_ALLOW_HOSTS, exactly as it would trust and reach a
// production authorization server.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	return runDemo(ctx, args, environ, stdout, stderr, nil)
}

// runDemo is run with a seam for tests: onFiles, when not nil, is given
// Demo Files before it serves (its records of token requests, …).
func runDemo(ctx context.Context, args, environ []string, stdout, stderr io.Writer, onFiles func(*providertest.Server)) error {
	fset := flag.NewFlagSet("connectd-demo", flag.ContinueOnError)
	var o demoOptions
	fset.StringVar(&o.host, "host", "127.0.0.1", "host name in every demo URL (what the browser uses)")
	fset.StringVar(&o.bind, "bind", "", "host the listeners bind to (default: -host; 0.0.0.0 in a container)")
	fset.IntVar(&o.port, "port", 8080, "connectd's port")
	fset.IntVar(&o.idpPort, "idp-port", 8081, "the identity provider's port")
	fset.IntVar(&o.providerPort, "provider-port", 8082, "Demo Files' port")
	fset.IntVar(&o.mcpPort, "mcp-port", 8083, "the example MCP server's port")
	fset.IntVar(&o.mcp2Port, "mcp2-port", 8084, "the second organization's (globex) example MCP server's port")
	fset.IntVar(&o.webhookPort, "webhook-port", 8085, "the demo's webhook receiver's port: it is registered for the example MCP server "+
		"and prints every event connectd sends it, verified (0: none)")
	fset.StringVar(&o.internalAddr, "internal-addr", "127.0.0.1:9090", "connectd's operators' listener")
	fset.StringVar(&o.stateDir, "state-dir", defaultStateDir, "where the demo keeps its keys, Demo Files' tokens, its providers file and "+
		"connectd.env (what connectd-demo clients uses); next to its database, so a restart keeps what you set up")
	connectdBin := fset.String("connectd", "", "the connectd binary (default: connectd next to this program, else on PATH)")
	credential := fset.String("credential", "proxy", "how the example MCP server uses alice's credential: proxy (registered proxy-only, "+
		"it calls Demo Files through connectd and never holds a token) or token (it reads the token and calls Demo Files itself)")
	fset.SetOutput(stderr)
	fset.Usage = func() {
		fmt.Fprintln(fset.Output(), "usage: connectd-demo [flags]\n"+
			"       connectd-demo [-state-dir DIR] clients COMMAND ...   (while the demo runs)\n\n"+
			"Runs connectd (dev mode), an identity provider (users alice, bob and admin), the Demo Files OAuth\n"+
			"provider and the example MCP server (proxy-only: it calls Demo Files through connectd; see -credential),\n"+
			"and a second organization (globex) with its own Demo Files app, brand and example MCP server (-mcp2-port),\n"+
			"on CONNECTD_DATABASE_URL, and prints a walkthrough.\n"+
			"Ctrl-C stops everything. Its vault and session keys and Demo Files' tokens are kept in -state-dir\n"+
			"(generated once, mode 0600), so a restart keeps connections and webhook secrets; make clean forgets them\n"+
			"with the database.\n\n"+
			"connectd-demo clients ... runs `connectd clients ...` on the running demo's database (from\n"+
			"-state-dir's connectd.env), e.g. to register another MCP server:\n"+
			"  connectd-demo clients create --name NAME --resource http://127.0.0.1:PORT/mcp --provider demo-files\n\nflags:")
		fset.PrintDefaults()
	}
	own := args // the demo's own flags: those before a clients command
	if i := slices.Index(args, "clients"); i >= 0 {
		own = args[:i]
	}
	if slices.ContainsFunc(own, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
		fset.SetOutput(stdout)
		fset.Usage()
		return flag.ErrHelp
	}
	if err := fset.Parse(args); err != nil {
		return &usageError{err.Error()}
	}
	if fset.NArg() > 0 && fset.Arg(0) == "clients" {
		return demoClients(ctx, o.stateDir, *connectdBin, fset.Args(), environ, stdout, stderr)
	}
	if fset.NArg() != 0 {
		return &usageError{"usage: connectd-demo [flags] (see connectd-demo -h)"}
	}
	stateArg := o.stateDir
	abs, err := filepath.Abs(o.stateDir)
	if err != nil {
		return err
	}
	o.stateDir = abs
	if o.bind == "" {
		o.bind = o.host
	}
	cred, err := mcpserver.ParseCredential(*credential)
	if err != nil {
		return &usageError{"-credential must be proxy or token"}
	}
	env := newDemoEnv(environ)
	env.set("CONNECTD_DEV", "true")
	env.setDefault("CONNECTD_LOG_FORMAT", "text")
	dbURL := env.get("CONNECTD_DATABASE_URL")
	if dbURL == "" {
		return &usageError{"CONNECTD_DATABASE_URL is required (make demo starts a private Postgres)"}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(env.get("CONNECTD_LOG_LEVEL"))); err != nil {
		level = slog.LevelInfo
	}
	base := web.NewLogger(stderr, level, env.get("CONNECTD_LOG_FORMAT"))
	logger := base.With(slog.String("component", "demo"))
	bin, err := findConnectd(*connectdBin)
	if err != nil {
		return err
	}

	connectdURL, idpURL, providerURL := o.url(o.port), o.url(o.idpPort), o.url(o.providerPort)
	mcpURL, mcp2URL := o.url(o.mcpPort)+"/mcp", o.url(o.mcp2Port)+"/mcp"

	// connectd's own migrations, before the demo registers its client.
	if err := runConnectd(ctx, bin, env, stdout, stderr, "migrate", "up"); err != nil {
		return fmt.Errorf("demo: connectd migrate up: %w", err)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return errors.New("demo: CONNECTD_DATABASE_URL is not a valid PostgreSQL connection URL") // never the URL: it may hold a password
	}
	defer pool.Close()

	// Listen first, so a port in use stops the demo before anything runs.
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for _, p := range []int{o.idpPort, o.providerPort, o.mcpPort, o.mcp2Port} {
		ln, err := net.Listen("tcp", o.listen(p))
		if err != nil {
			return fmt.Errorf("demo: listen on %s: %w", o.listen(p), err)
		}
		lns = append(lns, ln)
	}
	var webhookLn net.Listener
	if o.webhookPort != 0 {
		if webhookLn, err = net.Listen("tcp", o.listen(o.webhookPort)); err != nil {
			return fmt.Errorf("demo: listen on %s: %w", o.listen(o.webhookPort), err)
		}
		lns = append(lns, webhookLn)
	}

	// The identity provider: connectd's login client, and a public client
	// for MCP clients (the try command, devtoken).
	idpSecret := rand.Text()
	idp, err := devidp.New(devidp.Config{
		Issuer: idpURL,
		Clients: []devidp.Client{
			{ID: "connectd", Secret: idpSecret, RedirectURIs: []string{connectdURL + "/login/callback",
				connectdURL + admin.CallbackPath}},
			{ID: devtoken.ClientID, RedirectURIs: []string{devtoken.RedirectURI}},
		},
		Logger: base.With(slog.String("component", "idp")),
	})
	if err != nil {
		return err
	}

	// Demo Files: a third-party OAuth provider whose file API needs its token.
	// The browser is signed in there to two accounts: a connect link approves
	// as the first at once, and one for another account (connectd asks with
	// prompt=select_account) shows Demo Files' account chooser. It knows two
	// OAuth clients: the deployment's app (the providers file's) and
	// globex's own (set at connectd below with connectd orgs apps set).
	providerSecret, globexSecret := rand.Text(), rand.Text()
	files, filesHandler := providertest.NewHandler(providerURL, providertest.Options{
		ClientID: "connectd-demo", ClientSecret: providerSecret, RequirePKCE: true,
		Apps:         map[string]string{globexAppID: globexSecret},
		RedirectURIs: []string{connectdURL + "/oauth/callback"}, APIScope: demoScope,
		Accounts: demoAccounts, AccountLabel: "Demo Files",
		Quirks: providertest.Quirks{IssParameter: true},
	})
	providersFile, err := writeDemoProviders(o.stateDir, files)
	if err != nil {
		return err
	}
	// Demo Files' tokens from the last run, and saved again when this one
	// stops: connections made then still work.
	filesState := filepath.Join(o.stateDir, "demo-files.json")
	if err := loadFiles(files, filesState); err != nil {
		logger.WarnContext(ctx, "Demo Files forgets the tokens of earlier runs", slog.String("file", filesState), slog.Any("error", err))
	}
	defer func() {
		if err := saveFiles(files, filesState); err != nil {
			logger.WarnContext(context.WithoutCancel(ctx), "Demo Files' tokens not saved", slog.Any("error", err))
		}
	}()

	if onFiles != nil {
		onFiles(files)
	}

	servers := []*http.Server{
		{Handler: idp.Handler(), ReadHeaderTimeout: 10 * time.Second},
		{Handler: filesHandler, ReadHeaderTimeout: 10 * time.Second},
	}
	errc := make(chan error, 4)
	var mcpClosers []func()
	for i, hs := range servers {
		go func() { errc <- hs.Serve(lns[i]) }()
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		for _, hs := range servers {
			if err := hs.Shutdown(sctx); err != nil {
				hs.Close()
			}
		}
	}()

	// The example MCP server, registered at connectd as a client:
	// proxy-only unless it is to read tokens (-credential token).
	clients := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool, AllowHTTP: true})
	startMCP := func(org, name, resource string, ln net.Listener, component string) (string, error) {
		id, key, err := demoClientKey(ctx, clients, org, name, resource, cred == mcpserver.CredentialProxy)
		if err != nil {
			return "", err
		}
		cd, err := client.New(client.Config{BaseURL: connectdURL, Key: key, AllowHTTP: true})
		if err != nil {
			return "", err
		}
		srv, err := mcpserver.New(ctx, mcpserver.Config{
			Resource: resource, Issuer: idpURL, Connectd: cd, Provider: demoProvider, Scopes: []string{demoScope},
			Credential: cred, FilesAPI: files.APIURL(), Logger: base.With(slog.String("component", component)),
			IssuesPath: demoIssuesPath,
		})
		if err != nil {
			return "", err
		}
		mcpClosers = append(mcpClosers, srv.Close)
		hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, hs)
		go func() { errc <- hs.Serve(ln) }()
		return id, nil
	}
	defer func() {
		for _, c := range mcpClosers {
			c()
		}
	}()
	clientID, err := startMCP(names.DefaultOrg, demoClientName, mcpURL, lns[2], "mcp-server")
	if err != nil {
		return err
	}

	// connectd itself, exactly as `connectd serve` runs, on this
	// configuration.
	issuers, _ := json.Marshal([]map[string]any{{"id": demoIssuerID, "issuer": idpURL, "login": true,
		"client_id": "connectd", "client_secret_env": "CONNECTD_DEMO_IDP_SECRET"}})
	for k, v := range map[string]string{
		"CONNECTD_PUBLIC_URL":        connectdURL,
		"CONNECTD_ADDR":              o.listen(o.port),
		"CONNECTD_INTERNAL_ADDR":     o.internalAddr,
		"CONNECTD_AUTO_MIGRATE":      "false", // done above
		"CONNECTD_ISSUERS":           string(issuers),
		"CONNECTD_ISSUERS_FILE":      "",
		"CONNECTD_DEMO_IDP_SECRET":   idpSecret,
		"CONNECTD_PROVIDERS_FILE":    providersFile,
		"CONNECTD_DEMO_FILES_SECRET": providerSecret,
		// The identity provider's user "admin" signs in to /admin.
		"CONNECTD_ADMIN_ISSUER":   demoIssuerID,
		"CONNECTD_ADMIN_SUBJECTS": demoAdmin,
		// Dev mode lets connectd fetch plain http on loopback only from
		// hosts named here: the identity provider and Demo Files (its
		// OAuth endpoints and its API, where the proxy sends the example's
		// calls: api_base_url in the providers file).
		"CONNECTD_EGRESS_ALLOW_HOSTS": joinNonEmpty(env.get("CONNECTD_EGRESS_ALLOW_HOSTS"),
			net.JoinHostPort(o.host, strconv.Itoa(o.idpPort)), net.JoinHostPort(o.host, strconv.Itoa(o.providerPort)),
			webhookHost(o)),
	} {
		env.set(k, v)
	}
	// Keys kept with the database (in the state directory, generated once,
	// mode 0600): a restart still opens the connections and webhook secrets
	// sealed before it, and browser sessions survive it. make clean forgets
	// them with the database; keys set in the environment win.
	keys, err := demoKeys(o.stateDir)
	if err != nil {
		return err
	}
	if env.get("CONNECTD_VAULT_KEYS") == "" && env.get("CONNECTD_VAULT_KEYS_FILE") == "" {
		env.set("CONNECTD_VAULT_KEYS_FILE", keys.vaultFile)
	}
	env.setDefault("CONNECTD_SESSION_KEYS", keys.session)
	// What connectd-demo clients runs connectd clients with, from another
	// terminal, while this demo runs.
	envFile, err := writeDemoEnv(o.stateDir, env, bin)
	if err != nil {
		return err
	}
	// Short, but longer than the 5 s net/http allows a connection that has
	// not sent its first request yet (a client's spare dial) before Shutdown
	// counts it as idle.
	env.setDefault("CONNECTD_SHUTDOWN_GRACE", "8s")

	// The second organization, set up with connectd orgs as an operator
	// does (before serve: its answers are cached there), then its MCP
	// server.
	if err := setupGlobex(ctx, bin, env, globexSecret); err != nil {
		return err
	}
	logger.InfoContext(ctx, "second organization ready", slog.String("org", globexOrg), slog.String("app_client_id", globexAppID))
	var webhookURL string
	if webhookLn != nil {
		// The demo's webhook receiver, registered for the example MCP server
		// with connectd clients webhooks as an operator does (anew at each
		// start: the secret is shown once), and serving before connectd
		// delivers anything.
		webhookURL = o.url(o.webhookPort) + "/webhooks"
		secret, err := registerWebhook(ctx, bin, env, clientID, webhookURL)
		if err != nil {
			return err
		}
		hs := &http.Server{Handler: webhookReceiver(secret, base.With(slog.String("component", "webhooks"))),
			ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, hs)
		go func() { errc <- hs.Serve(webhookLn) }()
	}
	client2ID, err := startMCP(globexOrg, globexClientName, mcp2URL, lns[3], "mcp-server-globex")
	if err != nil {
		return err
	}

	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		if waitReady(sctx, "http://"+net.JoinHostPort(o.connectHost(), strconv.Itoa(o.port))+"/readyz") {
			printWalkthrough(stdout, walkthrough{Connectd: connectdURL, IdP: idpURL, Provider: providerURL, MCP: mcpURL,
				Internal: "http://" + o.internalAddr, ClientID: clientID, Token: cred == mcpserver.CredentialToken,
				Try: tryCommand(idpURL, mcpURL), TryOwn: tryCommand(idpURL, "http://127.0.0.1:8083/mcp"), Demo: demoCommand(stateArg), EnvFile: envFile,
				FreePort: o.mcpPort + 10, Host: o.host,
				MCP2: mcp2URL, Client2ID: client2ID, Try2: tryCommand(idpURL, "http://127.0.0.1:8083/mcp") + " -mcp " + mcp2URL,
				Org2: globexOrg, Org2Name: globexName, Org2App: globexAppID, Org2Color: globexColor, Webhooks: webhookURL})
		}
	}()
	serveErr := make(chan error, 1)
	go func() { serveErr <- runConnectd(sctx, bin, env, stdout, stderr, "serve") }()
	select {
	case err = <-serveErr:
	case err = <-errc:
		err = fmt.Errorf("demo: a demo service stopped: %w", err)
		stop()
		<-serveErr
	}
	logger.InfoContext(context.WithoutCancel(ctx), "demo stopped")
	return err
}

// connectHost is where the demo itself reaches connectd: the bind address,
// unless it is the unspecified address.
func (o demoOptions) connectHost() string {
	if ip := net.ParseIP(o.bind); ip != nil && ip.IsUnspecified() {
		return "127.0.0.1"
	}
	return o.bind
}

// demoEnv is the process environment with the demo's settings laid over
// it: what connectd is started with.
type demoEnv struct {
	vars map[string]string
}

func newDemoEnv(environ []string) demoEnv {
	e := demoEnv{vars: map[string]string{}}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			e.vars[k] = v
		}
	}
	return e
}

func (e demoEnv) get(k string) string { return e.vars[k] }

func (e demoEnv) set(k, v string) { e.vars[k] = v }

func (e demoEnv) setDefault(k, v string) {
	if e.get(k) == "" {
		e.set(k, v)
	}
}

// list is the environment as exec.Cmd takes it.
func (e demoEnv) list() []string {
	out := make([]string, 0, len(e.vars))
	for k, v := range e.vars {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// findConnectd returns the connectd binary to run: flag, else connectd next
// to this program (as make demo and the container image place it), else
// connectd on PATH.
func findConnectd(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "connectd")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("connectd")
	if err != nil {
		return "", errors.New("demo: no connectd binary next to connectd-demo or on PATH; build it (go build ./cmd/connectd) and pass -connectd")
	}
	return p, nil
}

// runConnectd runs connectd with args on env until it exits. When ctx ends
// connectd is asked to stop as Ctrl-C asks it (SIGINT: a graceful shutdown)
// and is given its shutdown grace and a little more before it is killed.
func runConnectd(ctx context.Context, bin string, env demoEnv, stdout, stderr io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env.list()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 15 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil && cmd.ProcessState != nil && cmd.ProcessState.Success() {
		return nil // stopped as asked
	}
	if err != nil {
		return fmt.Errorf("connectd %s: %w", args[0], err)
	}
	return nil
}

// setupGlobex makes the demo's second organization with the operator's
// commands, as docs/organizations.md shows them: connectd orgs create (once:
// the kept database may have it from an earlier run), orgs update (its name
// and brand colour) and orgs apps set (its own Demo Files app, the secret on
// stdin, never in a flag). Setting the app again at each start keeps its id
// (the client id is the same) and gives it this run's secret, the one Demo
// Files knows now, so connections made through it before a restart still
// refresh.
func setupGlobex(ctx context.Context, bin string, env demoEnv, secret string) error {
	if _, err := operatorCommand(ctx, bin, env, "", "orgs", "show", globexOrg); err != nil {
		if out, err := operatorCommand(ctx, bin, env, "", "orgs", "create", globexOrg, "--name", globexName); err != nil {
			return fmt.Errorf("demo: connectd orgs create %s: %w\n%s", globexOrg, err, out)
		}
	}
	if out, err := operatorCommand(ctx, bin, env, "", "orgs", "update", globexOrg, "--name", globexName,
		"--brand-color", globexColor); err != nil {
		return fmt.Errorf("demo: connectd orgs update %s: %w\n%s", globexOrg, err, out)
	}
	if out, err := operatorCommand(ctx, bin, env, secret+"\n", "orgs", "apps", "set", globexOrg, demoProvider,
		"--client-id", globexAppID); err != nil {
		return fmt.Errorf("demo: connectd orgs apps set %s %s: %w\n%s", globexOrg, demoProvider, err, out)
	}
	return nil
}

// operatorCommand runs one connectd command on env, stdin given, and returns
// what it printed (stdout and stderr), for an error to quote: connectd prints
// no secret.
func operatorCommand(ctx context.Context, bin string, env demoEnv, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env.list()
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func joinNonEmpty(parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), ",")
}

// writeDemoProviders writes the providers file naming Demo Files; its client
// secret is passed by reference (CONNECTD_DEMO_FILES_SECRET), never written.
func writeDemoProviders(dir string, files *providertest.Server) (string, error) {
	entry := files.ProviderConfig(demoProvider, "CONNECTD_DEMO_FILES_SECRET")
	entry["display_name"] = "Demo Files"
	entry["scopes"] = []string{demoScope}
	// What the consent page says beside the scope token (as an operator
	// would write for a provider connectd's catalog does not describe).
	entry["scope_descriptions"] = map[string]string{demoScope: "See the names and sizes of your files"}
	b, err := json.MarshalIndent(map[string]any{"providers": []any{entry}}, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("demo: state directory: %w", err)
	}
	path, err := filepath.Abs(filepath.Join(dir, "providers.json"))
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("demo: write providers file: %w", err)
	}
	return path, nil
}

// demoClientKey registers an example MCP server (name, at resource) as a
// connectd client of organization org, or
// reuses the registration of an earlier run, switched to proxy-only or not
// as asked (what `connectd clients proxy-only ID [--off]` does), and returns
// its id and a fresh key (keys are stored hashed, so an earlier run's key
// cannot be read back; the old one stops working at once).
func demoClientKey(ctx context.Context, clients *clientauth.Clients, org, name, resource string, proxyOnly bool) (id, key string, err error) {
	list, err := clients.List(ctx)
	if err != nil {
		return "", "", err
	}
	// A kept demo database may hold the demo client from an earlier run,
	// perhaps disabled by the admin walkthrough: reuse it, since resource
	// URIs are unique across clients.
	for _, c := range list {
		if !slices.Contains(c.Resources, resource) {
			continue
		}
		if c.Name != name || c.Org != org || !slices.Contains(c.Providers, demoProvider) {
			return "", "", fmt.Errorf("the demo database has client %s (%q) for %s, not the demo's; "+
				"disable or remove it, or start afresh with make clean", c.ID, c.Name, resource)
		}
		if c.Disabled {
			if err := clients.SetDisabled(ctx, c.ID, false); err != nil {
				return "", "", err
			}
		}
		if err := demoRules(ctx, clients, c.ID, proxyOnly); err != nil {
			return "", "", err
		}
		if c.ProxyOnly != proxyOnly {
			if err := clients.SetProxyOnly(ctx, c.ID, proxyOnly); err != nil {
				return "", "", err
			}
		}
		key, err := clients.RotateKey(ctx, c.ID, 0)
		return c.ID, key, err
	}
	c, key, err := clients.CreateIn(ctx, org, name, []string{resource}, []string{demoProvider})
	if err != nil {
		return "", "", err
	}
	if proxyOnly {
		if err := clients.SetProxyOnly(ctx, c.ID, true); err != nil {
			return "", "", err
		}
	}
	if err := demoRules(ctx, clients, c.ID, proxyOnly); err != nil {
		return "", "", err
	}
	return c.ID, key, nil
}

// demoIssuesPath is where the example's open_issue posts at Demo Files (the
// fake provider takes POSTs below /echo), and demoAskRule the request rule
// that makes that call one the user approves first (issue 36).
const (
	demoIssuesPath = "/echo/repos/{repo}/issues"
	demoAskRule    = `POST /echo/repos/*/issues ask:1h "open issues in your Demo Files repositories"`
)

// demoRules gives the proxy-only example its request rules at Demo Files:
// reads go, opening an issue asks alice first. Reading tokens
// (-credential token) needs no rule that asks, so they are cleared then (a
// client whose rules ask stays proxy-only).
func demoRules(ctx context.Context, clients *clientauth.Clients, id string, proxyOnly bool) error {
	if !proxyOnly {
		return clients.SetProxyRules(ctx, id, demoProvider, nil)
	}
	return clients.SetProxyRules(ctx, id, demoProvider, &clientauth.ProxyRules{Rules: []string{"GET /*", demoAskRule},
		Description: "reads your files; asks you each time before it opens an issue"})
}

// waitReady polls a readiness URL until it answers 200 or ctx ends.
func waitReady(ctx context.Context, u string) bool {
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return false
		}
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

type walkthrough struct {
	Connectd, IdP, Provider, MCP, Internal string
	ClientID                               string // the example MCP server's registration
	Token                                  bool   // -credential token: it reads tokens, not proxy-only
	Try                                    string // the try command for this run's ports
	TryOwn                                 string // the same for another MCP server (-mcp left to add)
	Demo                                   string // this program, as the developer runs it (for clients …)
	EnvFile                                string // connectd.env
	FreePort                               int    // a port to suggest for another MCP server
	Host                                   string
	// The second organization and its example MCP server.
	Org2, Org2Name, Org2App string // its id, name and client id at Demo Files
	Org2Color               string
	MCP2, Client2ID         string
	Try2                    string // the try command for its MCP server
	Webhooks                string // the demo's webhook receiver; "" for none
}

// webhookHost is the demo's webhook receiver's host:port for connectd's
// egress allow-list (dev mode reaches plain http on loopback only there);
// "" without one.
func webhookHost(o demoOptions) string {
	if o.webhookPort == 0 {
		return ""
	}
	return net.JoinHostPort(o.host, strconv.Itoa(o.webhookPort))
}

// registerWebhook registers url as a webhook endpoint of client with the
// operator's commands (connectd clients webhooks list, remove, add) and
// returns its signing secret: the endpoint of an earlier run at the same
// URL is removed first (its secret was shown once, to that run).
func registerWebhook(ctx context.Context, bin string, env demoEnv, client, url string) (string, error) {
	out, err := operatorCommand(ctx, bin, env, "", "clients", "webhooks", "list", "--client", client)
	if err != nil {
		return "", fmt.Errorf("demo: connectd clients webhooks list: %w\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[1] == url {
			if out, err := operatorCommand(ctx, bin, env, "", "clients", "webhooks", "remove", "--id", f[0]); err != nil {
				return "", fmt.Errorf("demo: connectd clients webhooks remove: %w\n%s", err, out)
			}
		}
	}
	out, err = operatorCommand(ctx, bin, env, "", "clients", "webhooks", "add", "--client", client, "--url", url)
	if err != nil {
		return "", fmt.Errorf("demo: connectd clients webhooks add: %w\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if s, ok := strings.CutPrefix(line, "secret: "); ok {
			return strings.TrimSpace(s), nil
		}
	}
	return "", errors.New("demo: connectd clients webhooks add printed no secret")
}

// webhookReceiver is the demo's webhook endpoint: it verifies each
// delivery with the Go client's VerifyWebhook (the Standard Webhooks
// signature, as an MCP server does) and logs its type and data — ids and
// names, never a credential; a request that does not verify is refused
// with 401 and logged.
func webhookReceiver(secret string, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		ev, err := client.VerifyWebhook(secret, r.Header, body, time.Now())
		if err != nil {
			logger.WarnContext(r.Context(), "webhook refused: it does not verify", slog.Any("error", err))
			http.Error(w, "signature not valid", http.StatusUnauthorized)
			return
		}
		data, _ := json.Marshal(ev.Data)
		logger.InfoContext(r.Context(), "webhook received, signature verified", slog.String("type", ev.Type),
			slog.String("webhook_id", ev.ID), slog.String("data", string(data)))
		w.WriteHeader(http.StatusNoContent)
	})
}

// tryCommand is the try command that reaches this run's identity provider
// and example MCP server: the flags only where they differ from try's
// defaults (the demo's default ports).
func tryCommand(idpURL, mcpURL string) string {
	cmd := "go run ./examples/mcp-server/cmd/try"
	if idpURL != "http://127.0.0.1:8081" {
		cmd += " -idp " + idpURL
	}
	if mcpURL != "http://127.0.0.1:8083/mcp" {
		cmd += " -mcp " + mcpURL
	}
	return cmd
}

// demoCommand is how to run this program again from the checkout: the
// binary make demo built (.cache/connectd-demo), else go run; with
// -state-dir unless it is the default.
func demoCommand(stateDir string) string {
	cmd := "go run ./cmd/connectd-demo"
	if self, err := os.Executable(); err == nil && filepath.Base(self) == "connectd-demo" {
		if wd, err := os.Getwd(); err == nil {
			if rel, err := filepath.Rel(wd, self); err == nil && !strings.HasPrefix(rel, "..") {
				cmd = rel
			}
		}
	}
	if stateDir != defaultStateDir {
		cmd += " -state-dir " + stateDir
	}
	return cmd
}

// demoKeys are the demo's vault key (a keyring file) and session key, made
// once in the state directory and reused by every later run.
type demoKeyFiles struct {
	vaultFile string // CONNECTD_VAULT_KEYS_FILE
	session   string // CONNECTD_SESSION_KEYS
}

func demoKeys(dir string) (demoKeyFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return demoKeyFiles{}, fmt.Errorf("demo: state directory: %w", err)
	}
	vaultFile := filepath.Join(dir, "vault-keys")
	if _, err := keptFile(vaultFile, func() (string, error) { return keyring.GenerateKey(1) }); err != nil {
		return demoKeyFiles{}, err
	}
	sk, err := keptFile(filepath.Join(dir, "session-keys"), func() (string, error) { return session.NewKey().Encode(), nil })
	if err != nil {
		return demoKeyFiles{}, err
	}
	return demoKeyFiles{vaultFile: vaultFile, session: sk}, nil
}

// keptFile returns the first line of path, writing make() there (mode 0600)
// when the file does not exist yet (or is empty).
func keptFile(path string, gen func() (string, error)) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if v := strings.TrimSpace(string(b)); v != "" {
			return v, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("demo: %w", err)
	}
	v, err := gen()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("demo: %w", err)
	}
	return v, nil
}

// demoEnvVars are what connectd-demo clients needs of the running demo's
// configuration.
var demoEnvVars = []string{"CONNECTD_DATABASE_URL", "CONNECTD_DEV", "CONNECTD_PROVIDERS_FILE", "CONNECTD_VAULT_KEYS_FILE",
	"CONNECTD_EGRESS_ALLOW_HOSTS", "CONNECTD_LOG_FORMAT"}

// writeDemoEnv writes connectd.env (mode 0600: the database URL may hold a
// password): the running demo's database and settings, and its connectd
// binary, for connectd-demo clients.
func writeDemoEnv(dir string, env demoEnv, bin string) (string, error) {
	var b strings.Builder
	b.WriteString("# The running demo's settings for connectd clients (connectd-demo clients ...); rewritten at each start.\n")
	for _, k := range demoEnvVars {
		if v := env.get(k); v != "" {
			fmt.Fprintf(&b, "%s=%s\n", k, v)
		}
	}
	if abs, err := filepath.Abs(bin); err == nil {
		bin = abs
	}
	fmt.Fprintf(&b, "CONNECTD_DEMO_CONNECTD=%s\n", bin)
	path := filepath.Join(dir, "connectd.env")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return "", fmt.Errorf("demo: write %s: %w", path, err)
	}
	return path, nil
}

// demoClients runs `connectd clients ARGS` on the demo's database, as
// connectd.env in the state directory names it: registering another MCP
// server (or a webhook endpoint, …) while the demo runs, from another
// terminal, without a second Postgres or the demo's password.
func demoClients(ctx context.Context, stateDir, bin string, args, environ []string, stdout, stderr io.Writer) error {
	path := filepath.Join(stateDir, "connectd.env")
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("no demo settings in %s (%v): start the demo first (make demo), or pass its -state-dir", path, err)
	}
	env := newDemoEnv(environ)
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") {
			env.set(k, v)
		}
	}
	// The providers file names Demo Files' secret by reference; connectd
	// clients reads the catalog's names, never the secret.
	env.setDefault("CONNECTD_DEMO_FILES_SECRET", "unused-by-connectd-clients")
	if bin == "" {
		bin = env.get("CONNECTD_DEMO_CONNECTD")
	}
	if bin, err = findConnectd(bin); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env.list()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 2 {
			return &usageError{"connectd " + strings.Join(args[:min(2, len(args))], " ") + " refused (see above)"}
		}
		return fmt.Errorf("connectd %s: %w", args[0], err)
	}
	return nil
}

// loadFiles reads Demo Files' tokens saved by an earlier run, if any.
func loadFiles(files *providertest.Server, path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return files.Load(f)
}

// saveFiles writes Demo Files' tokens (mode 0600) for the next run.
func saveFiles(files *providertest.Server, path string) error {
	var b strings.Builder
	if err := files.Save(&b); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

var walkthroughText = template.Must(template.New("walkthrough").Parse(`
  connectd demo — all of it runs on this machine; Ctrl-C stops everything.

    connectd             {{.Connectd}}        (probes: {{.Internal}}/readyz)
    identity provider    {{.IdP}}        users alice, bob and admin, no password
    Demo Files           {{.Provider}}        a third-party OAuth service with a file API;
                                                  you have two accounts there, Work files and Home files
    example MCP server   {{.MCP}}    tool list_files, which needs Demo Files
                                                  (client {{.ClientID}} at connectd)
{{if .Token}}
  The example MCP server reads alice's Demo Files token from connectd and
  calls Demo Files with it itself (-credential token), so its registration is
  not proxy-only. By default (make demo) it is registered proxy-only, as an
  operator does with
       connectd clients proxy-only {{.ClientID}}
  and calls Demo Files through connectd's proxy, never holding a token.
{{else}}
  The example MCP server is registered proxy-only, the safest mode: it never
  receives alice's Demo Files token. list_files sends its call to connectd's
  proxy (/v1/proxy/demo-files/files), which attaches the credential and
  forwards it to Demo Files' API; a token read with its key answers 403
  token_release_disabled, and the consent page tells alice so. For the
  other mode, where the server reads the token and calls Demo Files itself,
  restart with make demo DEMO_FLAGS="-credential token": it switches the
  client off proxy-only, as an operator does with
       connectd clients proxy-only {{.ClientID}} --off
  and runs the example with -credential token (docs/integration.md says
  when to pick which).
{{end}}
  1. In another terminal, in this checkout, call the tool as alice:

       {{.Try}} -user alice

     It gets alice an MCP access token from the identity provider (audience
     {{.MCP}}), calls list_files over MCP 2026-07-28 and prints the
     connect link connectd minted for her. The call waits while you connect.
     The other kinds of MCP client: -protocol 2025-11-25 (URL mode of the
     older generation), -no-url (no URL mode: the tool answers with the link
     in plain words, and the next call gets the files).

  2. Phishing check: open that link in a private browser window and sign in
     as bob. connectd refuses: "This link is for another account" (and offers to sign out and continue).

  3. Open the link in a normal window, sign in as alice and click Allow.
     Demo Files approves at once as the account it is signed in with, Work
     files (a link for another account would let you choose), and sends you
     back ("Connected"); the try command prints the files of work-account,
     which the example server got {{if .Token}}with the token it read{{else}}through connectd's proxy{{end}}.
     Run step 1 again: no link, the files at once.

  4. alice's own view: {{.Connectd}}/account lists Demo Files, the
     account (Work files), its permissions and the applications allowed to
     use it, with Remove access and Disconnect. (The "Connected" page links
     to it.)

  5. A second Demo Files account: ask for another one,

       {{.Try}} -user alice -account new

     open the link, Allow, and choose Home files at Demo Files. Now alice has
     two; run step 1 again and list_files asks which account to list (a
     form: type its number). /account shows both, each with its own label,
     Remove access and Disconnect.

  6. The admin: in a private window open {{.Connectd}}/admin and sign in
     as admin. Connections lists alice's Demo Files connection; open it, see
     its audit trail (Events has the whole log), and Revoke it. Run step 1
     again: the tool asks alice to connect once more.

{{if not .Token}}  7. A call alice approves first: the operator made opening an issue one
     (a request rule that asks, as connectd clients proxy-rules sets it:
       POST /echo/repos/*/issues ask:1h "open issues in your Demo Files repositories").

       {{.Try}} -user alice -tool open_issue -args '{"repo":"alice/notes","title":"Hello"}'

     connectd does not send it; try prints an approval link. Open it as
     alice: the page shows the exact request and its body. "Allow this
     request" and try prints "Opened the issue in alice/notes."; call it
     again and it asks again. Deny, and the tool answers that you denied it.

{{end}}  Two organizations. connectd serves a second organization, {{.Org2}}
  ("{{.Org2Name}}"), set up as an operator does it with
       connectd orgs create {{.Org2}} --name "{{.Org2Name}}"
       connectd orgs update {{.Org2}} --brand-color '{{.Org2Color}}'
       connectd orgs apps set {{.Org2}} demo-files --client-id {{.Org2App}}  < secret
  It has its own Demo Files app (that client id at Demo Files, not the
  deployment's), its own brand (a violet accent) and its own instance of the
  example MCP server, "Globex Files", at {{.MCP2}}
  (client {{.Client2ID}} of {{.Org2}}). Call it as alice:

       {{.Try2}} -user alice

     Open its link and click Allow: the consent page names Globex in its
     header, in Globex's colour, and the application "Globex Files"; Demo
     Files is asked by Globex's app, and alice connects her Work files
     account again: a second connection, Globex's. {{.Connectd}}/account
     now groups her connections: "Connections for Default" (Files
     Assistant's) and "Connections for {{.Org2Name}}" (Globex Files').
     Each MCP server sees only its own organization's connection:
     disconnect one on /account and the other server still lists the files.

  Just the token, for curl or your own MCP client (docs/integration.md §12):
       TOKEN=$({{.Try}} -user alice -token-only)

  Your own MCP server against this demo: register it while the demo runs
  (another terminal, in this checkout; it prints its client id and key):

       {{.Demo}} clients create --name "My MCP server" \
           --resource http://{{.Host}}:{{.FreePort}}/mcp --provider demo-files

  then run it on that resource with connectd at {{.Connectd}}, that key, and
  {{.IdP}} as the issuer of its users' tokens (ts/example-mcp-server/README.md
  shows the TypeScript example so), and call it as alice:

       {{.TryOwn}} -user alice -mcp http://{{.Host}}:{{.FreePort}}/mcp

{{- if .Webhooks}}
  Webhooks: the demo's receiver at {{.Webhooks}} is registered for the
  example MCP server; every event connectd sends it (elicitation.completed,
  connection.revoked, …) is printed in this log, its signature verified
  (webhook received, signature verified). Add your own receiver with
  {{.Demo}} clients webhooks add (its host:port in CONNECTD_EGRESS_ALLOW_HOSTS).
{{end}}
  Every connectd clients command works the same way ({{.Demo}} clients list,
  … clients webhooks add --client ID --url URL, …): it runs connectd clients
  on this demo's database, named in {{.EnvFile}}.
  The demo keeps its keys and Demo Files' tokens there too, so a restart
  keeps your registrations, connections and webhook secrets (make clean
  forgets them all, with the database).

`))

func printWalkthrough(w io.Writer, v walkthrough) {
	if err := walkthroughText.Execute(w, v); err != nil {
		fmt.Fprintln(w, "demo: walkthrough:", err)
	}
}
