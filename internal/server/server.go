package server

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/connectd/connectd/internal/admin"
	"github.com/connectd/connectd/internal/api"
	"github.com/connectd/connectd/internal/approval"
	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/connect"
	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/health"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/lifecycle"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/metrics"
	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/proxy"
	"github.com/connectd/connectd/internal/ratebudget"
	"github.com/connectd/connectd/internal/receipt"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/internal/webhook"
	"github.com/connectd/connectd/web/templates"
)

// Server is one connectd process's services, wired.
type Server struct {
	cfg     Config
	ident   *identity
	keyring *keyring.Keyring
	// approvals are the per-request approvals (package approval).
	approvals *approval.Store
	catalog   *provider.Catalog
	orgs      *org.Store // organizations and their provider apps
	vault     *vault.Store
	conn      *connect.Server // the browser surface
	api       *api.Server     // the MCP-server surface
	// elicitations is the store both surfaces share, consents their
	// approvals, lifecycle the one owner of a connection's changes and end.
	elicitations *elicitation.Store
	consents     *consent.Store
	budgets      *ratebudget.Store
	lifecycle    *lifecycle.Owner
	adm          *admin.Server
	store        *admin.Store
	keys         *admin.Keys
	hub          *cache.Hub
	webhooks     *webhook.Service // the job enqueuer (webhook events), built before the vault
	wcfg         webhook.Config   // its configuration, the delivery workers' too
	jobs         *jobs
	receipts     *receipt.Writer // the access receipts' writer (Run runs it)
	checker      *health.Checker
	metrics      *metrics.Metrics
	public       http.Handler
	internal     http.Handler

	runOnce sync.Once
}

// New builds a Server from cfg. Outbound calls made while building (issuer
// and provider discovery) happen under ctx. Close releases what it started.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Pool == nil || cfg.Logger == nil || cfg.PublicURL == nil {
		return nil, errors.New("server: Pool, Logger and PublicURL are required")
	}
	listen := cfg.Pool.Config().ConnConfig
	if cfg.ListenURL != "" {
		var err error
		if listen, err = pgx.ParseConfig(cfg.ListenURL); err != nil {
			// Never the URL: it may hold a password.
			return nil, &ConfigError{Var: "CONNECTD_DATABASE_LISTEN_URL", Problem: "is not a valid database URL"}
		}
	}
	s := &Server{cfg: cfg, metrics: metrics.New(prometheus.NewRegistry()), hub: cache.NewHub(listen, cfg.Logger)}
	if cfg.Cache.StaleIfError != 0 {
		s.hub.SetStaleIfError(cfg.Cache.StaleIfError)
	}
	// The organizations before identity: the verifier finds their own
	// issuers in the store, and /v1 asks it whether an organization
	// accepts the deployment's.
	var err error
	if s.keyring, err = loadKeyring(ctx, cfg); err != nil {
		return nil, err
	}
	if s.catalog, err = catalog(ctx, cfg, s.metrics); err != nil {
		return nil, err
	}
	s.orgs = org.New(org.Config{Pool: cfg.Pool, Keyring: s.keyring, Catalog: s.catalog, Now: cfg.Now, Logger: cfg.Logger,
		DeploymentIssuers: cfg.Identity.Issuers, AllowHTTP: cfg.Dev})
	if s.ident, err = newIdentity(ctx, cfg, s.orgs); err != nil {
		return nil, err
	}
	if err := s.build(ctx); err != nil {
		s.ident.Close()
		return nil, err
	}
	s.checker = health.New(cfg.Pool, cfg.Logger, 2*time.Second)
	if s.public, err = s.publicHandler(); err != nil {
		s.Close()
		return nil, err
	}
	s.internal = s.internalHandler()
	return s, nil
}

