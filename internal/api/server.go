package api

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/approval"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/lifecycle"
	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/proxy"
	"github.com/connectd/connectd/internal/ratebudget"
	"github.com/connectd/connectd/internal/receipt"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
)

// Config holds every dependency of the Server.
type Config struct {
	Logger *slog.Logger
	Pool   *pgxpool.Pool
	Auth   *clientauth.Authenticator // /v1: client key + user token
	// Clients is the registry Auth authenticates with: its changes end the
	// long-polls and proxied calls of a client disabled on any replica.
	Clients *clientauth.Clients
	Vault   *vault.Store
	// Keyring is the vault keyring as configured; request_state is sealed
	// under its own Purpose of it.
	Keyring *keyring.Keyring
	Catalog *provider.Catalog
	// Orgs says which provider app a client's organization uses (a mint
	// for a provider where it has none is refused: provider_app_required).
	Orgs *org.Store
	// PublicURL is the browser-facing origin (no trailing slash); connect
	// URLs and the token endpoint's URL are built from it.
	PublicURL string
	// ElicitationTTL is how long a connect URL stays usable (default 15m).
	ElicitationTTL time.Duration
	// RequestStateTTL is how long a request_state can be resolved (default 1h).
	RequestStateTTL time.Duration
	// MintLimit bounds mints per (user, client), so one MCP server cannot
	// spend the budget of a user's other servers; MintUserLimit is the
	// ceiling per user over all of them (nil: unlimited).
	MintLimit     *web.Limiter
	MintUserLimit *web.Limiter
	// MaxWaiters caps the long-polls (GET /v1/elicitations/{id}?wait=) one
	// client key may hold open at once on this replica (default 64; a
	// negative value: no cap). Past it the poll is refused with 429.
	MaxWaiters int
	// Consents is the approvals store (its cache kept fresh by the hub),
	// shared with the browser surface.
	Consents *consent.Store
	// Elicitations is the elicitation store both surfaces share.
	Elicitations *elicitation.Store
	// Approvals are the per-request approvals the proxy asks (issue 36):
	// required.
	Approvals *approval.Store
	// Lifecycle ends connections (unlink).
	Lifecycle *lifecycle.Owner
	Now       func() time.Time // default time.Now
	// OnAuditWriteError and OnAuditLost, when set, count the sampled audit
	// rows (token reads, refused calls) that could not be written, for
	// metrics: OnAuditWriteError once per failed write, whose rows are kept
	// and retried; OnAuditLost the rows of kind given up at shutdown.
	OnAuditWriteError func()
	OnAuditLost       func(kind string, rows int)
	// Proxy configures the provider API proxy (/v1/proxy): its Transport
	// (the egress client's), body caps and deadline.
	Proxy proxy.Config
	// OnProxy, when set, is told of every proxied call: provider, the
	// status answered by the provider (0: none) and how long it took.
	OnProxy func(provider string, status int, took time.Duration)
	// RateBudgets keeps providers' rate limits for proxied calls, across
	// replicas (nil: none kept).
	RateBudgets *ratebudget.Store
	// Receipts records every proxied call and token read for the user's
	// access receipts (nil: none recorded; receipts.go).
	Receipts *receipt.Writer
}

// The keyring.Keyring.Purpose label of what this package seals (DESIGN
// invariant 13: one key per purpose, derived from every configured key, so
// rotation covers them). A label is never changed or reused: what was sealed
// under it would no longer open.
const requestStatePurpose = "connectd/connect/request-state/v1"

// Server serves the MCP-server surface: the /v1 API, the provider API proxy
// and the token endpoint.
type Server struct {
	logger          *slog.Logger
	pool            *pgxpool.Pool
	auth            *clientauth.Authenticator
	clients         *clientauth.Clients
	vault           *vault.Store
	keys            *keyring.Keyring // as configured: request_state is sealed under keys.Purpose(requestStatePurpose)
	catalog         *provider.Catalog
	orgs            *org.Store
	publicURL       string
	elicitationTTL  time.Duration
	requestStateTTL time.Duration
	mintLimit       *web.Limiter
	mintUserLimit   *web.Limiter
	waiters         *elicitation.Waiters
	now             func() time.Time
	elicitations    *elicitation.Store
	approvals       *approval.Store
	clientWakeups   *elicitation.Wakeups // by client id: a client changed (disabled, keys rotated) on some replica
	consents        *consent.Store
	forwarder       *proxy.Forwarder
	budgets         *ratebudget.Store
	onProxy         func(string, int, time.Duration)
	proxyMaxBody    int64
	lifecycle       *lifecycle.Owner // the end of a connection (unlink)
	reads, refusals *sampler         // sampled audit of token reads and refused /v1 calls
	done            chan struct{}    // closed when Run ends: long-polls answer at once
	doneOnce        sync.Once
	// Config.OnAuditWriteError and OnAuditLost (nil: not counted).
	onAuditWriteError func()
	onAuditLost       func(kind string, rows int)
	receipts          *receipt.Writer // Config.Receipts
}

