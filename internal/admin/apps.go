package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// An organization's own OAuth apps at the providers of the catalog, for its
// owners, in the pages (/admin/apps) and the API (/admin/api/apps). Package
// org owns the table and the rules (SetApp, RemoveApp, and Resolve: which
// app an organization uses at a provider); this file shows them, with the
// redirect URI to register at the provider, and records the admin's action
// with the organization and role. A client secret goes from the form or the
// body to org.Store.SetApp, which seals it; it is never shown, echoed, logged
// or put back into a form.

// ErrNoApps: the Server has no organization store (Config.Orgs).
var ErrNoApps error = &web.Error{Status: http.StatusServiceUnavailable, Code: "apps_unavailable",
	Description: "this connectd cannot manage provider apps here (no organization store)"}

// How an organization gets an app at a provider, as Resolve answers.
const (
	usesOwn       = "own"        // its own app
	usesShared    = "shared"     // the deployment's app (default organization, or shared_app "all")
	usesNone      = "none"       // neither: provider_app_required until it sets one
	usesNotNeeded = "not_needed" // an api_key provider: users type their own keys
)

// appUse is one provider of the catalog and the app the organization uses
// there.
type appUse struct {
	Provider    string `json:"provider"`
	DisplayName string `json:"display_name"`
	Uses        string `json:"uses"`
	AppID       string `json:"app_id,omitempty"`
	// Error is the code a new connection there is refused with (uses "none").
	Error string `json:"error,omitempty"`
}

// appsOrg is the organization the request manages the apps of, known to
// exist; an operator names it with ?org=.
func (s *Server) appsOrg(r *http.Request) (string, error) {
	id, err := s.appsScope(r)
	if err == nil && id == "" {
		return "", errNameOrg
	}
	return id, err
}

// appsScope is appsOrg, or "" for an operator who named no organization
// (the listings show every organization's apps then).
func (s *Server) appsScope(r *http.Request) (string, error) {
	if s.manage.orgs == nil {
		return "", ErrNoApps
	}
	id := scopeOf(r)
	if id == "" {
		return "", nil
	}
	ok, err := s.store.OrgExists(r.Context(), id)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", errNoOrg(id)
	}
	return id, nil
}

// appUses says, for every provider of the catalog, which app organization
// orgID uses there: its own (one of apps), else what org.Store.Resolve (the
// one owner of that rule) answers.
func (s *Server) appUses(ctx context.Context, orgID string, apps []org.App) ([]appUse, error) {
	own := map[string]string{}
	for _, a := range apps {
		own[a.Provider] = a.ID
	}
	var out []appUse
	for _, name := range s.catalogNames() {
		p, err := s.manage.catalog.Get(name)
		if err != nil {
			return nil, fmt.Errorf("admin: provider %s: %w", name, err)
		}
		info := p.Info()
		u := appUse{Provider: name, DisplayName: info.DisplayName}
		switch {
		case info.Kind != provider.KindOAuth2:
			u.Uses = usesNotNeeded
		case own[name] != "":
			u.Uses, u.AppID = usesOwn, own[name]
		default:
			res, err := s.manage.orgs.Resolve(ctx, orgID, name)
			switch {
			case errors.Is(err, org.ErrNoApp):
				u.Uses, u.Error = usesNone, "provider_app_required"
			case err != nil:
				return nil, fmt.Errorf("admin: resolve the app of %s at %s: %w", orgID, name, err)
			case res.AppID != "":
				u.Uses, u.AppID = usesOwn, res.AppID
			default:
				u.Uses = usesShared
			}
		}
		out = append(out, u)
	}
	return out, nil
}

// oauthProviders are the providers an app may be set at.
func (s *Server) oauthProviders() []string {
	var out []string
	for _, name := range s.catalogNames() {
		if p, err := s.manage.catalog.Get(name); err == nil && p.Info().Kind == provider.KindOAuth2 {
			out = append(out, name)
		}
	}
	return out
}

const selectAppConnections = `SELECT app_id, count(*) FROM connections WHERE org_id = $1 AND app_id IS NOT NULL GROUP BY app_id`

// appConnections counts organization orgID's connections by the app that
// obtained them: removing (or replacing) an app leaves them unrefreshable.
func (st *Store) appConnections(ctx context.Context, orgID string) (map[string]int64, error) {
	rows, err := st.pool.Query(ctx, selectAppConnections, orgID)
	if err != nil {
		return nil, fmt.Errorf("admin: count connections by app: %w", err)
	}
	out := map[string]int64{}
	var id string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error { out[id] = n; return nil }); err != nil {
		return nil, fmt.Errorf("admin: count connections by app: %w", err)
	}
	return out, nil
}