// build wires everything after identity (and the keyring, catalog and
// organizations before it), in order (see the package comment): the job
// enqueuer, the lifecycle owner and the
// vault, the stores both surfaces share, connect and api, admin, the hub's
// subscribers, metrics, and the job queue.
func (s *Server) build(ctx context.Context) error {
	cfg := s.cfg
	var err error
	// The job enqueuer first: the vault, the one lifecycle owner and both
	// surfaces enqueue webhook events in their transactions.
	if err := s.newEnqueuer(); err != nil {
		return err
	}
	// The vault and the lifecycle owner need each other: the owner ends
	// connections through the vault, the vault reports reauthorizations
	// through the owner (OnReauth). The owner's reauthorization events need
	// only the enqueuer; its Vault is set once the vault exists.
	s.lifecycle = &lifecycle.Owner{Pool: cfg.Pool, Webhooks: s.webhooks, Logger: cfg.Logger}
	if s.vault, err = vaultStore(cfg, cfg.Pool, s.keyring, s.catalog, s.orgs, s.metrics, s.lifecycle.ReauthRequired); err != nil {
		return err
	}
	s.lifecycle.Vault = s.vault
	// The provider API proxy's own outbound client: the egress rules, its
	// own body cap, redirects handed back to the caller (never followed).
	maxResp := cfg.Vault.ProxyMaxResponseBytes
	if maxResp <= 0 {
		maxResp = proxy.DefaultMaxResponseBytes
	}
	proxyClient, err := outboundClientWith(cfg, egress.Config{ResponseHeaderTimeout: providerTimeout(cfg),
		MaxResponseBytes: maxResp, AnswerRedirects: true, MaxIdleConnsPerHost: 256, Class: egress.ClassAPI})
	if err != nil {
		return err
	}
	transport := proxyClient.Transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	proxyConfig := proxy.Config{Transport: transport, MaxRequestBytes: cfg.Vault.ProxyMaxRequestBytes,
		MaxResponseBytes: maxResp, Timeout: cfg.Vault.ProxyTimeout, HeaderTimeout: cfg.Vault.ProxyAnswerTimeout, MaxInFlight: cfg.Vault.ProxyMaxInFlight, Now: cfg.Now}
	if s.elicitations, err = elicitation.New(elicitation.Config{Pool: cfg.Pool, Logger: cfg.Logger, Hub: s.hub,
		Webhooks: s.webhooks, OnFlow: func(st elicitation.Status) { s.metrics.Flow(string(st)) }, Now: cfg.Now}); err != nil {
		return err
	}
	// Per-request approvals (issue 36): asked by the proxy, answered on the
	// connect pages; its links live as long as connect links.
	linkTTL := cfg.Connect.ElicitationTTL
	if linkTTL <= 0 {
		linkTTL = 15 * time.Minute
	}
	if s.approvals, err = approval.New(approval.Config{Pool: cfg.Pool, Elicitations: s.elicitations, Keyring: s.keyring,
		Webhooks: s.webhooks, TTL: linkTTL, Logger: cfg.Logger, Now: cfg.Now}); err != nil {
		return err
	}
	s.hub.Add(s.approvals.CacheSubscriber())
	// Approvals, shared by both surfaces: one cache, kept fresh by the hub.
	size, now := cfg.Cache.Size, cfg.Now
	if size <= 0 {
		size = 50_000
	}
	if now == nil {
		now = time.Now
	}
	s.consents = consent.NewStore(cfg.Pool, cfg.Cache.ConsentTTL, size, now)
	s.hub.Add(s.consents.CacheSubscriber())
	s.budgets = ratebudget.New(ratebudget.Config{Pool: cfg.Pool, Now: now, Logger: cfg.Logger, OnRemaining: s.metrics.RateBudget})
	s.hub.Add(s.budgets.CacheSubscriber())
	if s.receipts, err = receipt.NewWriter(receipt.Config{Pool: cfg.Pool, Logger: cfg.Logger,
		MaxPending: cfg.Connect.ReceiptsMaxPending, OnDropped: s.metrics.ReceiptsDropped}); err != nil {
		return err
	}
	s.conn, err = connect.New(connect.Config{
		Logger: cfg.Logger, Pool: cfg.Pool, Sessions: s.ident.sessions, Login: s.ident.login,
		Clients: s.ident.clients, Vault: s.vault, Keyring: s.keyring, Catalog: s.catalog, Orgs: s.orgs,
		PublicURL: cfg.PublicURL.String(), Now: cfg.Now, Consents: s.consents,
		Elicitations: s.elicitations, Lifecycle: s.lifecycle, Approvals: s.approvals, Receipts: s.receipts,
	})
	if err != nil {
		return err
	}
	s.api, err = api.New(api.Config{
		Logger: cfg.Logger, Pool: cfg.Pool, Auth: s.ident.auth, Clients: s.ident.clients, Vault: s.vault,
		Keyring: s.keyring, Catalog: s.catalog, Orgs: s.orgs, PublicURL: cfg.PublicURL.String(), Now: cfg.Now,
		OnAuditWriteError: s.metrics.AuditWriteError, OnAuditLost: s.metrics.AuditLost,
		ElicitationTTL: cfg.Connect.ElicitationTTL, RequestStateTTL: cfg.Connect.RequestStateTTL,
		MintLimit: web.NewLimiter(cfg.RateLimit.Mint), MintUserLimit: web.NewLimiter(cfg.RateLimit.MintUser),
		MaxWaiters: cfg.RateLimit.MaxWaiters, Consents: s.consents, Elicitations: s.elicitations,
		Lifecycle: s.lifecycle, Proxy: proxyConfig, OnProxy: s.metrics.Proxy,
		RateBudgets: s.budgets, Approvals: s.approvals, Receipts: s.receipts,
	})
	if err != nil {
		return err
	}
	// The caches whose owners are leaf packages: the connect pages' live
	// sessions (a sign-out or an admin's "end sessions" on any replica must
	// reach them within a second), sealed credentials and client keys.
	s.hub.Add(s.ident.sessions.CacheSubscriber(), s.vault.CacheSubscriber(), s.ident.clients.CacheSubscriber(),
		s.orgs.CacheSubscriber())
	if err := s.newAdmin(ctx); err != nil {
		return err
	}
	// The job queue last: its workers (deliveries, the health job, the
	// sweeps) use what is built above.
	if err := s.newJobs(); err != nil {
		return err
	}
	m := s.metrics
	m.Pool(cfg.Pool)
	m.Cache("user_token", s.ident.verifier.TokenCacheStats)
	m.Cache("client_key", s.ident.clients.CacheStats)
	m.Cache("credential", s.vault.CacheStats)
	m.Cache("consent", s.consents.CacheStats)
	m.Cache("org_app", s.orgs.CacheStats)
	m.Cache("org_trust", s.orgs.TrustCacheStats)
	return nil
}

