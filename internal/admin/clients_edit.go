package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/a-h/templ"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/release"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// Creating and editing an organization's MCP servers (clients), role admin,
// in the pages and the API (issue 34, "Surfaces"). Package clientauth owns
// the registry and its rules (CreateIn, SetDisplay, SetProxyOnly,
// RotateKey); this file checks what the request names (the acting
// organization, the providers of the catalog), writes the audit trail by the
// admin who acted, and shows a new key once: on the answer to the form or
// the API call that made it, never in a log line, a redirect or any other
// page.

// DefaultKeyOverlap is how long a rotated client key keeps working when
// Config.KeyOverlap is 0 (CONNECTD_CLIENT_KEY_OVERLAP's default).
const DefaultKeyOverlap = 24 * time.Hour

// MaxKeyOverlap is the longest overlap a rotation takes (as
// CONNECTD_CLIENT_KEY_OVERLAP).
const MaxKeyOverlap = 30 * 24 * time.Hour

// manage is what creating and editing need of Config.
type manage struct {
	catalog     *provider.Catalog
	orgs        *org.Store
	redirectURI string
	allowHTTP   bool
	keyOverlap  time.Duration
}

func newManage(cfg Config) manage {
	m := manage{catalog: cfg.Catalog, orgs: cfg.Orgs, redirectURI: cfg.RedirectURI, allowHTTP: cfg.AllowHTTP,
		keyOverlap: cfg.KeyOverlap}
	if m.keyOverlap <= 0 {
		m.keyOverlap = DefaultKeyOverlap
	}
	return m
}

// errNameOrg answers an operator's change that names no organization.
var errNameOrg = problem.Detail(ErrInvalid, "name the organization to act in: ?org=ORG")

// errRegistration is the answer to a registration clientauth refuses: its
// rules, not the refusal's text (which may name another organization's
// client).
var errRegistration = problem.Detail(ErrInvalid, "the registration was refused: a name of 1-200 characters and "+
	"at least one resource URI are required, each an absolute https URL with a host, without user info or fragment, "+
	"listed once; providers must be ids of the catalog")

// catalogNames are the providers of the catalog, by name (none without one).
func (s *Server) catalogNames() []string {
	if s.manage.catalog == nil {
		return nil
	}
	return s.manage.catalog.Names()
}

// checkProviders refuses a provider the catalog lacks: a client allowed one
// could never use it, and a typo would pass unnoticed.
func (s *Server) checkProviders(providers []string) error {
	known := s.catalogNames()
	for _, p := range providers {
		if p != release.AnyProvider && !slices.Contains(known, p) {
			return problem.Detail(ErrInvalid, "provider %q is not in the catalog (known: %s)", p, strings.Join(known, ", "))
		}
	}
	return nil
}

// checkDisplay checks a logo URL and a homepage as SetDisplay will, naming
// the field that breaks its rule.
func (s *Server) checkDisplay(logoURL, homepage string) error {
	if clientauth.CheckDisplay(logoURL, "", s.manage.allowHTTP) != nil {
		return problem.Detail(ErrInvalid, "logo URL must be an absolute https URL of an image (at most 2048 bytes, "+
			"no user info or fragment), or empty")
	}
	if clientauth.CheckDisplay("", homepage, s.manage.allowHTTP) != nil {
		return problem.Detail(ErrInvalid, "homepage must be an absolute https URL (at most 2048 bytes, "+
			"no user info or fragment), or empty")
	}
	return nil
}

// errAsksUser answers turning proxy-only off for a client whose request
// rules ask the user (clientauth.ErrAsksUser).
var errAsksUser = problem.Detail(ErrInvalid, "it must stay proxy-only: its request rules ask the user before some calls, "+
	"and a client that reads the token could call the provider without asking; clear those rules first "+
	"(connectd clients proxy-rules ID --provider P --clear)")

// registryError maps what the client registry refuses to the answer.
func registryError(err error) error {
	switch {
	case errors.Is(err, clientauth.ErrAsksUser):
		return fmt.Errorf("%w (%w)", errAsksUser, err)
	case errors.Is(err, clientauth.ErrInvalidClient):
		return fmt.Errorf("%w (%w)", errRegistration, err)
	case errors.Is(err, clientauth.ErrClientNotFound):
		return problem.Detail(ErrNotFound, "no such client")
	}
	return err
}

// newClient is what creating an MCP server takes.
type newClient struct {
	Name      string
	Resources []string
	Providers []string
	ProxyOnly bool
	LogoURL   string
	Homepage  string
}

