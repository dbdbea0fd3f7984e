package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/connectd/connectd/internal/approval"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/signin"
	"github.com/connectd/connectd/internal/web"
)

// DefaultRetention is how long audit events are kept unless configured.
const DefaultRetention = 90 * 24 * time.Hour

// Config holds every dependency of the Server.
type Config struct {
	Logger  *slog.Logger
	Store   *Store
	Keys    *Keys
	Clients *clientauth.Clients // the MCP-server clients page
	// Approvals lists each MCP server's per-request approvals on its page
	// and at GET /admin/api/clients/{id}/approvals (approvals.go); nil:
	// the page says there is none to show and the API answers 503.
	Approvals *approval.Store
	// Creating and editing MCP servers and provider apps (clients_edit.go,
	// apps.go). Catalog is the provider catalog a new MCP server's
	// providers must be in and the apps page lists (nil: none); Orgs sets
	// and removes provider apps (nil: the apps routes answer 503);
	// RedirectURI is the deployment's OAuth callback, <public URL> +
	// provider.CallbackPath, shown to register at a provider; AllowHTTP
	// accepts http:// URLs (dev mode), as the client registry does;
	// KeyOverlap is how long a rotated key keeps working by default
	// (CONNECTD_CLIENT_KEY_OVERLAP; 0: DefaultKeyOverlap).
	Catalog     *provider.Catalog
	Orgs        *org.Store
	RedirectURI string
	AllowHTTP   bool
	KeyOverlap  time.Duration

	// Sessions is the admin session store: its own cookie (SessionCookie,
	// BindingCookie), never the end users'. Required with Login.
	Sessions *session.Store
	// Login is an OIDC relying party whose redirect URL is
	// <public URL>/admin/login/callback (CallbackPath). Nil disables admin
	// sign-in: every page refuses, the API still takes keys.
	Login  *mcpauth.Login
	Policy Policy
	// OrgSignIn, when set, names the login issuer (its id) an
	// organization's admins sign in at — the organization's own (its SSO),
	// "" when it has none or does not exist (the admin issuer then). It
	// serves GET /admin/login?org=ORG.
	OrgSignIn func(ctx context.Context, org string) (string, error)
	Now       func() time.Time // default time.Now
}

// Server serves the admin pages and the admin JSON API.
type Server struct {
	logger    *slog.Logger
	store     *Store
	keys      *Keys
	clients   *clientauth.Clients
	approvals *approval.Store
	manage    manage // Config's fields for creating and editing (clients_edit.go)
	sessions  *session.Store
	login     *mcpauth.Login
	signin    *signin.Flow
	policy    Policy
	orgSignIn func(ctx context.Context, org string) (string, error)
	issuerURL string // the admin issuer's URL, as sessions record it
	now       func() time.Time
}

// New returns a Server over cfg's dependencies.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil || cfg.Store == nil || cfg.Keys == nil || cfg.Clients == nil {
		return nil, errors.New("admin: Logger, Store, Keys and Clients are required")
	}
	s := &Server{logger: cfg.Logger, store: cfg.Store, keys: cfg.Keys, clients: cfg.Clients, approvals: cfg.Approvals, sessions: cfg.Sessions,
		login: cfg.Login, policy: cfg.Policy, orgSignIn: cfg.OrgSignIn, now: cfg.Now}
	if s.now == nil {
		s.now = time.Now
	}
	if s.login != nil {
		if s.sessions == nil {
			return nil, errors.New("admin: Sessions is required with Login")
		}
		if err := s.policy.validate(); err != nil {
			return nil, err
		}
		for _, is := range s.login.Issuers() {
			if is.ID == s.policy.Issuer || is.URL == s.policy.Issuer {
				s.issuerURL = is.URL
			}
		}
		if s.issuerURL == "" {
			return nil, fmt.Errorf("admin: issuer %q is not a login issuer", s.policy.Issuer)
		}
	}
	s.manage = newManage(cfg)
	var err error
	if s.signin, err = s.newSignin(); err != nil {
		return nil, err
	}
	return s, nil
}

// Access says who may use a route.
type Access string