// newAdmin wires the admin pages and API: an admin session store (its own
// cookie, under the session keys), an OIDC relying party at the admin issuer
// with its own redirect URI (<public URL>/admin/login/callback, to register
// at that issuer) and the vault store; revocations withdraw approvals
// through package consent.
func (s *Server) newAdmin(ctx context.Context) error {
	cfg := s.cfg
	var err error
	s.store, err = admin.NewStore(admin.StoreConfig{Pool: cfg.Pool, Vault: s.vault, Webhooks: s.webhooks, Lifecycle: s.lifecycle,
		Issuers: s.ident.verifier, Now: cfg.Now, Logger: cfg.Logger})
	if err != nil {
		return err
	}
	s.keys = admin.NewKeys(cfg.Pool, cfg.Now, cfg.Logger)
	ac := admin.Config{Logger: cfg.Logger, Store: s.store, Keys: s.keys, Clients: s.ident.clients, Now: cfg.Now}
	// Creating and editing MCP servers and provider apps; the redirect URI
	// of every provider app is the connect pages' callback.
	ac.Catalog, ac.Orgs, ac.AllowHTTP, ac.KeyOverlap = s.catalog, s.orgs, cfg.Dev, cfg.Identity.ClientKeyOverlap
	ac.RedirectURI = strings.TrimRight(cfg.PublicURL.String(), "/") + provider.CallbackPath
	ac.Approvals = s.approvals // an MCP server's approvals on its admin page and API
	if cfg.Admin.Issuer == "" {
		cfg.Logger.InfoContext(ctx, "admin sign-in disabled (CONNECTD_ADMIN_ISSUER not set); the admin API takes admin keys")
	} else {
		ac.Sessions, err = session.New(session.Config{Pool: cfg.Pool, Keys: s.ident.sessionKeys, Name: admin.SessionCookie,
			BindingName: admin.BindingCookie, MaxAge: cfg.Admin.SessionMaxAge,
			IdleTimeout: min(cfg.Identity.SessionIdleTimeout, cfg.Admin.SessionMaxAge)})
		if err != nil {
			return err
		}
		ac.Login, err = mcpauth.NewLogin(mcpauth.LoginConfig{Pool: cfg.Pool, Verifier: s.ident.verifier,
			RedirectURL: cfg.PublicURL.String() + admin.CallbackPath, Logger: cfg.Logger, Now: cfg.Now})
		if err != nil {
			return err
		}
		ac.Policy = admin.Policy{Issuer: cfg.Admin.Issuer, Subjects: cfg.Admin.Subjects, Claim: cfg.Admin.Claim,
			ClaimValue: cfg.Admin.ClaimValue}
		ac.OrgSignIn = s.orgSignIn
	}
	s.adm, err = admin.New(ac)
	return err
}

