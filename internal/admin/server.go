package admin

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/mcpauth"
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
	// Sessions is the admin session store: its own cookie (SessionCookie,
	// BindingCookie), never the end users'. Required with Login.
	Sessions *session.Store
	// Login is an OIDC relying party whose redirect URL is
	// <public URL>/admin/login/callback (CallbackPath). Nil disables admin
	// sign-in: every page refuses, the API still takes keys.
	Login  *mcpauth.Login
	Policy Policy
	Now    func() time.Time // default time.Now
}

// Server serves the admin pages and the admin JSON API.
type Server struct {
	logger    *slog.Logger
	store     *Store
	keys      *Keys
	clients   *clientauth.Clients
	sessions  *session.Store
	login     *mcpauth.Login
	signin    *signin.Flow
	policy    Policy
	issuerURL string // the admin issuer's URL, as sessions record it
	now       func() time.Time
}

// New returns a Server over cfg's dependencies.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil || cfg.Store == nil || cfg.Keys == nil || cfg.Clients == nil {
		return nil, errors.New("admin: Logger, Store, Keys and Clients are required")
	}
	s := &Server{logger: cfg.Logger, store: cfg.Store, keys: cfg.Keys, clients: cfg.Clients, sessions: cfg.Sessions,
		login: cfg.Login, policy: cfg.Policy, now: cfg.Now}
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
}

type route struct {
	Route
	h func(http.ResponseWriter, *http.Request) error
}

// routes is the whole route table of the package. Routes wraps every handler
// in the guard its Access names, so no handler is reachable unguarded; the
// catch-alls make unknown /admin paths answer a non-admin with 403 too.
func (s *Server) routes() []route {
	r := func(pattern string, a Access, h func(http.ResponseWriter, *http.Request) error) route {
		return route{Route{pattern, a}, h}
	}
	return []route{
		r("GET "+LoginPath, Public, s.signin.Start),
		r("GET "+CallbackPath, Public, s.signin.Finish),
		r("POST /admin/logout", Public, s.signin.Logout),

		r("GET /admin/{$}", AdminPage, s.home),
		r("GET /admin/connections", AdminPage, s.connectionsPage),
		r("GET /admin/connections/{id}", AdminPage, s.connectionPage),
		r("GET /admin/connections/{id}/revoke", AdminPage, s.confirmRevokePage),
		r("POST /admin/connections/{id}/revoke", AdminPage, s.revokePage),
		r("POST /admin/sessions/end", AdminPage, s.endSessionsPage),
		r("GET /admin/clients", AdminPage, s.clientsPage),
		r("GET /admin/clients/{id}", AdminPage, s.clientPage),
		r("GET /admin/clients/{id}/cut-off", AdminPage, s.confirmCutOffPage),
		r("POST /admin/clients/{id}/cut-off", AdminPage, s.cutOffPage),
		r("POST /admin/clients/{id}/cut-off/revoke", AdminPage, s.revokeExposurePage),
		r("POST /admin/clients/{id}/webhooks", AdminPage, s.createWebhookPage),
		r("GET /admin/webhooks/{id}", AdminPage, s.webhookPage),
		r("GET /admin/webhooks/{id}/delete", AdminPage, s.confirmDeleteWebhookPage),
		r("POST /admin/webhooks/{id}/delete", AdminPage, s.deleteWebhookPage),
		r("GET /admin/deliveries/{id}", AdminPage, s.deliveryPage),
		r("POST /admin/deliveries/{id}/redeliver", AdminPage, s.redeliverPage),
		r("GET /admin/events", AdminPage, s.eventsPage),
		r("/admin/", AdminPage, notFound),

		r("GET /admin/api/connections", AdminAPI, s.apiConnections),
		r("GET /admin/api/connections/{id}", AdminAPI, s.apiConnection),
		r("POST /admin/api/connections/{id}/revoke", AdminAPI, s.apiRevoke),
		r("POST /admin/api/sessions/end", AdminAPI, s.apiEndSessions),
		r("GET /admin/api/clients", AdminAPI, s.apiClients),
		r("POST /admin/api/clients/{id}/cut-off", AdminAPI, s.apiCutOff),
		r("PUT /admin/api/clients/{id}/jwt-keys", AdminAPI, s.apiJWTKeys), // jwtkeys.go
		r("GET /admin/api/clients/{id}/webhooks", AdminAPI, s.apiWebhooks),
		r("POST /admin/api/clients/{id}/webhooks", AdminAPI, s.apiCreateWebhook),
		r("DELETE /admin/api/webhooks/{id}", AdminAPI, s.apiDeleteWebhook),
		r("GET /admin/api/webhooks/{id}/deliveries", AdminAPI, s.apiDeliveries),
		r("GET /admin/api/deliveries/{id}", AdminAPI, s.apiDelivery),
		r("POST /admin/api/deliveries/{id}/redeliver", AdminAPI, s.apiRedeliver),
		r("GET /admin/api/events", AdminAPI, s.apiEvents),
		r("/admin/api/", AdminAPI, notFound),
	}
}

// Routes registers the admin routes on mux. Every admin route, its API
// included, draws from the per-address browser budget: admin tools are few
// and their keys are not the /v1 client keys the API budget counts by.
func (s *Server) Routes(mux *web.Mux) {
	for _, rt := range s.routes() {
		switch rt.Access {
		case Public:
			mux.Handle(web.PageRoute(rt.Pattern, web.ClassBrowser, s.logger, rt.h))
		case AdminPage:
			mux.Handle(web.PageRoute(rt.Pattern, web.ClassBrowser, s.logger, s.requireSession(rt.h)))
		case AdminAPI:
			mux.Handle(web.APIRoute(rt.Pattern, web.ClassBrowser, s.logger, s.requireKey(rt.h)))
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