// createClient registers in in the acting organization and returns it with
// its first key. Everything is checked before anything is written; should a
// write after the registration fail, the registration is deleted (it was
// never used), so nothing is left half-made. Audited as client.created.
func (s *Server) createClient(ctx context.Context, r *http.Request, in newClient) (clientauth.Client, string, error) {
	orgID := scopeOf(r)
	if orgID == "" {
		return clientauth.Client{}, "", errNameOrg
	}
	if strings.TrimSpace(in.Name) == "" {
		return clientauth.Client{}, "", problem.Detail(ErrInvalid, "a name is required")
	}
	if len(in.Resources) == 0 {
		return clientauth.Client{}, "", problem.Detail(ErrInvalid, "at least one resource URI is required")
	}
	if err := s.checkProviders(in.Providers); err != nil {
		return clientauth.Client{}, "", err
	}
	if err := s.checkDisplay(in.LogoURL, in.Homepage); err != nil {
		return clientauth.Client{}, "", err
	}
	by := actorOf(r)
	c, key, err := s.clients.CreateIn(ctx, orgID, in.Name, in.Resources, in.Providers)
	if err != nil {
		return clientauth.Client{}, "", registryError(err)
	}
	err = nil
	if in.LogoURL != "" || in.Homepage != "" {
		err = s.clients.SetDisplay(ctx, c.ID, in.LogoURL, in.Homepage)
		c.LogoURL, c.Homepage = in.LogoURL, in.Homepage
	}
	if err == nil && in.ProxyOnly {
		err = s.clients.SetProxyOnly(ctx, c.ID, true)
		c.ProxyOnly = true
	}
	if err != nil {
		if _, derr := s.clients.Delete(context.WithoutCancel(ctx), c.ID, by.Name); derr != nil {
			s.logger.ErrorContext(ctx, "half-made MCP server not deleted", slog.String("client_id", c.ID), slog.Any("error", derr))
		}
		return clientauth.Client{}, "", fmt.Errorf("admin: create client: %w", err)
	}
	s.store.auditAfter(ctx, Event{Kind: "client.created", Org: orgID, ClientID: c.ID, Target: c.ID, Detail: map[string]any{
		"name": c.Name, "resources": nonNil(c.Resources), "providers": nonNil(c.Providers), "proxy_only": c.ProxyOnly,
		"logo_url": c.LogoURL, "homepage": c.Homepage}}, by)
	s.logger.InfoContext(ctx, "MCP server created by an admin", slog.String("client_id", c.ID), slog.String("org", orgID),
		slog.String("actor", by.Name))
	return c, key, nil
}

// clientChange is an edit of an MCP server: nil fields stay as they are.
type clientChange struct {
	LogoURL   *string
	Homepage  *string
	ProxyOnly *bool
	// The registration: name, resource URIs and providers (nil: as they
	// are; Providers empty, not nil: none).
	Name      *string
	Resources []string
	Providers []string
}