// New returns a Server over cfg's dependencies.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil || cfg.Pool == nil || cfg.Auth == nil || cfg.Clients == nil || cfg.Vault == nil ||
		cfg.Keyring == nil || cfg.Catalog == nil || cfg.PublicURL == "" || cfg.Consents == nil ||
		cfg.Elicitations == nil || cfg.Lifecycle == nil || cfg.Orgs == nil || cfg.Approvals == nil {
		return nil, errors.New("api: Logger, Pool, Auth, Clients, Vault, Keyring, Catalog, Orgs, PublicURL, Consents, Elicitations, Approvals and Lifecycle are required")
	}
	s := &Server{
		logger: cfg.Logger, pool: cfg.Pool, auth: cfg.Auth, clients: cfg.Clients, vault: cfg.Vault, catalog: cfg.Catalog, orgs: cfg.Orgs,
		keys: cfg.Keyring, publicURL: strings.TrimRight(cfg.PublicURL, "/"), elicitationTTL: cfg.ElicitationTTL,
		requestStateTTL: cfg.RequestStateTTL, mintLimit: cfg.MintLimit, mintUserLimit: cfg.MintUserLimit,
		waiters: elicitation.NewWaiters(cfg.MaxWaiters), now: cfg.Now, elicitations: cfg.Elicitations, approvals: cfg.Approvals,
		consents: cfg.Consents, lifecycle: cfg.Lifecycle, done: make(chan struct{}),
		reads: newSampler(readPeriod, maxReadKeys, true), refusals: newSampler(refusalPeriod, maxRefusalKeys, false),
		onAuditWriteError: cfg.OnAuditWriteError, onAuditLost: cfg.OnAuditLost, budgets: cfg.RateBudgets,
		receipts: cfg.Receipts,
	}
	if s.elicitationTTL <= 0 {
		s.elicitationTTL = 15 * time.Minute
	}
	if s.requestStateTTL <= 0 {
		s.requestStateTTL = time.Hour
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.forwarder, s.onProxy = proxy.New(cfg.Proxy), cfg.OnProxy
	s.proxyMaxBody = cfg.Proxy.MaxRequestBytes
	if s.proxyMaxBody <= 0 {
		s.proxyMaxBody = proxy.DefaultMaxRequestBytes
	}
	if s.onProxy == nil {
		s.onProxy = func(string, int, time.Duration) {}
	}
	// A client disabled on any replica ends its long-polls here at once
	// (waitFor checks its key again); the client registry's notifications
	// say which.
	s.clientWakeups = elicitation.NewWakeups()
	cfg.Clients.OnChange(s.clientWakeups.WakeKey)
	return s, nil
}

// routes is the whole route table of the package: each route's pattern,
// what it answers (API: its errors and headers) and which rate-limit budget
// it draws from, and its handler.
func (s *Server) routes() []web.Route {
	api := func(pattern string, h web.APIFunc) web.Route {
		return web.APIRoute(pattern, web.ClassAPI, s.logger, h)
	}
	return []web.Route{
		// RFC 8693 token exchange and its RFC 8414 metadata (exchange.go).
		api("POST "+TokenPath, s.exchange),
		web.AssetRoute("GET "+MetadataPath, web.API(s.logger, s.metadata)),

		// The /v1 API for MCP servers (api.go).
		api("POST /v1/elicitations", s.mint),
		api("POST /v1/elicitations/resolve", s.resolve),
		api("GET /v1/elicitations/{id}", s.status),
		api("DELETE /v1/elicitations/{id}", s.cancel),
		api("GET /v1/connections", s.listConnections),
		api("GET /v1/connections/{provider}/token", s.token),
		api("DELETE /v1/connections/{provider}", s.unlink),
		// The provider API proxy (proxy.go): the methods it forwards,
		// bodies up to the proxy's cap, streamed; raw (its paths are the
		// provider's: ServeMux does not clean or redirect them).
		func() web.Route {
			rt := api(proxyPrefix+"{provider}/{path...}", s.proxyCall)
			rt.MaxBody, rt.Raw = s.proxyMaxBody, true
			return rt
		}(),
		api("/v1/", func(w http.ResponseWriter, r *http.Request) error {
			return web.Errorf(http.StatusNotFound, "not_found", "no such API endpoint")
		}),
	}
}

// Routes registers the route table on mux.
func (s *Server) Routes(mux *web.Mux) {
	for _, rt := range s.routes() {
		mux.Handle(rt)
	}
}