// orgSignIn names the login issuer an organization's admins sign in at
// (GET /admin/login?org=): its own first login issuer (its SSO), "" when it
// has none or does not exist.
func (s *Server) orgSignIn(ctx context.Context, id string) (string, error) {
	issuers, err := s.orgs.Issuers(ctx, id)
	if errors.Is(err, org.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, is := range issuers {
		if is.Login {
			return is.ID, nil
		}
	}
	return "", nil
}

// Public is the public listener's handler: connect pages, /v1, /admin,
// probes and static files.
func (s *Server) Public() http.Handler { return s.public }

// Internal is the operators' listener's handler: probes, Prometheus metrics
// and pprof.
func (s *Server) Internal() http.Handler { return s.internal }

// publicHandler is the route table of the public listener, wrapped in
// web.Public: security headers, cross-origin protection, rate limits, the
// access log and the trusted-proxy context for every route on it, whichever
// package registered the route; each request counted by route pattern and
// status.
func (s *Server) publicHandler() (http.Handler, error) {
	mux := web.NewMux()
	mux.Handle(web.AssetRoute("GET /healthz", http.HandlerFunc(s.checker.Healthz)))
	mux.Handle(web.AssetRoute("GET /readyz", http.HandlerFunc(s.checker.Readyz)))
	s.conn.Routes(mux) // /c/{id}, /oauth/callback, /login, /login/callback, /session, /logout, /account
	s.api.Routes(mux)  // /v1/..., /oauth/token, /.well-known/oauth-authorization-server
	s.adm.Routes(mux)  // /admin/..., /admin/api/...
	static, _ := fs.Sub(templates.Static, "static")
	mux.Handle(web.AssetRoute("GET /static/", http.StripPrefix("/static/", web.Static(static))))
	mux.Handle(web.AssetRoute("GET "+templates.BrandCSSPath, web.BrandCSS(s.cfg.Connect.Brand)))
	mux.Handle(web.AssetRoute("GET /static/brand/{file}", s.conn.BrandCSS())) // templates.OrgBrandCSSPath
	mux.Handle(web.PageRoute("GET /language", web.ClassBrowser, s.cfg.Logger, web.LanguageChoice()))
	mux.Handle(web.Route{Pattern: "/", Kind: web.KindPage, Class: web.ClassBrowser, Handler: web.Fallback(s.cfg.Logger)})
	return web.Public(mux, web.PublicConfig{
		Logger:         s.cfg.Logger,
		HSTS:           !s.cfg.Dev,
		TrustedOrigins: []string{s.cfg.PublicURL.Scheme + "://" + s.cfg.PublicURL.Host},
		Limits:         s.cfg.RateLimit.Public,
		Observe:        s.metrics.Observer(mux),
		DB:             s.cfg.DB,
		Brand:          s.cfg.Connect.Brand,
		Tracer:         s.cfg.Tracing,
	})
}

// internalHandler is the route table of the operators' listener.
func (s *Server) internalHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.checker.Healthz)
	mux.HandleFunc("GET /readyz", s.checker.Readyz)
	mux.Handle("GET /metrics", s.metrics.Handler())
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	if s.cfg.Tracing != nil {
		return web.Chain(mux, web.RequestIDs, web.Tracing(s.cfg.Tracing, web.MuxRoutes(mux)), web.TextOnly(s.cfg.Logger))
	}
	return web.Chain(mux, web.RequestIDs, web.TextOnly(s.cfg.Logger))
}