// changeClient applies ch to c (the request's client, of its organization),
// checked whole before anything is written. Audited as client.display_set
// and client.proxy_only_set, for what changed.
func (s *Server) changeClient(ctx context.Context, r *http.Request, c clientauth.Client, ch clientChange) (clientauth.Client, error) {
	registration := ch.Name != nil || ch.Resources != nil || ch.Providers != nil
	if ch.LogoURL == nil && ch.Homepage == nil && ch.ProxyOnly == nil && !registration {
		return c, problem.Detail(ErrInvalid, "nothing to change: give name, resources, providers, logo_url, homepage or proxy_only")
	}
	if ch.Name != nil && strings.TrimSpace(*ch.Name) == "" {
		return c, problem.Detail(ErrInvalid, "a name is required")
	}
	if ch.Resources != nil && len(ch.Resources) == 0 {
		return c, problem.Detail(ErrInvalid, "at least one resource URI is required")
	}
	if ch.Providers != nil {
		if err := s.checkProviders(ch.Providers); err != nil {
			return c, err
		}
	}
	logo, home := c.LogoURL, c.Homepage
	if ch.LogoURL != nil {
		logo = strings.TrimSpace(*ch.LogoURL)
	}
	if ch.Homepage != nil {
		home = strings.TrimSpace(*ch.Homepage)
	}
	if err := s.checkDisplay(logo, home); err != nil {
		return c, err
	}
	by := actorOf(r)
	if registration {
		// Checked whole and written in one transaction by the registry, with
		// its client.updated row (what changed, and who: role, request, address).
		u := clientauth.ClientUpdate{Name: ch.Name, Resources: ch.Resources, Providers: ch.Providers,
			By: audit.Event{RequestID: by.RequestID, IP: by.IP, Detail: map[string]any{"role": by.roleName()}}}
		next, err := s.clients.Update(ctx, c.ID, u, by.Name)
		if err != nil {
			return c, registryError(err)
		}
		c.Name, c.Resources, c.Providers = next.Name, next.Resources, next.Providers
	}
	if logo != c.LogoURL || home != c.Homepage {
		if err := s.clients.SetDisplay(ctx, c.ID, logo, home); err != nil {
			return c, registryError(err)
		}
		s.store.auditAfter(ctx, Event{Kind: "client.display_set", Org: c.Org, ClientID: c.ID, Target: c.ID,
			Detail: map[string]any{"logo_url": logo, "homepage": home}}, by)
		c.LogoURL, c.Homepage = logo, home
	}
	if ch.ProxyOnly != nil && *ch.ProxyOnly != c.ProxyOnly {
		if err := s.clients.SetProxyOnly(ctx, c.ID, *ch.ProxyOnly); err != nil {
			return c, registryError(err)
		}
		s.store.auditAfter(ctx, Event{Kind: "client.proxy_only_set", Org: c.Org, ClientID: c.ID, Target: c.ID,
			Detail: map[string]any{"proxy_only": *ch.ProxyOnly}}, by)
		c.ProxyOnly = *ch.ProxyOnly
	}
	return c, nil
}