// setApp gives the organization its own app at prov; audited as
// admin.app_set (org.app_set is the org package's row of it). replaced is
// the app a new client id replaced, and how many connections it had.
func (s *Server) setApp(r *http.Request, orgID, prov, clientID string, secret provider.Secret) (org.App, string, int64, error) {
	ctx := r.Context()
	counts, err := s.store.appConnections(ctx, orgID)
	if err != nil {
		return org.App{}, "", 0, err
	}
	by := actorOf(r)
	app, replaced, err := s.manage.orgs.SetApp(ctx, orgID, prov, clientID, secret, by.Name)
	if err != nil {
		return org.App{}, "", 0, err
	}
	detail := map[string]any{"app": app.ID, "client_id": app.ClientID}
	if replaced != "" {
		detail["replaced"] = replaced
		detail["replaced_connections"] = counts[replaced]
	}
	s.store.auditAfter(ctx, Event{Kind: "admin.app_set", Org: orgID, Provider: prov, Target: app.ID, Detail: detail}, by)
	return app, replaced, counts[replaced], nil
}

// removeApp removes the organization's app at prov and says how many
// connections were made through it and what the provider's new connections
// now use. Audited as admin.app_removed (org.app_removed is the org
// package's row of it).
func (s *Server) removeApp(r *http.Request, orgID, prov string) (org.App, int64, appUse, error) {
	ctx := r.Context()
	if !names.ValidProvider(prov) { // not a name any app can have (NUL, invalid UTF-8...): none, without a query
		return org.App{}, 0, appUse{}, problem.Detail(org.ErrAppNotFound, "organization %s has no app at that provider", orgID)
	}
	counts, err := s.store.appConnections(ctx, orgID)
	if err != nil {
		return org.App{}, 0, appUse{}, err
	}
	by := actorOf(r)
	app, err := s.manage.orgs.RemoveApp(ctx, orgID, prov, by.Name)
	if err != nil {
		return org.App{}, 0, appUse{}, err
	}
	n := counts[app.ID]
	s.store.auditAfter(ctx, Event{Kind: "admin.app_removed", Org: orgID, Provider: prov, Target: app.ID,
		Detail: map[string]any{"app": app.ID, "client_id": app.ClientID, "connections": n}}, by)
	var now appUse
	if uses, err := s.appUses(ctx, orgID, nil); err == nil {
		for _, u := range uses {
			if u.Provider == prov {
				now = u
			}
		}
	}
	return app, n, now, nil
}

// The pages.

// appsView is the apps page of orgID.
func (s *Server) appsView(r *http.Request, orgID string) (templates.AdminAppsView, error) {
	ctx := r.Context()
	apps, err := s.manage.orgs.Apps(ctx, orgID)
	if err != nil {
		return templates.AdminAppsView{}, err
	}
	uses, err := s.appUses(ctx, orgID, apps)
	if err != nil {
		return templates.AdminAppsView{}, err
	}
	counts, err := s.store.appConnections(ctx, orgID)
	if err != nil {
		return templates.AdminAppsView{}, err
	}
	v := templates.AdminAppsView{Nav: s.nav(r, "apps"), Org: orgID, RedirectURI: s.manage.redirectURI,
		OAuth: s.oauthProviders(), SetURL: s.href(r, "/admin/apps"), RemoveURL: s.href(r, "/admin/apps/remove")}
	for _, a := range apps {
		v.Apps = append(v.Apps, appRow(a, counts[a.ID]))
	}
	for _, u := range uses {
		v.Providers = append(v.Providers, templates.AdminProviderRow{Provider: u.Provider, Name: u.DisplayName,
			Uses: usesText(u), Missing: u.Uses == usesNone})
	}
	return v, nil
}

// usesText says in words which app new connections at u's provider use.
func usesText(u appUse) string {
	switch u.Uses {
	case usesOwn:
		return "its own app (" + u.AppID + ")"
	case usesShared:
		return "the deployment's shared app"
	case usesNone:
		return "none: new connections are refused with provider_app_required until an app is set"
	}
	return "no app needed (api_key: users type their own keys)"
}

// allApps is every organization's apps, by organization (an operator who
// named none).
func (s *Server) allApps(ctx context.Context) ([]org.Organization, map[string][]org.App, error) {
	orgs, err := s.manage.orgs.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	apps := map[string][]org.App{}
	for _, o := range orgs {
		if apps[o.ID], err = s.manage.orgs.Apps(ctx, o.ID); err != nil {
			return nil, nil, err
		}
	}
	return orgs, apps, nil
}