// Route accesses.
const (
	// Public routes are how one becomes an admin (sign-in) or stops being one.
	Public Access = "public"
	// AdminPage routes need an admin session cookie; their forms need its
	// CSRF token.
	AdminPage Access = "page"
	// AdminAPI routes need an admin API key.
	AdminAPI Access = "api"
)

// Route is one entry of the route table.
type Route struct {
	Pattern string // a ServeMux pattern
	Access  Access
	// Least is the least role in the acting organization the route needs
	// (every AdminPage and AdminAPI route has one; operators pass every
	// one). Empty for Public routes.
	Least Role
}

type route struct {
	Route
	h func(http.ResponseWriter, *http.Request) error
}

// routes is the whole route table of the package. Routes wraps every handler
// in the guard its Access and Least name, so no handler is reachable
// unguarded, nor by a role below its least; the catch-alls make unknown
// /admin paths answer a non-admin with 403 too. Reads need viewer,
// revocations and cut-offs security, clients' keys and webhooks admin, an
// organization's admins owner.
func (s *Server) routes() []route {
	r := func(pattern string, a Access, least Role, h func(http.ResponseWriter, *http.Request) error) route {
		return route{Route{pattern, a, least}, h}
	}
	const (
		page = AdminPage
		api  = AdminAPI
	)
	return []route{
		r("GET "+LoginPath, Public, "", s.startSignin),
		r("GET "+CallbackPath, Public, "", s.signin.Finish),
		r("POST /admin/logout", Public, "", s.signin.Logout),

		r("GET /admin/{$}", page, RoleViewer, s.home),
		r("GET /admin/connections", page, RoleViewer, s.connectionsPage),
		r("GET /admin/connections/{id}", page, RoleViewer, s.connectionPage),
		r("GET /admin/connections/{id}/revoke", page, RoleSecurity, s.confirmRevokePage),
		r("POST /admin/connections/{id}/revoke", page, RoleSecurity, s.revokePage),
		r("POST /admin/sessions/end", page, RoleSecurity, s.endSessionsPage),
		r("GET /admin/clients", page, RoleViewer, s.clientsPage),
		r("GET /admin/clients/{id}", page, RoleViewer, s.clientPage),
		r("GET /admin/clients/{id}/cut-off", page, RoleSecurity, s.confirmCutOffPage),
		r("POST /admin/clients/{id}/cut-off", page, RoleSecurity, s.cutOffPage),
		r("POST /admin/clients/{id}/cut-off/revoke", page, RoleSecurity, s.revokeExposurePage),
		r("POST /admin/clients/{id}/enable", page, RoleSecurity, s.enablePage), // cutoff_pages.go
		r("POST /admin/clients/{id}/webhooks", page, RoleAdmin, s.createWebhookPage),
		r("GET /admin/webhooks/{id}", page, RoleViewer, s.webhookPage),
		r("GET /admin/webhooks/{id}/delete", page, RoleAdmin, s.confirmDeleteWebhookPage),
		r("POST /admin/webhooks/{id}/delete", page, RoleAdmin, s.deleteWebhookPage),
		r("GET /admin/deliveries/{id}", page, RoleViewer, s.deliveryPage),
		r("POST /admin/deliveries/{id}/redeliver", page, RoleAdmin, s.redeliverPage),
		r("GET /admin/events", page, RoleViewer, s.eventsPage),
		r("GET /admin/admins", page, RoleOwner, s.adminsPage), // roles_pages.go
		r("POST /admin/admins", page, RoleOwner, s.grantPage),
		r("POST /admin/admins/revoke", page, RoleOwner, s.revokeRolePage),
		// Creating and editing MCP servers (clients_edit.go) and provider apps (apps.go).
		r("POST /admin/clients", page, RoleAdmin, s.createClientPage),
		r("POST /admin/clients/{id}/registration", page, RoleAdmin, s.registrationPage),
		r("POST /admin/clients/{id}/display", page, RoleAdmin, s.displayPage),
		r("POST /admin/clients/{id}/proxy-only", page, RoleAdmin, s.proxyOnlyPage),
		r("POST /admin/clients/{id}/rotate-key", page, RoleAdmin, s.rotateKeyPage),
		r("GET /admin/apps", page, RoleOwner, s.appsPage),
		r("POST /admin/apps", page, RoleOwner, s.setAppPage),
		r("POST /admin/apps/remove", page, RoleOwner, s.removeAppPage),
		r("/admin/", page, RoleViewer, notFound),

		r("GET /admin/api/connections", api, RoleViewer, s.apiConnections),
		r("GET /admin/api/connections/{id}", api, RoleViewer, s.apiConnection),
		r("POST /admin/api/connections/{id}/revoke", api, RoleSecurity, s.apiRevoke),
		r("POST /admin/api/sessions/end", api, RoleSecurity, s.apiEndSessions),
		r("GET /admin/api/clients", api, RoleViewer, s.apiClients),
		r("POST /admin/api/clients/{id}/cut-off", api, RoleSecurity, s.apiCutOff),
		r("PUT /admin/api/clients/{id}/jwt-keys", api, RoleAdmin, s.apiJWTKeys), // jwtkeys.go
		r("GET /admin/api/clients/{id}/webhooks", api, RoleViewer, s.apiWebhooks),
		r("GET /admin/api/clients/{id}/approvals", api, RoleViewer, s.apiApprovals), // approvals.go
		r("POST /admin/api/clients/{id}/webhooks", api, RoleAdmin, s.apiCreateWebhook),
		r("DELETE /admin/api/webhooks/{id}", api, RoleAdmin, s.apiDeleteWebhook),
		r("GET /admin/api/webhooks/{id}/deliveries", api, RoleViewer, s.apiDeliveries),
		r("GET /admin/api/deliveries/{id}", api, RoleViewer, s.apiDelivery),
		r("POST /admin/api/deliveries/{id}/redeliver", api, RoleAdmin, s.apiRedeliver),
		r("GET /admin/api/events", api, RoleViewer, s.apiEvents),
		r("GET /admin/api/admins", api, RoleOwner, s.apiAdmins), // roles_api.go
		r("PUT /admin/api/admins", api, RoleOwner, s.apiGrant),
		r("POST /admin/api/admins/revoke", api, RoleOwner, s.apiRevokeRole),
		// Creating and editing MCP servers (clients_edit.go) and provider apps (apps.go).
		r("POST /admin/api/clients", api, RoleAdmin, s.apiCreateClient),
		r("PATCH /admin/api/clients/{id}", api, RoleAdmin, s.apiPatchClient),
		r("POST /admin/api/clients/{id}/rotate-key", api, RoleAdmin, s.apiRotateKey),
		r("GET /admin/api/apps", api, RoleOwner, s.apiApps),
		r("PUT /admin/api/apps/{provider}", api, RoleOwner, s.apiSetApp),
		r("DELETE /admin/api/apps/{provider}", api, RoleOwner, s.apiRemoveApp),
		r("/admin/api/", api, RoleViewer, notFound),
	}
}