// parseOverlap reads a rotation's overlap ("": the default), a Go duration
// of 0 to MaxKeyOverlap.
func (s *Server) parseOverlap(v string) (time.Duration, error) {
	if v == "" {
		return s.manage.keyOverlap, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > MaxKeyOverlap {
		return 0, problem.Detail(ErrInvalid, "overlap must be a duration from 0s to 720h, such as 24h")
	}
	return d, nil
}

// rotateKey gives c a new key; the current ones keep working for overlap.
// Audited as client.key_rotated (never the key).
func (s *Server) rotateKey(ctx context.Context, r *http.Request, c clientauth.Client, overlap time.Duration) (string, time.Time, error) {
	until := s.now().Add(overlap).UTC()
	key, err := s.clients.RotateKey(ctx, c.ID, overlap)
	if err != nil {
		return "", time.Time{}, registryError(err)
	}
	by := actorOf(r)
	s.store.auditAfter(ctx, Event{Kind: "client.key_rotated", Org: c.Org, ClientID: c.ID, Target: c.ID,
		Detail: map[string]any{"overlap": overlap.String(), "old_keys_until": until.Format(time.RFC3339)}}, by)
	s.logger.InfoContext(ctx, "client key rotated by an admin", slog.String("client_id", c.ID), slog.String("actor", by.Name))
	return key, until, nil
}

// requestClient is the MCP server the request's path names, of the acting
// organization, or 404 not_found (another organization's too).
func (s *Server) requestClient(r *http.Request) (clientauth.Client, error) {
	c, err := s.client(r, r.PathValue("id"))
	if err != nil {
		return clientauth.Client{}, clientError(err)
	}
	return c, nil
}

// mayEdit reports whether the request's admin may create and edit MCP
// servers in the acting organization (the pages show the forms only then;
// the routes' guard is what refuses).
func mayEdit(r *http.Request) bool {
	p := principalOf(r.Context())
	return p.operator || p.role.Allows(RoleAdmin)
}

// withPage is err answered with page (the form again, with its message)
// when it is the request's fault; any other error as it is.
func withPage(err error, page func(msg string) templ.Component) error {
	e := web.AsError(err)
	if e.Status < 400 || e.Status >= 500 || e.Status == 499 {
		return err
	}
	c := *e
	c.Err = err
	c.Page = page(e.Description)
	return &c
}

// The pages.

// newClientView is the "New MCP server" form for r, filled with in.
func (s *Server) newClientView(r *http.Request, in newClient, msg string) templates.AdminNewClientView {
	v := templates.AdminNewClientView{Nav: s.nav(r, "clients"), Org: scopeOf(r), Error: msg, Catalog: s.catalogNames(),
		Name: in.Name, Resources: strings.Join(in.Resources, "\n"), Providers: in.Providers, ProxyOnly: in.ProxyOnly,
		LogoURL: in.LogoURL, Homepage: in.Homepage}
	switch {
	case !mayEdit(r):
		v.Denied = "Creating an MCP server needs the admin role."
	case v.Org == "":
		v.Denied = "Pick an organization (?org=ORG) to create an MCP server in it."
	default:
		v.Action = s.href(r, "/admin/clients")
	}
	return v
}

// NewClientForm is the "New MCP server" form of the MCP servers page.
func (s *Server) newClientForm(r *http.Request) templ.Component {
	return templates.AdminNewClientForm(s.newClientView(r, newClient{}, ""))
}

// createClientPage handles POST /admin/clients (name, resources, providers,
// proxy_only, logo_url, homepage): the answer shows the new client key, this
// once. A refusal shows the form again with the message.
func (s *Server) createClientPage(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkForm(w, r); err != nil {
		return err
	}
	f := r.PostForm
	in := newClient{Name: strings.TrimSpace(f.Get("name")), Resources: strings.Fields(f.Get("resources")),
		Providers: f["providers"], ProxyOnly: f.Get("proxy_only") != "", LogoURL: strings.TrimSpace(f.Get("logo_url")),
		Homepage: strings.TrimSpace(f.Get("homepage"))}
	c, key, err := s.createClient(r.Context(), r, in)
	if err != nil {
		return withPage(err, func(msg string) templ.Component {
			return templates.AdminNewClient(s.newClientView(r, in, msg))
		})
	}
	providers := strings.Join(c.Providers, " ")
	if providers == "" {
		providers = "none"
	}
	return web.Render(w, r, http.StatusOK, templates.AdminKeyShown(templates.AdminKeyView{Nav: s.nav(r, "clients"),
		Title: "MCP server created", ClientID: c.ID, Name: c.Name, Org: c.Org, Key: key, Created: true,
		Resources: c.Resources, Providers: providers, ProxyOnly: c.ProxyOnly, ClientURL: s.href(r, "/admin/clients/"+c.ID)}))
}

// overlapChoices are the rotation form's overlaps, the default selected.
func (s *Server) overlapChoices() []templates.AdminOverlapChoice {
	ds := []time.Duration{0, time.Hour, DefaultKeyOverlap, 72 * time.Hour, 7 * 24 * time.Hour, MaxKeyOverlap}
	if !slices.Contains(ds, s.manage.keyOverlap) {
		ds = append(ds, s.manage.keyOverlap)
		slices.Sort(ds)
	}
	out := make([]templates.AdminOverlapChoice, 0, len(ds))
	for _, d := range ds {
		label := "no time: they stop now"
		if d > 0 {
			label = overlapText(d)
		}
		if d == s.manage.keyOverlap {
			label += " (default)"
		}
		out = append(out, templates.AdminOverlapChoice{Value: d.String(), Label: label, Selected: d == s.manage.keyOverlap})
	}
	return out
}

// overlapText is d in words: "24 hours", "7 days".
func overlapText(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		n := int(d / (24 * time.Hour))
		return fmt.Sprintf("%d day%s", n, plural(n))
	case d%time.Hour == 0:
		n := int(d / time.Hour)
		return fmt.Sprintf("%d hour%s", n, plural(n))
	}
	return d.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// manageView is the editing part of c's page.
func (s *Server) manageView(r *http.Request, c clientauth.Client, msg string) templates.AdminClientManageView {
	base := "/admin/clients/" + c.ID
	return templates.AdminClientManageView{Nav: s.nav(r, "clients"), ID: c.ID, Name: clientName(c), CanEdit: mayEdit(r),
		Error: msg, LogoURL: c.LogoURL, Homepage: c.Homepage, ProxyOnly: c.ProxyOnly, Asks: len(askingRules(c)) > 0,
		RegName: c.Name, Resources: strings.Join(c.Resources, "\n"), Providers: c.Providers, Catalog: editChoices(s.catalogNames(), c),
		RegistrationURL: s.href(r, base+"/registration"),
		DisplayURL:      s.href(r, base+"/display"), ProxyOnlyURL: s.href(r, base+"/proxy-only"),
		RotateURL: s.href(r, base+"/rotate-key"), Overlaps: s.overlapChoices()}
}

// editChoices are the providers the registration form offers c: the
// catalog's, and "*" (every provider) when c has it, so that saving the form
// never drops it unasked.
func editChoices(catalog []string, c clientauth.Client) []string {
	if slices.Contains(c.Providers, release.AnyProvider) {
		return append([]string{release.AnyProvider}, catalog...)
	}
	return catalog
}

// clientManage is the editing part of the MCP server's page.
func (s *Server) clientManage(r *http.Request, c clientauth.Client) templ.Component {
	return templates.AdminClientManage(s.manageView(r, c, ""))
}

// editRefused is err with the editing forms of c again.
func (s *Server) editRefused(r *http.Request, c clientauth.Client, err error) error {
	return withPage(err, func(msg string) templ.Component {
		return templates.AdminClientEdit(s.manageView(r, c, msg))
	})
}

// displayPage handles POST /admin/clients/{id}/display (logo_url,
// homepage), then back to the MCP server's page.
func (s *Server) displayPage(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkForm(w, r); err != nil {
		return err
	}
	c, err := s.requestClient(r)
	if err != nil {
		return err
	}
	logo, home := r.PostForm.Get("logo_url"), r.PostForm.Get("homepage")
	if _, err := s.changeClient(r.Context(), r, c, clientChange{LogoURL: &logo, Homepage: &home}); err != nil {
		c.LogoURL, c.Homepage = logo, home
		return s.editRefused(r, c, err)
	}
	http.Redirect(w, r, s.href(r, "/admin/clients/"+c.ID), http.StatusSeeOther)
	return nil
}

// registrationPage handles POST /admin/clients/{id}/registration (name,
// resources one per line, providers), then back to the MCP server's page.
func (s *Server) registrationPage(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkForm(w, r); err != nil {
		return err
	}
	c, err := s.requestClient(r)
	if err != nil {
		return err
	}
	f := r.PostForm
	name := strings.TrimSpace(f.Get("name"))
	resources := strings.Fields(f.Get("resources"))
	providers := f["providers"]
	if providers == nil {
		providers = []string{} // none ticked: none
	}
	if resources == nil {
		resources = []string{}
	}
	if _, err := s.changeClient(r.Context(), r, c, clientChange{Name: &name, Resources: resources, Providers: providers}); err != nil {
		c.Name, c.Resources, c.Providers = name, resources, providers
		return s.editRefused(r, c, err)
	}
	http.Redirect(w, r, s.href(r, "/admin/clients/"+c.ID), http.StatusSeeOther)
	return nil
}

// proxyOnlyPage handles POST /admin/clients/{id}/proxy-only (proxy_only
// ticked or not), then back to the MCP server's page.
func (s *Server) proxyOnlyPage(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkForm(w, r); err != nil {
		return err
	}
	c, err := s.requestClient(r)
	if err != nil {
		return err
	}
	on := r.PostForm.Get("proxy_only") != ""
	if on == c.ProxyOnly {
		http.Redirect(w, r, s.href(r, "/admin/clients/"+c.ID), http.StatusSeeOther)
		return nil
	}
	if _, err := s.changeClient(r.Context(), r, c, clientChange{ProxyOnly: &on}); err != nil {
		return s.editRefused(r, c, err)
	}
	http.Redirect(w, r, s.href(r, "/admin/clients/"+c.ID), http.StatusSeeOther)
	return nil
}

// rotateKeyPage handles POST /admin/clients/{id}/rotate-key (overlap,
// confirm: the client id): the answer shows the new key, this once.
func (s *Server) rotateKeyPage(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkForm(w, r); err != nil {
		return err
	}
	c, err := s.requestClient(r)
	if err != nil {
		return err
	}
	if r.PostForm.Get("confirm") != c.ID {
		return s.editRefused(r, c, web.Refuse(http.StatusBadRequest, "confirmation_required",
			"Rotate the key with the form on the MCP server's page.", nil))
	}
	overlap, err := s.parseOverlap(r.PostForm.Get("overlap"))
	if err != nil {
		return s.editRefused(r, c, err)
	}
	key, until, err := s.rotateKey(r.Context(), r, c, overlap)
	if err != nil {
		return s.editRefused(r, c, err)
	}
	return web.Render(w, r, http.StatusOK, templates.AdminKeyShown(templates.AdminKeyView{Nav: s.nav(r, "clients"),
		Title: "Key rotated", ClientID: c.ID, Name: clientName(c), Org: c.Org, Key: key,
		Overlap: overlapSentence(overlap, until), ClientURL: s.href(r, "/admin/clients/"+c.ID)}))
}

// overlapSentence says until when the previous keys work.
func overlapSentence(overlap time.Duration, until time.Time) string {
	if overlap == 0 {
		return "The previous keys stopped working now."
	}
	return "The previous keys keep working for " + overlapText(overlap) + ", until " + fmtTime(until) +
		"; then only this one does."
}

// The API.

// manageClientDoc is an MCP server as the editing routes answer it.
type manageClientDoc struct {
	clientDoc
	ProxyOnly bool   `json:"proxy_only"`
	LogoURL   string `json:"logo_url"`
	Homepage  string `json:"homepage"`
}

func manageDocOf(c clientauth.Client) manageClientDoc {
	return manageClientDoc{clientDoc: clientDoc{ID: c.ID, Name: c.Name, Resources: nonNil(c.Resources),
		Providers: nonNil(c.Providers), Disabled: c.Disabled, CreatedAt: c.CreatedAt.UTC(),
		LastUsedAt: optTime(c.LastUsedAt), Org: c.Org}, ProxyOnly: c.ProxyOnly, LogoURL: c.LogoURL, Homepage: c.Homepage}
}

type createClientRequest struct {
	Name      string   `json:"name"`
	Resources []string `json:"resources"`
	Providers []string `json:"providers"`
	ProxyOnly bool     `json:"proxy_only"`
	LogoURL   string   `json:"logo_url"`
	Homepage  string   `json:"homepage"`
}

// apiCreateClient handles POST /admin/api/clients[?org=ORG] {"name",
// "resources", "providers", "proxy_only", "logo_url", "homepage"}: 201 with
// the MCP server and its client key, which no other answer carries.
func (s *Server) apiCreateClient(w http.ResponseWriter, r *http.Request) error {
	var req createClientRequest
	if err := web.DecodeJSON(w, r, &req, 64<<10); err != nil {
		return err
	}
	c, key, err := s.createClient(r.Context(), r, newClient{Name: strings.TrimSpace(req.Name), Resources: req.Resources,
		Providers: req.Providers, ProxyOnly: req.ProxyOnly, LogoURL: strings.TrimSpace(req.LogoURL),
		Homepage: strings.TrimSpace(req.Homepage)})
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusCreated, map[string]any{"client": manageDocOf(c), "key": key})
	return nil
}

