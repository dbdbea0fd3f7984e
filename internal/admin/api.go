package admin

import (
	"net/http"
	"time"

	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/web"
)

// The JSON API: the same data as the pages, for scripts with an admin API key.
// No document carries a credential: the Store never reads one.

type connectionDoc struct {
	ID          string     `json:"id"`
	Issuer      string     `json:"issuer"`
	Subject     string     `json:"subject"`
	Provider    string     `json:"provider"`
	DisplayName string     `json:"display_name"`
	Label       string     `json:"label"`
	Status      string     `json:"status"`
	Scopes      []string   `json:"scopes"`
	KeyVersion  int32      `json:"key_version"`
	Consents    int64      `json:"consents"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	RefreshedAt *time.Time `json:"refreshed_at,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	// Health: when a refresh last reached the provider, and the error class
	// it ended with ("" for success).
	HealthCheckedAt *time.Time `json:"health_checked_at,omitempty"`
	LastError       string     `json:"last_error"`
	Org             string     `json:"org"`
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func connectionDocOf(c Connection) connectionDoc {
	return connectionDoc{ID: c.ID, Issuer: c.User.Issuer, Subject: c.User.Subject, Provider: c.Provider,
		DisplayName: c.DisplayName, Label: c.Label,
		Status: c.Status, Scopes: nonNil(c.Scopes), KeyVersion: c.KeyVersion, Consents: c.Consents,
		CreatedAt: c.CreatedAt.UTC(), UpdatedAt: c.UpdatedAt.UTC(), RefreshedAt: optTime(c.RefreshedAt),
		ExpiresAt: optTime(c.ExpiresAt), HealthCheckedAt: optTime(c.HealthCheckedAt), LastError: c.LastError, Org: c.Org}
}

type consentDoc struct {
	ClientID   string    `json:"client_id"`
	ClientName string    `json:"client_name"`
	Scopes     []string  `json:"scopes"`
	GrantedAt  time.Time `json:"granted_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

type eventDoc struct {
	ID        int64          `json:"id"`
	At        time.Time      `json:"at"`
	Kind      string         `json:"kind"`
	Actor     string         `json:"actor"`
	Issuer    string         `json:"issuer,omitempty"`
	Subject   string         `json:"subject,omitempty"`
	ClientID  string         `json:"client_id,omitempty"`
	Provider  string         `json:"provider,omitempty"`
	Target    string         `json:"target,omitempty"`
	RequestID string         `json:"request_id,omitempty"`
	IP        string         `json:"ip,omitempty"`
	Detail    map[string]any `json:"detail"`
	Org       string         `json:"org"`
}

func eventDocs(evs []Event) []eventDoc {
	out := make([]eventDoc, 0, len(evs))
	for _, e := range evs {
		out = append(out, eventDoc{ID: e.ID, At: e.At.UTC(), Kind: e.Kind, Actor: e.Actor, Issuer: e.Issuer,
			Subject: e.Subject, ClientID: e.ClientID, Provider: e.Provider, Target: e.Target, RequestID: e.RequestID,
			IP: e.IP, Detail: e.Detail, Org: e.Org})
	}
	return out
}

// apiConnections handles GET /admin/api/connections: the listing, with the
// page's filters (user, issuer, provider, status, client), limit and the
// keyset cursor after (from the previous page's next).
func (s *Server) apiConnections(w http.ResponseWriter, r *http.Request) error {
	f, after, limit, err := listQuery(r)
	if err != nil {
		return err
	}
	p, err := s.store.Connections(r.Context(), f, after, limit)
	if err != nil {
		return err
	}
	out := struct {
		Connections []connectionDoc `json:"connections"`
		Next        string          `json:"next,omitempty"`
	}{Connections: []connectionDoc{}}
	for _, c := range p.Connections {
		out.Connections = append(out.Connections, connectionDocOf(c))
	}
	if p.Next != nil {
		out.Next = p.Next.String()
	}
	web.WriteJSON(w, http.StatusOK, out)
	return nil
}

// apiConnection handles GET /admin/api/connections/{id}.
func (s *Server) apiConnection(w http.ResponseWriter, r *http.Request) error {
	d, err := s.store.Detail(r.Context(), scopeOf(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	out := struct {
		connectionDoc
		AccountID      string       `json:"account_id,omitempty"`
		AccountLabel   string       `json:"account_label,omitempty"`
		AccountProblem string       `json:"account_problem,omitempty"`
		ConsentsBy     []consentDoc `json:"consented_clients"`
		Events         []eventDoc   `json:"events"`
	}{connectionDoc: connectionDocOf(d.Connection), AccountID: d.Account.ID, AccountLabel: d.Account.Label,
		AccountProblem: d.AccountProblem, ConsentsBy: []consentDoc{}, Events: eventDocs(d.Events)}
	for _, k := range d.Consents {
		out.ConsentsBy = append(out.ConsentsBy, consentDoc{ClientID: k.ClientID, ClientName: k.ClientName,
			Scopes: nonNil(k.Scopes), GrantedAt: k.GrantedAt.UTC(), UpdatedAt: k.UpdatedAt.UTC()})
	}
	web.WriteJSON(w, http.StatusOK, out)
	return nil
}

type revokeRequest struct {
	// Confirm must repeat the connection id: a script cannot revoke by
	// accident with a bare POST.
	Confirm string `json:"confirm"`
}

// apiRevoke handles POST /admin/api/connections/{id}/revoke with body
// {"confirm": "<id>"}.
func (s *Server) apiRevoke(w http.ResponseWriter, r *http.Request) error {
	var req revokeRequest
	if err := web.DecodeJSON(w, r, &req, 4<<10); err != nil {
		return err
	}
	id := r.PathValue("id")
	if req.Confirm != id {
		return web.Errorf(http.StatusBadRequest, "confirmation_required",
			`repeat the connection id in the body: {"confirm": "<id>"}`)
	}
	rev, err := s.store.Revoke(r.Context(), id, actorOf(r))
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "provider": rev.Connection.Provider,
		"issuer": rev.Connection.User.Issuer, "subject": rev.Connection.User.Subject,
		"revoked_at_provider": rev.AtProvider == "revoked", "revocation": rev.AtProvider,
		"consents_withdrawn": nonNil(rev.Withdrawn)})
	return nil
}

type clientDoc struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Resources  []string   `json:"resources"`
	Providers  []string   `json:"providers"`
	Disabled   bool       `json:"disabled"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	Org        string     `json:"org"`
}

// apiClients handles GET /admin/api/clients.
func (s *Server) apiClients(w http.ResponseWriter, r *http.Request) error {
	cs, err := s.clientsOf(r)
	if err != nil {
		return err
	}
	orgs, err := s.store.clientOrgs(r.Context())
	if err != nil {
		return err
	}
	out := struct {
		Clients []clientDoc `json:"clients"`
	}{Clients: []clientDoc{}}
	for _, c := range cs {
		out.Clients = append(out.Clients, clientDoc{ID: c.ID, Name: c.Name, Resources: nonNil(c.Resources),
			Providers: nonNil(c.Providers), Disabled: c.Disabled, CreatedAt: c.CreatedAt.UTC(),
			LastUsedAt: optTime(c.LastUsedAt), Org: orgs[c.ID]})
	}
	web.WriteJSON(w, http.StatusOK, out)
	return nil
}

type countDoc struct {
	Kind        string    `json:"kind"`
	Events      int64     `json:"events"`
	Occurrences int64     `json:"occurrences"`
	Last        time.Time `json:"last"`
}

// apiEvents handles GET /admin/api/events[?window=24h&show=all&kind=K&before=ID]:
// event counts per kind in the window, and the latest events (security
// events; every kind with show=all; or those of kind K).
func (s *Server) apiEvents(w http.ResponseWriter, r *http.Request) error {
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
	out := struct {
		Window     string     `json:"window"`
		Since      time.Time  `json:"since"`
		Counts     []countDoc `json:"counts"`
		Events     []eventDoc `json:"events"`
		NextBefore int64      `json:"next_before,omitempty"`
	}{Window: window, Since: eq.Since.UTC(), Counts: []countDoc{}, Events: eventDocs(evs), NextBefore: next}
	for _, c := range counts {
		out.Counts = append(out.Counts, countDoc{Kind: c.Kind, Events: c.Events, Occurrences: c.Occurrences,
			Last: c.Last.UTC()})
	}
	web.WriteJSON(w, http.StatusOK, out)
	return nil
}

type cutOffRequest struct {
	// Confirm must repeat the client id, as for a revocation.
	Confirm string    `json:"confirm"`
	Since   time.Time `json:"since"`
	Revoke  bool      `json:"revoke"`
}

type exposedDoc struct {
	ConnectionID string    `json:"connection_id"`
	Issuer       string    `json:"issuer"`
	Subject      string    `json:"subject"`
	Provider     string    `json:"provider"`
	DisplayName  string    `json:"display_name"`
	Label        string    `json:"label"`
	LastRead     time.Time `json:"last_read"`
}

// apiCutOff handles POST /admin/api/clients/{id}/cut-off with body
// {"confirm": id, "since": RFC 3339, "revoke": bool}: the client is
// disabled, its exposure since then listed, and with revoke those
// connections revoked at the provider.
func (s *Server) apiCutOff(w http.ResponseWriter, r *http.Request) error {
	var req cutOffRequest
	if err := web.DecodeJSON(w, r, &req, 4<<10); err != nil {
		return err
	}
	id := r.PathValue("id")
	if !names.ValidClientID(id) {
		return problem.Detail(ErrNotFound, "no such client")
	}
	if req.Confirm != id {
		return web.Errorf(http.StatusBadRequest, "confirmation_required", `repeat the client id in the body: {"confirm": "<id>"}`)
	}
	c, err := s.store.CutOffClient(r.Context(), s.clients, id, req.Since, req.Revoke, actorOf(r))
	if err != nil {
		return err
	}
	out := map[string]any{"client_id": id, "disabled": true, "since": c.Since.UTC(), "exposed": []exposedDoc{},
		"revoked": c.Revoked, "failed": c.Failed, "revoked_at_provider": c.AtProvider}
	docs := []exposedDoc{}
	for _, x := range c.Exposed {
		docs = append(docs, exposedDoc{ConnectionID: x.ConnectionID, Issuer: x.User.Issuer, Subject: x.User.Subject,
			Provider: x.Provider, DisplayName: x.DisplayName, Label: x.Label, LastRead: x.LastRead.UTC()})
	}
	out["exposed"] = docs
	web.WriteJSON(w, http.StatusOK, out)
	return nil
}