// Routes registers the admin routes on mux. Every admin route, its API
// included, draws from the per-address browser budget: admin tools are few
// and their keys are not the /v1 client keys the API budget counts by.
func (s *Server) Routes(mux *web.Mux) {
	for _, rt := range s.routes() {
		if rt.Access != Public && !rt.Least.Valid() {
			panic("admin: route " + rt.Pattern + " has no least role")
		}
		switch rt.Access {
		case Public:
			mux.Handle(web.PageRoute(rt.Pattern, web.ClassBrowser, s.logger, rt.h))
		case AdminPage:
			mux.Handle(web.PageRoute(rt.Pattern, web.ClassBrowser, s.logger, s.requireSession(rt.Least, rt.h)))
		case AdminAPI:
			mux.Handle(web.APIRoute(rt.Pattern, web.ClassBrowser, s.logger, s.requireKey(rt.Least, rt.h)))
		default:
			panic("admin: route " + rt.Pattern + " has no access")
		}
	}
}

// RouteTable lists the registered routes and their access (for tests and
// docs).
func (s *Server) RouteTable() []Route {
	var out []Route
	for _, rt := range s.routes() {
		out = append(out, rt.Route)
	}
	return out
}

func notFound(w http.ResponseWriter, r *http.Request) error {
	return web.Errorf(http.StatusNotFound, "not_found", "no such admin resource")
}
