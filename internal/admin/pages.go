package admin

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// Shared by pages and API: reading the query, and mapping Store errors.

// listQuery reads the listing's filter, cursor and page size.
func listQuery(r *http.Request) (Filter, *Cursor, int, error) {
	q := r.URL.Query()
	// user and issuer byte for byte (Filter.Validate): trimmed, "alice "
	// would list alice.
	f := Filter{Subject: q.Get("user"), Issuer: q.Get("issuer"),
		Provider: strings.TrimSpace(q.Get("provider")), Status: q.Get("status"), Client: strings.TrimSpace(q.Get("client"))}
	// The acting organization, whatever the query says: a member's own,
	// an operator's filter (act read ?org= for both).
	f.Org = scopeOf(r)
	if err := f.Validate(); err != nil {
		return f, nil, 0, err
	}
	var after *Cursor
	if v := q.Get("after"); v != "" {
		c, err := ParseCursor(v)
		if err != nil {
			return f, nil, 0, err
		}
		after = &c
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageSize {
			return f, nil, 0, problem.Detail(ErrInvalid, "limit must be 1-%d", MaxPageSize)
		}
		limit = n
	}
	return f, after, limit, nil
}

// listURL is the listing page (or API) for f after the cursor.
func listURL(base string, f Filter, after *Cursor, limit int) string {
	v := url.Values{}
	for k, x := range map[string]string{"user": f.Subject, "issuer": f.Issuer, "provider": f.Provider,
		"status": f.Status, "client": f.Client, OrgParam: f.Org} {
		if x != "" {
			v.Set(k, x)
		}
	}
	if after != nil {
		v.Set("after", after.String())
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	if len(v) == 0 {
		return base
	}
	return base + "?" + v.Encode()
}

// windows are the spans the events page and API offer.
var windows = []string{"1h", "24h", "7d", "30d", "90d"}

func parseWindow(v string) (time.Duration, string, error) {
	if v == "" {
		v = "24h"
	}
	if !contains(windows, v) {
		return 0, "", problem.Detail(ErrInvalid, "window must be one of %s", strings.Join(windows, ", "))
	}
	if n, ok := strings.CutSuffix(v, "d"); ok {
		days, _ := strconv.Atoi(n)
		return time.Duration(days) * 24 * time.Hour, v, nil
	}
	d, _ := time.ParseDuration(v)
	return d, v, nil
}

// Values of the events page's show parameter.
const (
	showSecurity = "security" // security events (refusals), the default
	showAll      = "all"      // every kind of audit event
)

// eventQuery reads the events page's parameters: the window, what to show
// (security events by default, or all kinds), an optional kind and the
// keyset position.
func (s *Server) eventQuery(r *http.Request) (EventQuery, string, string, error) {
	q := r.URL.Query()
	span, window, err := parseWindow(q.Get("window"))
	if err != nil {
		return EventQuery{}, "", "", err
	}
	show := q.Get("show")
	switch show {
	case "":
		show = showSecurity
	case showSecurity, showAll:
	default:
		return EventQuery{}, "", "", problem.Detail(ErrInvalid, "show must be security or all")
	}
	eq := EventQuery{Prefix: SecurityPrefix, Kind: strings.TrimSpace(q.Get("kind")), Since: s.now().Add(-span),
		Org: scopeOf(r)}
	if eq.Kind != "" || show == showAll {
		eq.Prefix = ""
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return EventQuery{}, "", "", problem.Detail(ErrInvalid, "before must be an event id")
		}
		eq.Before = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageSize {
			return EventQuery{}, "", "", problem.Detail(ErrInvalid, "limit must be 1-%d", MaxPageSize)
		}
		eq.Limit = n
	}
	return eq, window, show, nil
}

