package connect

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/approval"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/lifecycle"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/receipt"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/signin"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// Config holds every dependency of the Server.
type Config struct {
	Logger   *slog.Logger
	Pool     *pgxpool.Pool
	Sessions *session.Store
	Login    *mcpauth.Login
	// Clients is the client registry (client names for consent pages).
	Clients *clientauth.Clients
	Vault   *vault.Store // its credential cache is kept fresh by the process hub
	// Keyring is the vault keyring as configured; PKCE verifiers are sealed
	// under their own Purpose of it.
	Keyring *keyring.Keyring
	Catalog *provider.Catalog
	// Orgs is the organizations store: which provider app an elicitation's
	// organization uses, and its brand.
	Orgs *org.Store
	// PublicURL is the browser-facing origin (no trailing slash); the
	// provider redirect URI is built from it.
	PublicURL string
	// Consents is the approvals store (its cache kept fresh by the hub),
	// shared with the MCP-server surface.
	Consents *consent.Store
	// Elicitations is the elicitation store both surfaces share.
	Elicitations *elicitation.Store
	// Approvals are the per-request approvals whose pages these are
	// (issue 36): required.
	Approvals *approval.Store
	// Lifecycle owns a connection's changes and end: the events of a stored
	// connection, an approval withdrawn and Disconnect on the account page.
	Lifecycle *lifecycle.Owner
	Now       func() time.Time // default time.Now
	// Receipts records the uses the browser surface sees for the users'
	// access receipts (approvals answered; package receipt). Nil: none.
	Receipts *receipt.Writer
}

// The keyring.Keyring.Purpose label of what this package seals (DESIGN
// invariant 13: one key per purpose, derived from every configured key, so
// rotation covers them). A label is never changed or reused: what was sealed
// under it would no longer open.
const verifierPurpose = "connectd/connect/pkce-verifier/v1"

// Server serves the browser surface: sign-in, the connect flow's pages
// (consent, API-key form, provider redirects and callbacks) and the
// account page.
type Server struct {
	logger       *slog.Logger
	pool         *pgxpool.Pool
	sessions     *session.Store
	login        *mcpauth.Login
	clients      *clientauth.Clients
	vault        *vault.Store
	verifierKeys *keyring.Keyring // keys.Purpose(verifierPurpose): seals PKCE verifiers
	catalog      *provider.Catalog
	orgs         *org.Store
	publicURL    string
	now          func() time.Time
	elicitations *elicitation.Store
	approvals    *approval.Store
	consents     *consent.Store
	signin       *signin.Flow     // GET /login, /login/callback, POST /logout
	lifecycle    *lifecycle.Owner // a connection's events, withdrawals and end (Disconnect)
	receipts     *receipt.Writer  // Config.Receipts
}

// New returns a Server over cfg's dependencies.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil || cfg.Sessions == nil || cfg.Login == nil || cfg.Pool == nil || cfg.Clients == nil ||
		cfg.Vault == nil || cfg.Keyring == nil || cfg.Catalog == nil || cfg.PublicURL == "" || cfg.Consents == nil ||
		cfg.Elicitations == nil || cfg.Lifecycle == nil || cfg.Orgs == nil || cfg.Approvals == nil {
		return nil, errors.New("connect: Logger, Pool, Sessions, Login, Clients, Vault, Keyring, Catalog, Orgs, PublicURL, Consents, Elicitations, Approvals and Lifecycle are required")
	}
	s := &Server{
		logger: cfg.Logger, pool: cfg.Pool, sessions: cfg.Sessions, login: cfg.Login,
		clients: cfg.Clients, vault: cfg.Vault, catalog: cfg.Catalog, orgs: cfg.Orgs, verifierKeys: cfg.Keyring.Purpose(verifierPurpose),
		publicURL: strings.TrimRight(cfg.PublicURL, "/"), now: cfg.Now, elicitations: cfg.Elicitations,
		approvals: cfg.Approvals, consents: cfg.Consents, lifecycle: cfg.Lifecycle, receipts: cfg.Receipts,
	}
	if s.now == nil {
		s.now = time.Now
	}
	var err error
	if s.signin, err = s.newSignin(); err != nil {
		return nil, err
	}
	return s, nil
}

// routes is the whole route table of the package: each route's pattern, what
// it answers (a page: its errors and headers) and which rate-limit budget
// it draws from, and its handler.
func (s *Server) routes() []web.Route {
	page := func(pattern string, class web.RouteClass, h web.PageFunc) web.Route {
		return web.PageRoute(pattern, class, s.logger, h)
	}
	return []web.Route{
		// The front page: what the service is, and the way to /account.
		page("GET /{$}", web.ClassBrowser, func(w http.ResponseWriter, r *http.Request) error {
			return web.Render(w, r, http.StatusOK, templates.HomePage())
		}),

		// Browser sign-in at the MCP authorization servers (package signin).
		page("GET /login", web.ClassLogin, s.signin.Start),
		page("GET /login/callback", web.ClassLogin, s.signin.Finish),
		page("POST /logout", web.ClassBrowser, s.signin.Logout),
		page("GET /session", web.ClassBrowser, s.sessionPage), // login.go

		// The user's account page (account.go).
		page("GET /account", web.ClassBrowser, s.accountPage),
		page("GET "+receiptsPath, web.ClassBrowser, s.downloadReceipts), // account_receipts.go
		page("POST /account/withdraw", web.ClassBrowser, s.withdraw),
		page("POST /account/label", web.ClassBrowser, s.relabel),
		page("GET /account/disconnect", web.ClassBrowser, s.confirmDisconnect), // the confirmation step
		page("POST /account/disconnect", web.ClassBrowser, s.disconnect),
		page("POST /account/notices/dismiss", web.ClassBrowser, s.dismissNotice),

		// The connect flow (flow.go).
		page("GET /c/{id}", web.ClassBrowser, s.connectPage),
		page("POST /c/{id}", web.ClassBrowser, s.decide),
		page("POST /c/{id}/key", web.ClassBrowser, s.submitKey),
		page("POST /c/{id}/account", web.ClassBrowser, s.chooseAccountForm),
		page("POST /c/{id}/switch", web.ClassBrowser, s.switchAccount),
		page("GET /oauth/callback", web.ClassBrowser, s.callback),
	}
}

// Routes registers the route table on mux.
func (s *Server) Routes(mux *web.Mux) {
	for _, rt := range s.routes() {
		mux.Handle(rt)
	}
}

// noStore keeps pages that carry per-user content or one-time URLs out of
// every cache.
func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
}