// Run runs the process's background work until ctx ends, and returns when
// all of it has: the notification hub (cache invalidations and long-poll
// wake-ups on every replica), the job queue (webhook deliveries, the health
// job and the database sweeps — connect's, the audit's and the receipts'
// retention — shared with every replica), connect's own background work
// (the sampled audit rows) and the access receipts' writer. Their last acts
// (writing the sampled audit counts, the receipts' last flush) need the
// pool, so the caller closes the pool only after Run returned. Call it once.
func (s *Server) Run(ctx context.Context) {
	ran := false
	s.runOnce.Do(func() { ran = true })
	if !ran {
		panic("server: Run called twice")
	}
	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); s.hub.Run(ctx) }()
	go func() { defer wg.Done(); s.receipts.Run(ctx) }() // its last flush at the end, before the pool closes
	go func() { defer wg.Done(); s.jobs.run(ctx, s.cfg.Logger) }()
	go func() { defer wg.Done(); s.api.Run(ctx) }()
	wg.Wait()
}

// Close stops what New started (background JWKS refreshes, the probes'
// database handle). It does not close the pool.
func (s *Server) Close() {
	s.ident.Close()
	s.checker.Close()
}

// Connect is the browser surface: sign-in, the connect flow, the account
// page.
func (s *Server) Connect() *connect.Server { return s.conn }

// Consents is the approvals store both surfaces share.
func (s *Server) Consents() *consent.Store { return s.consents }

// API is the MCP-server surface: /v1, the proxy, the token endpoint.
func (s *Server) API() *api.Server { return s.api }

// Sweep is what a replica's background work does over time, at once: it
// writes the sampled audit rows that are due (the counts whose period has
// passed, and the rows queued for Run's writer: a caller need not wait for
// it) and sweeps the database (sweepDatabase). Tests call it; in service
// the database part runs on the job queue, once for all replicas.
func (s *Server) Sweep(ctx context.Context) error {
	s.api.Sweep(ctx)
	if err := s.receipts.Flush(ctx); err != nil {
		return err
	}
	_, err := s.sweepDatabase(ctx)
	return err
}

// sweepDatabase is the database sweep job's run: expired and old
// elicitations (their store's), expired OAuth states and browser sessions
// (the browser surface's), used request_state ids and spent client
// assertions (the MCP-server surface's), ended rate-budget holds and
// windows (ratebudget's); it returns how many elicitations expired.
func (s *Server) sweepDatabase(ctx context.Context) (int64, error) {
	expired, err := s.elicitations.Sweep(ctx)
	if err != nil {
		return 0, err
	}
	if err := s.conn.SweepDatabase(ctx); err != nil {
		return expired, err
	}
	if err := s.budgets.Sweep(ctx); err != nil {
		return expired, err
	}
	if err := s.approvals.Sweep(ctx); err != nil {
		return expired, err
	}
	return expired, s.api.SweepDatabase(ctx)
}

// Admin is the admin pages and API.
func (s *Server) Admin() *admin.Server { return s.adm }

// Webhooks is the webhook service (endpoints, deliveries).
func (s *Server) Webhooks() *webhook.Service { return s.webhooks }

// AdminStore is the admin Store (the CLI's too).
func (s *Server) AdminStore() *admin.Store { return s.store }

// AdminKeys is the admin API key registry.
func (s *Server) AdminKeys() *admin.Keys { return s.keys }

// Vault is the credential store.
func (s *Server) Vault() *vault.Store { return s.vault }

// Keyring is the vault keyring in use (in dev mode, possibly ephemeral).
func (s *Server) Keyring() *keyring.Keyring { return s.keyring }

// Catalog is the provider catalog.
func (s *Server) Catalog() *provider.Catalog { return s.catalog }

// Orgs is the organizations and their provider apps (org.Store.Resolve:
// which app an organization uses at a provider).
func (s *Server) Orgs() *org.Store { return s.orgs }

// Clients is the MCP-server client registry.
func (s *Server) Clients() *clientauth.Clients { return s.ident.clients }

// Verifier verifies MCP user tokens and ID tokens.
func (s *Server) Verifier() *mcpauth.Verifier { return s.ident.verifier }

// Login is the end users' OIDC relying party (/login).
func (s *Server) Login() *mcpauth.Login { return s.ident.login }

// Sessions is the end users' session store.
func (s *Server) Sessions() *session.Store { return s.ident.sessions }