// countPrefix is the kinds the counts cover: security events, or all.
func countPrefix(show string) string {
	if show == showAll {
		return ""
	}
	return SecurityPrefix
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func (s *Server) nav(r *http.Request, active string) templates.AdminNav {
	p := principalOf(r.Context())
	nav := templates.AdminNav{Active: active, Admin: strings.TrimPrefix(p.actor, "admin:"), CSRF: s.sessions.CSRFToken(p.sess),
		Org: p.org, Role: string(p.role)}
	// The switcher goes to the same section in another organization (an
	// object's page would be another organization's 404).
	section := map[string]string{"connections": "/admin/connections", "clients": "/admin/clients", "events": "/admin/events"}[active]
	if section == "" {
		section = homePath
	}
	if !p.operator {
		for _, m := range p.members {
			nav.Orgs = append(nav.Orgs, templates.AdminOrgChoice{ID: m.Org, Role: string(m.Role),
				URL: section + "?" + url.Values{OrgParam: {m.Org}}.Encode(), Active: m.Org == p.org})
		}
	}
	return nav
}

func eventRows(evs []Event) []templates.AdminEventRow {
	out := make([]templates.AdminEventRow, 0, len(evs))
	for _, e := range evs {
		row := templates.AdminEventRow{At: fmtTime(e.At), Kind: e.Kind, Actor: e.Actor, Client: e.ClientID,
			Provider: e.Provider, Target: e.Target, RequestID: e.RequestID, IP: e.IP}
		if e.Subject != "" {
			row.User, row.Issuer = e.Subject, e.Issuer
		}
		if len(e.Detail) > 0 {
			b, _ := json.Marshal(e.Detail)
			row.Detail = string(b)
		}
		out = append(out, row)
	}
	return out
}

// home handles GET /admin/.
func (s *Server) home(w http.ResponseWriter, r *http.Request) error {
	http.Redirect(w, r, s.href(r, homePath), http.StatusSeeOther)
	return nil
}

// connectionsPage handles GET /admin/connections: search and keyset pages.
func (s *Server) connectionsPage(w http.ResponseWriter, r *http.Request) error {
	f, after, limit, err := listQuery(r)
	if err != nil {
		return err
	}
	p, err := s.store.Connections(r.Context(), f, after, limit)
	if err != nil {
		return err
	}
	v := templates.AdminConnectionsView{Nav: s.nav(r, "connections"),
		Filter: templates.AdminFilterView{User: f.Subject, Issuer: f.Issuer, Provider: f.Provider, Status: f.Status,
			Client: f.Client, Statuses: Statuses()}}
	if f.Status == string(vault.StatusRevoked) {
		// Revoked connections are deleted: say where their end is recorded.
		v.RevokedURL = s.href(r, "/admin/events?"+url.Values{"kind": {"connection.revoked"}, "window": {"30d"}}.Encode())
	}
	for _, c := range p.Connections {
		v.Rows = append(v.Rows, templates.AdminConnectionRow{URL: s.href(r, "/admin/connections/"+c.ID), ID: c.ID,
			Subject: c.User.Subject, Issuer: c.User.Issuer, Provider: c.Provider, Account: accountText(c), Status: c.Status,
			Scopes: strings.Join(c.Scopes, " "), Consents: strconv.FormatInt(c.Consents, 10),
			Created: fmtTime(c.CreatedAt), Refreshed: fmtTime(c.RefreshedAt), Expires: fmtTime(c.ExpiresAt)})
	}
	if p.Next != nil {
		v.NextURL = s.href(r, listURL("/admin/connections", f, p.Next, limit))
	}
	if after != nil {
		v.FirstURL = s.href(r, listURL("/admin/connections", f, nil, limit))
	}
	return web.Render(w, r, http.StatusOK, templates.AdminConnections(v))
}

// connectionPage handles GET /admin/connections/{id}.
func (s *Server) connectionPage(w http.ResponseWriter, r *http.Request) error {
	d, err := s.store.Detail(r.Context(), scopeOf(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	v := templates.AdminConnectionView{Nav: s.nav(r, "connections"), ID: d.ID, Subject: d.User.Subject,
		Issuer: d.User.Issuer, Provider: d.Provider, Account: d.Account.Label, AccountProblem: d.AccountProblem,
		Status: d.Status, Scopes: d.Scopes, Created: fmtTime(d.CreatedAt), Updated: fmtTime(d.UpdatedAt),
		Refreshed: fmtTime(d.RefreshedAt), Expires: fmtTime(d.ExpiresAt),
		KeyVersion: strconv.Itoa(int(d.KeyVersion)), Events: eventRows(d.Events),
		RevokeURL: s.href(r, "/admin/connections/"+d.ID+"/revoke"), EndSessionsURL: s.href(r, "/admin/sessions/end")}
	if v.Account == "" && d.Account.ID != "" {
		v.Account = d.Account.ID
	}
	switch {
	case d.HealthCheckedAt.IsZero():
		v.Health = "not checked yet (no refresh has reached the provider)"
	case d.LastError != "":
		v.Health, v.HealthBad = "last refresh failed: "+d.LastError+" ("+fmtTime(d.HealthCheckedAt)+")", true
	default:
		v.Health = "last refresh succeeded (" + fmtTime(d.HealthCheckedAt) + ")"
	}
	for _, k := range d.Consents {
		v.Consents = append(v.Consents, templates.AdminConsentRow{ClientID: k.ClientID, ClientName: k.ClientName,
			Scopes: strings.Join(k.Scopes, " "), Granted: fmtTime(k.GrantedAt), Updated: fmtTime(k.UpdatedAt)})
	}
	return web.Render(w, r, http.StatusOK, templates.AdminConnection(v))
}

// confirmRevokePage handles GET /admin/connections/{id}/revoke: the
// confirmation step, with the CSRF-protected form.
func (s *Server) confirmRevokePage(w http.ResponseWriter, r *http.Request) error {
	d, err := s.store.Detail(r.Context(), scopeOf(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	v := templates.AdminRevokeView{Nav: s.nav(r, "connections"), ID: d.ID, Subject: d.User.Subject,
		Issuer: d.User.Issuer, Provider: d.Provider, Action: s.href(r, "/admin/connections/"+d.ID+"/revoke"),
		CSRF: s.sessions.CSRFToken(principalOf(r.Context()).sess), BackURL: s.href(r, "/admin/connections/"+d.ID)}
	for _, k := range d.Consents {
		name := k.ClientName
		if name == "" {
			name = k.ClientID
		}
		v.Clients = append(v.Clients, name+" ("+k.ClientID+")")
	}
	return web.Render(w, r, http.StatusOK, templates.AdminRevoke(v))
}

// revokePage handles POST /admin/connections/{id}/revoke: only with the
// admin session's CSRF token and the confirmation the confirmation page sends.
func (s *Server) revokePage(w http.ResponseWriter, r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return web.Refuse(http.StatusBadRequest, "bad_form", "The form could not be read.", err)
	}
	if err := s.sessions.CheckCSRF(principalOf(r.Context()).sess, r.PostForm.Get(session.CSRFField)); err != nil {
		return web.Refuse(http.StatusForbidden, "csrf_failed", "The form has expired. Open the connection again and retry.", err)
	}
	id := r.PathValue("id")
	if r.PostForm.Get("confirm") != id {
		return web.Refuse(http.StatusBadRequest, "confirmation_required",
			"Confirm the revocation on the confirmation page.", nil)
	}
	rev, err := s.store.Revoke(r.Context(), id, actorOf(r))
	if err != nil {
		return err
	}
	return web.Render(w, r, http.StatusOK, templates.AdminRevoked(templates.AdminRevokedView{Nav: s.nav(r, "connections"),
		ID: id, Subject: rev.Connection.User.Subject, Provider: rev.Connection.Provider, AtProvider: rev.AtProvider,
		Withdrawn: rev.Withdrawn}))
}

// clientsPage handles GET /admin/clients.
func (s *Server) clientsPage(w http.ResponseWriter, r *http.Request) error {
	cs, err := s.clientsOf(r)
	if err != nil {
		return err
	}
	v := templates.AdminClientsView{Nav: s.nav(r, "clients"), Manage: s.newClientForm(r)} // clients_edit.go
	for _, c := range cs {
		v.Clients = append(v.Clients, s.clientRow(r, c))
	}
	return web.Render(w, r, http.StatusOK, templates.AdminClients(v))
}

func (s *Server) clientRow(r *http.Request, c clientauth.Client) templates.AdminClientRow {
	providers := strings.Join(c.Providers, " ")
	if providers == "" {
		providers = "none"
	}
	return templates.AdminClientRow{ID: c.ID, Name: c.Name, Resources: c.Resources, Providers: providers,
		Created: fmtTime(c.CreatedAt), LastUsed: fmtTime(c.LastUsedAt), Disabled: c.Disabled,
		URL:            s.href(r, "/admin/clients/"+c.ID),
		ConnectionsURL: s.href(r, listURL("/admin/connections", Filter{Client: c.ID}, nil, 0))}
}

// eventsPage handles GET /admin/events: counts per kind and the latest events.
func (s *Server) eventsPage(w http.ResponseWriter, r *http.Request) error {
	eq, window, show, err := s.eventQuery(r)
	if err != nil {
		return err
	}
	counts, err := s.store.EventCounts(r.Context(), eq.Org, countPrefix(show), eq.Since)
	if err != nil {
		return err
	}
	evs, next, err := s.store.Events(r.Context(), eq)
	if err != nil {
		return err
	}
	v := templates.AdminEventsView{Nav: s.nav(r, "events"), Window: window, Windows: windows, Kind: eq.Kind,
		All: show == showAll, Events: eventRows(evs)}
	for _, c := range counts {
		v.Counts = append(v.Counts, templates.AdminCountRow{Kind: c.Kind, Events: strconv.FormatInt(c.Events, 10),
			Occurrences: strconv.FormatInt(c.Occurrences, 10), Last: fmtTime(c.Last),
			URL: s.href(r, "/admin/events?"+url.Values{"window": {window}, "show": {show}, "kind": {c.Kind}}.Encode())})
	}
	if next != 0 {
		q := url.Values{"window": {window}, "show": {show}, "before": {strconv.FormatInt(next, 10)}}
		if eq.Kind != "" {
			q.Set("kind", eq.Kind)
		}
		v.NextURL = s.href(r, "/admin/events?"+q.Encode())
	}
	return web.Render(w, r, http.StatusOK, templates.AdminEvents(v))
}

// accountText names a connection's provider account for the pages
// (vault.AccountName).
func accountText(c Connection) string { return vault.AccountName(c.DisplayName, c.Label) }

// clientsOf lists the MCP servers of the request's organization (an
// operator without ?org=: every one), with their organizations.
func (s *Server) clientsOf(r *http.Request) ([]clientauth.Client, error) {
	cs, err := s.clients.List(r.Context())
	if err != nil {
		return nil, err
	}
	org := scopeOf(r)
	if org == "" {
		return cs, nil
	}
	orgs, err := s.store.clientOrgs(r.Context())
	if err != nil {
		return nil, err
	}
	out := cs[:0:0]
	for _, c := range cs {
		if orgs[c.ID] == org {
			out = append(out, c)
		}
	}
	return out, nil
}

// href is path (an admin page, with or without a query) for the same
// acting organization as r: ?org= is kept on every link, form and redirect
// of an organization's admin (and of an operator who filtered), so an
// admin of several organizations stays in the one they picked.
func (s *Server) href(r *http.Request, path string) string {
	org := scopeOf(r)
	if org == "" {
		return path
	}
	base, query, _ := strings.Cut(path, "?")
	q, _ := url.ParseQuery(query)
	if q.Get(OrgParam) != "" {
		return path
	}
	q.Set(OrgParam, org)
	return base + "?" + q.Encode()
}