func appRow(a org.App, connections int64) templates.AdminAppRow {
	secret := "not set"
	if a.HasSecret {
		secret = "set"
	}
	return templates.AdminAppRow{Provider: a.Provider, ID: a.ID, ClientID: a.ClientID, Secret: secret,
		Created: fmtTime(a.CreatedAt), Updated: fmtTime(a.UpdatedAt), Connections: strconv.FormatInt(connections, 10)}
}

// appsPage handles GET /admin/apps[?org=ORG]: an organization's apps; an
// operator without ?org=, every organization's, each linking to its page.
func (s *Server) appsPage(w http.ResponseWriter, r *http.Request) error {
	orgID, err := s.appsScope(r)
	if err != nil {
		return err
	}
	if orgID == "" {
		orgs, apps, err := s.allApps(r.Context())
		if err != nil {
			return err
		}
		v := templates.AdminAppsAllView{Nav: s.nav(r, "apps"), RedirectURI: s.manage.redirectURI}
		for _, o := range orgs {
			row := templates.AdminOrgAppsRow{Org: o.ID, URL: "/admin/apps?" + url.Values{OrgParam: {o.ID}}.Encode()}
			for _, a := range apps[o.ID] {
				row.Apps = append(row.Apps, appRow(a, 0))
			}
			v.Orgs = append(v.Orgs, row)
		}
		return web.Render(w, r, http.StatusOK, templates.AdminAppsAll(v))
	}
	v, err := s.appsView(r, orgID)
	if err != nil {
		return err
	}
	return web.Render(w, r, http.StatusOK, templates.AdminApps(v))
}

// appsRefused is err with the apps page and its message; the set form
// keeps the provider and client id, never the secret.
func (s *Server) appsRefused(r *http.Request, orgID string, err error, prov, clientID string) error {
	v, verr := s.appsView(r, orgID)
	if verr != nil {
		return err
	}
	v.Provider, v.ClientID = prov, clientID
	return withPage(err, func(msg string) templ.Component {
		v.Error = msg
		return templates.AdminApps(v)
	})
}

// setAppPage handles POST /admin/apps (provider, client_id, client_secret).
func (s *Server) setAppPage(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkForm(w, r); err != nil {
		return err
	}
	orgID, err := s.appsOrg(r)
	if err != nil {
		return err
	}
	prov, clientID := strings.TrimSpace(r.PostForm.Get("provider")), strings.TrimSpace(r.PostForm.Get("client_id"))
	secret := provider.Secret(strings.TrimSpace(r.PostForm.Get("client_secret")))
	app, replaced, n, err := s.setApp(r, orgID, prov, clientID, secret)
	if err != nil {
		return s.appsRefused(r, orgID, err, prov, clientID)
	}
	v, err := s.appsView(r, orgID)
	if err != nil {
		return err
	}
	v.Done = "The app at " + app.Provider + " is set: client id " + app.ClientID + " (" + app.ID + "); its secret is sealed. " +
		"Register the redirect URI below at the provider for it."
	if replaced != "" {
		v.Warning = "The client id changed, so this is a new app replacing " + replaced + ": the " + strconv.FormatInt(n, 10) +
			" connection(s) made through it can no longer be refreshed; their users connect again."
	}
	return web.Render(w, r, http.StatusOK, templates.AdminApps(v))
}

// removeAppPage handles POST /admin/apps/remove (provider, confirm: the
// provider again, from the Remove form's checkbox).
func (s *Server) removeAppPage(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkForm(w, r); err != nil {
		return err
	}
	orgID, err := s.appsOrg(r)
	if err != nil {
		return err
	}
	prov := strings.TrimSpace(r.PostForm.Get("provider"))
	if r.PostForm.Get("confirm") != prov || prov == "" {
		return s.appsRefused(r, orgID, web.Refuse(http.StatusBadRequest, "confirmation_required",
			"Tick the box next to Remove to confirm that the app's connections can no longer be refreshed.", nil), "", "")
	}
	app, n, now, err := s.removeApp(r, orgID, prov)
	if err != nil {
		return s.appsRefused(r, orgID, err, "", "")
	}
	v, err := s.appsView(r, orgID)
	if err != nil {
		return err
	}
	v.Done = "Removed the app " + app.ID + " at " + app.Provider + " (client id " + app.ClientID + ")."
	v.Warning = removedText(app, n, now)
	return web.Render(w, r, http.StatusOK, templates.AdminApps(v))
}