type patchClientRequest struct {
	Name      *string   `json:"name"`
	Resources *[]string `json:"resources"`
	Providers *[]string `json:"providers"`
	LogoURL   *string   `json:"logo_url"`
	Homepage  *string   `json:"homepage"`
	ProxyOnly *bool     `json:"proxy_only"`
}

// apiPatchClient handles PATCH /admin/api/clients/{id} {"name",
// "resources", "providers", "logo_url", "homepage", "proxy_only"} (each
// optional; "" removes a URL, [] leaves no provider): the MCP
// server as it now is. Another organization's client is 404 before the body
// is read.
func (s *Server) apiPatchClient(w http.ResponseWriter, r *http.Request) error {
	c, err := s.requestClient(r)
	if err != nil {
		return err
	}
	var req patchClientRequest
	if err := web.DecodeJSON(w, r, &req, 8<<10); err != nil {
		return err
	}
	ch := clientChange{Name: req.Name, LogoURL: req.LogoURL, Homepage: req.Homepage, ProxyOnly: req.ProxyOnly}
	if req.Resources != nil {
		ch.Resources = append([]string{}, *req.Resources...)
	}
	if req.Providers != nil {
		ch.Providers = append([]string{}, *req.Providers...)
	}
	c, err = s.changeClient(r.Context(), r, c, ch)
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusOK, manageDocOf(c))
	return nil
}

type rotateKeyRequest struct {
	Overlap string `json:"overlap"`
}

// apiRotateKey handles POST /admin/api/clients/{id}/rotate-key [{"overlap":
// "24h"}] (no body: the default overlap): the new key, once, and until when
// the previous ones work.
func (s *Server) apiRotateKey(w http.ResponseWriter, r *http.Request) error {
	c, err := s.requestClient(r)
	if err != nil {
		return err
	}
	var req rotateKeyRequest
	if r.ContentLength != 0 || r.Header.Get("Content-Type") != "" {
		if err := web.DecodeJSON(w, r, &req, 1<<10); err != nil {
			return err
		}
	}
	overlap, err := s.parseOverlap(req.Overlap)
	if err != nil {
		return err
	}
	key, until, err := s.rotateKey(r.Context(), r, c, overlap)
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"client_id": c.ID, "key": key, "overlap": overlap.String(),
		"previous_keys_until": until})
	return nil
}