// removedText says what removing app did to its connections and what new
// connections at its provider use now.
func removedText(app org.App, n int64, now appUse) string {
	s := "No connection was made through it. "
	if n > 0 {
		s = strconv.FormatInt(n, 10) + " connection(s) were made through it: they stay, but can no longer be refreshed, " +
			"so their users connect again. "
	}
	switch now.Uses {
	case usesShared:
		s += "New connections at " + app.Provider + " use the deployment's shared app."
	case usesNone:
		s += "New connections at " + app.Provider + " are refused with provider_app_required until an app is set."
	}
	return s
}

// The API.

// appDoc is an app as the API answers it: never the secret, only whether
// one is set.
type appDoc struct {
	ID          string    `json:"id"`
	Provider    string    `json:"provider"`
	ClientID    string    `json:"client_id"`
	SecretSet   bool      `json:"secret_set"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	Connections int64     `json:"connections"`
}

func appDocOf(a org.App, connections int64) appDoc {
	return appDoc{ID: a.ID, Provider: a.Provider, ClientID: a.ClientID, SecretSet: a.HasSecret, CreatedAt: a.CreatedAt.UTC(),
		UpdatedAt: a.UpdatedAt.UTC(), Connections: connections}
}

// apiApps handles GET /admin/api/apps[?org=ORG]: the organization's apps,
// which app it uses at each provider of the catalog, and the redirect URI;
// an operator without ?org=, every organization's apps (with their "org")
// and no providers.
func (s *Server) apiApps(w http.ResponseWriter, r *http.Request) error {
	orgID, err := s.appsScope(r)
	if err != nil {
		return err
	}
	if orgID == "" {
		orgs, apps, err := s.allApps(r.Context())
		if err != nil {
			return err
		}
		type orgAppDoc struct {
			Org string `json:"org"`
			appDoc
		}
		out := struct {
			RedirectURI string      `json:"redirect_uri"`
			Apps        []orgAppDoc `json:"apps"`
		}{RedirectURI: s.manage.redirectURI, Apps: []orgAppDoc{}}
		for _, o := range orgs {
			counts, err := s.store.appConnections(r.Context(), o.ID)
			if err != nil {
				return err
			}
			for _, a := range apps[o.ID] {
				out.Apps = append(out.Apps, orgAppDoc{Org: o.ID, appDoc: appDocOf(a, counts[a.ID])})
			}
		}
		web.WriteJSON(w, http.StatusOK, out)
		return nil
	}
	apps, err := s.manage.orgs.Apps(r.Context(), orgID)
	if err != nil {
		return err
	}
	uses, err := s.appUses(r.Context(), orgID, apps)
	if err != nil {
		return err
	}
	counts, err := s.store.appConnections(r.Context(), orgID)
	if err != nil {
		return err
	}
	out := struct {
		Org         string   `json:"org"`
		RedirectURI string   `json:"redirect_uri"`
		Apps        []appDoc `json:"apps"`
		Providers   []appUse `json:"providers"`
	}{Org: orgID, RedirectURI: s.manage.redirectURI, Apps: []appDoc{}, Providers: []appUse{}}
	for _, a := range apps {
		out.Apps = append(out.Apps, appDocOf(a, counts[a.ID]))
	}
	out.Providers = append(out.Providers, uses...)
	web.WriteJSON(w, http.StatusOK, out)
	return nil
}

type setAppRequest struct {
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
}

// apiSetApp handles PUT /admin/api/apps/{provider} {"client_id",
// "client_secret"}: the app (never the secret), the redirect URI to
// register, and the app a new client id replaced.
func (s *Server) apiSetApp(w http.ResponseWriter, r *http.Request) error {
	orgID, err := s.appsOrg(r)
	if err != nil {
		return err
	}
	var req setAppRequest
	if err := web.DecodeJSON(w, r, &req, 16<<10); err != nil {
		return err
	}
	app, replaced, n, err := s.setApp(r, orgID, r.PathValue("provider"), strings.TrimSpace(req.ClientID),
		provider.Secret(strings.TrimSpace(req.ClientSecret)))
	if err != nil {
		return err
	}
	out := map[string]any{"app": appDocOf(app, 0), "redirect_uri": s.manage.redirectURI}
	if replaced != "" {
		out["replaced"] = map[string]any{"id": replaced, "connections": n}
	}
	web.WriteJSON(w, http.StatusOK, out)
	return nil
}

// apiRemoveApp handles DELETE /admin/api/apps/{provider}: the app removed,
// how many connections were made through it (they can no longer be
// refreshed), and what new connections at the provider use now.
func (s *Server) apiRemoveApp(w http.ResponseWriter, r *http.Request) error {
	orgID, err := s.appsOrg(r)
	if err != nil {
		return err
	}
	app, n, now, err := s.removeApp(r, orgID, r.PathValue("provider"))
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"removed": appDocOf(app, n), "now": now})
	return nil
}
