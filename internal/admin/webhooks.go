package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/internal/webhook"
	"github.com/connectd/connectd/web/templates"
)

// Webhook endpoints and their deliveries, for the pages, the API and the
// CLI. Package webhook owns the tables and the rules (URL, event types, the
// secret shown once); the Store adds the audit trail, by the admin who acted.
// The audit event is written after the change, on its own: webhook.Service
// runs each change in a transaction of its own, and a created endpoint's
// secret must reach the admin even when the audit write fails (which is
// logged).

// ErrNoWebhooks: the Store has no webhook service.
var ErrNoWebhooks error = &web.Error{Status: http.StatusServiceUnavailable, Code: "webhooks_unavailable",
	Description: "this connectd has no webhook service"}

// Webhooks is the webhook service the Store changes endpoints through, or
// ErrNoWebhooks.
func (st *Store) Webhooks() (*webhook.Service, error) {
	if st.webhooks == nil {
		return nil, ErrNoWebhooks
	}
	return st.webhooks, nil
}

// CreateWebhook registers an endpoint for clientID at rawURL receiving events
// (none: every type) and returns it with its signing secret, which exists in
// the clear only in this answer. Audited as webhook.created, without the
// secret.
func (st *Store) CreateWebhook(ctx context.Context, clientID, rawURL string, events []string, by Actor) (webhook.Endpoint, string, error) {
	wh, err := st.Webhooks()
	if err != nil {
		return webhook.Endpoint{}, "", err
	}
	org, err := st.clientIn(ctx, clientID, by)
	if err != nil {
		return webhook.Endpoint{}, "", err
	}
	ep, secret, err := wh.Create(ctx, clientID, rawURL, events)
	if err != nil {
		return webhook.Endpoint{}, "", err
	}
	st.auditAfter(ctx, Event{Kind: "webhook.created", Org: org, ClientID: ep.ClientID, Target: ep.ID,
		Detail: map[string]any{"url": ep.URL, "events": nonNil(ep.Events)}}, by)
	st.logger.InfoContext(ctx, "webhook endpoint created by an admin", slog.String("endpoint", ep.ID),
		slog.String("client_id", ep.ClientID), slog.String("actor", by.Name))
	return ep, secret, nil
}

// DeleteWebhook removes the endpoint id with its deliveries and returns what
// it was. Audited as webhook.deleted.
func (st *Store) DeleteWebhook(ctx context.Context, id string, by Actor) (webhook.Endpoint, error) {
	wh, err := st.Webhooks()
	if err != nil {
		return webhook.Endpoint{}, err
	}
	ep, org, err := st.endpoint(ctx, wh, id, by)
	if err != nil {
		return webhook.Endpoint{}, err
	}
	if err := wh.Delete(ctx, id); err != nil {
		return webhook.Endpoint{}, err
	}
	st.auditAfter(ctx, Event{Kind: "webhook.deleted", Org: org, ClientID: ep.ClientID, Target: ep.ID,
		Detail: map[string]any{"url": ep.URL}}, by)
	st.logger.InfoContext(ctx, "webhook endpoint deleted by an admin", slog.String("endpoint", ep.ID),
		slog.String("client_id", ep.ClientID), slog.String("actor", by.Name))
	return ep, nil
}

// Redeliver sends the delivery id again now, with a fresh run of attempts,
// and returns it as it was before. Audited as webhook.redelivered.
func (st *Store) Redeliver(ctx context.Context, id string, by Actor) (webhook.Delivery, error) {
	wh, err := st.Webhooks()
	if err != nil {
		return webhook.Delivery{}, err
	}
	d, ep, org, err := st.delivery(ctx, wh, id, by)
	if err != nil {
		return webhook.Delivery{}, err
	}
	if err := wh.Redeliver(ctx, id); err != nil {
		return webhook.Delivery{}, err
	}
	st.auditAfter(ctx, Event{Kind: "webhook.redelivered", Org: org, ClientID: ep.ClientID, Target: d.ID,
		Detail: map[string]any{"endpoint_id": ep.ID, "type": d.Type, "status": d.Status}}, by)
	st.logger.InfoContext(ctx, "webhook redelivery requested by an admin", slog.String("delivery", d.ID),
		slog.String("endpoint", ep.ID), slog.String("actor", by.Name))
	return d, nil
}

// The ids package webhook mints (its newID: a prefix and 128 random bits in
// lower-case base32), loosely: an id of any other shape names no row, so it
// is answered as an unknown id is, without a query (Postgres would refuse
// NUL or invalid UTF-8 in it with an error, a 500).
var (
	endpointIDPattern = regexp.MustCompile(`^we_[a-z0-9]{1,64}$`)
	deliveryIDPattern = regexp.MustCompile(`^msg_[a-z0-9]{1,64}$`)
)

// endpoint reads the endpoint id of a request and its client's
// organization, or webhook.ErrNotFound — for an endpoint of another
// organization than by's too.
func (st *Store) endpoint(ctx context.Context, wh *webhook.Service, id string, by Actor) (webhook.Endpoint, string, error) {
	if !endpointIDPattern.MatchString(id) {
		return webhook.Endpoint{}, "", problem.Detail(webhook.ErrNotFound, "no such endpoint")
	}
	ep, err := wh.Endpoint(ctx, id)
	if err != nil {
		return webhook.Endpoint{}, "", err
	}
	org, err := st.clientIn(ctx, ep.ClientID, by)
	if errors.Is(err, ErrNotFound) {
		return webhook.Endpoint{}, "", problem.Detail(webhook.ErrNotFound, "no such endpoint")
	}
	return ep, org, err
}

// delivery reads the delivery id of a request, its endpoint and their
// client's organization, or webhook.ErrNotFound — for a delivery of another
// organization than by's too.
func (st *Store) delivery(ctx context.Context, wh *webhook.Service, id string, by Actor) (webhook.Delivery, webhook.Endpoint, string, error) {
	if !deliveryIDPattern.MatchString(id) {
		return webhook.Delivery{}, webhook.Endpoint{}, "", problem.Detail(webhook.ErrNotFound, "no such delivery")
	}
	d, err := wh.Delivery(ctx, id)
	if err != nil {
		return webhook.Delivery{}, webhook.Endpoint{}, "", err
	}
	ep, org, err := st.endpoint(ctx, wh, d.EndpointID, by)
	if errors.Is(err, webhook.ErrNotFound) {
		return webhook.Delivery{}, webhook.Endpoint{}, "", problem.Detail(webhook.ErrNotFound, "no such delivery")
	}
	return d, ep, org, err
}

// auditAfter records ev for a change already committed; a failure is logged.
func (st *Store) auditAfter(ctx context.Context, ev Event, by Actor) {
	if err := writeAudit(ctx, st.pool, ev, by); err != nil {
		st.logger.ErrorContext(ctx, "audit event not written", slog.String("kind", ev.Kind), slog.Any("error", err))
	}
}

// deliveryLimit reads ?limit= of a deliveries listing (default
// DefaultPageSize, at most MaxPageSize).
func deliveryLimit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return DefaultPageSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxPageSize {
		return 0, web.Errorf(http.StatusBadRequest, "invalid_request", "limit must be 1-%d", MaxPageSize)
	}
	return n, nil
}

// clientOf answers 404 for a client that does not exist, or is not of the
// request's organization.
func (s *Server) clientOf(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if _, err := s.client(r, id); err != nil {
		return "", clientError(err)
	}
	return id, nil
}

// client reads the MCP server (client) id a request names, or
// clientauth.ErrClientNotFound: at once, without a query, for an id that is not
// the shape of one (names.ValidClientID), and for a client of another
// organization than the request acts for (the same answer).
func (s *Server) client(r *http.Request, id string) (clientauth.Client, error) {
	if !names.ValidClientID(id) {
		return clientauth.Client{}, fmt.Errorf("%w: not a client id", clientauth.ErrClientNotFound)
	}
	org, err := s.store.clientOrg(r.Context(), id)
	if errors.Is(err, ErrNotFound) || err == nil && scopeOf(r) != "" && org != scopeOf(r) {
		return clientauth.Client{}, fmt.Errorf("%w: not in the acting organization", clientauth.ErrClientNotFound)
	}
	if err != nil {
		return clientauth.Client{}, err
	}
	return s.clients.Get(r.Context(), id)
}

func clientError(err error) error {
	if errors.Is(err, clientauth.ErrClientNotFound) {
		return &web.Error{Status: http.StatusNotFound, Code: "not_found", Description: "no such MCP server (client)", Err: err}
	}
	return fmt.Errorf("admin: client: %w", err)
}

// The JSON API of webhooks. An endpoint document never holds the secret:
// only the answer to POST .../webhooks does.

type endpointDoc struct {
	ID        string    `json:"id"`
	ClientID  string    `json:"client_id"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"` // empty: every type
	CreatedAt time.Time `json:"created_at"`
}

func endpointDocOf(e webhook.Endpoint) endpointDoc {
	return endpointDoc{ID: e.ID, ClientID: e.ClientID, URL: e.URL, Events: nonNil(e.Events), CreatedAt: e.CreatedAt.UTC()}
}

type attemptDoc struct {
	N          int       `json:"attempt"`
	At         time.Time `json:"at"`
	StatusCode int       `json:"status_code,omitempty"`
	Error      string    `json:"error,omitempty"`
	DurationMS int       `json:"duration_ms"`
}

type deliveryDoc struct {
	ID            string       `json:"id"`
	EndpointID    string       `json:"endpoint_id"`
	Type          string       `json:"type"`
	Status        string       `json:"status"`
	Attempts      int          `json:"attempts"`
	CreatedAt     time.Time    `json:"created_at"`
	NextAttemptAt *time.Time   `json:"next_attempt_at,omitempty"`
	DeliveredAt   *time.Time   `json:"delivered_at,omitempty"`
	Payload       string       `json:"payload,omitempty"`
	AttemptLog    []attemptDoc `json:"attempt_log,omitempty"`
}

func optTimePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	return optTime(*t)
}

func deliveryDocOf(d webhook.Delivery) deliveryDoc {
	return deliveryDoc{ID: d.ID, EndpointID: d.EndpointID, Type: d.Type, Status: d.Status, Attempts: d.Attempts,
		CreatedAt: d.CreatedAt.UTC(), NextAttemptAt: optTimePtr(d.NextAttemptAt), DeliveredAt: optTimePtr(d.DeliveredAt)}
}

// apiWebhooks handles GET /admin/api/clients/{id}/webhooks.
func (s *Server) apiWebhooks(w http.ResponseWriter, r *http.Request) error {
	wh, err := s.store.Webhooks()
	if err != nil {
		return err
	}
	id, err := s.clientOf(r)
	if err != nil {
		return err
	}
	eps, err := wh.Endpoints(r.Context(), id)
	if err != nil {
		return err
	}
	out := struct {
		Endpoints []endpointDoc `json:"endpoints"`
	}{Endpoints: []endpointDoc{}}
	for _, e := range eps {
		out.Endpoints = append(out.Endpoints, endpointDocOf(e))
	}
	web.WriteJSON(w, http.StatusOK, out)
	return nil
}

type createWebhookRequest struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
}

// apiCreateWebhook handles POST /admin/api/clients/{id}/webhooks
// {"url": URL, "events": [TYPE...]}: 201 with the endpoint and its secret,
// which no other answer carries.
func (s *Server) apiCreateWebhook(w http.ResponseWriter, r *http.Request) error {
	var req createWebhookRequest
	if err := web.DecodeJSON(w, r, &req, 8<<10); err != nil {
		return err
	}
	id, err := s.clientOf(r)
	if err != nil {
		return err
	}
	ep, secret, err := s.store.CreateWebhook(r.Context(), id, strings.TrimSpace(req.URL), req.Events, actorOf(r))
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusCreated, map[string]any{"endpoint": endpointDocOf(ep), "secret": secret})
	return nil
}

// apiDeleteWebhook handles DELETE /admin/api/webhooks/{id}.
func (s *Server) apiDeleteWebhook(w http.ResponseWriter, r *http.Request) error {
	ep, err := s.store.DeleteWebhook(r.Context(), r.PathValue("id"), actorOf(r))
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"deleted": endpointDocOf(ep)})
	return nil
}

// apiDeliveries handles GET /admin/api/webhooks/{id}/deliveries[?limit=N]:
// the endpoint's latest deliveries, newest first, without attempts.
func (s *Server) apiDeliveries(w http.ResponseWriter, r *http.Request) error {
	wh, err := s.store.Webhooks()
	if err != nil {
		return err
	}
	limit, err := deliveryLimit(r)
	if err != nil {
		return err
	}
	ep, _, err := s.store.endpoint(r.Context(), wh, r.PathValue("id"), actorOf(r))
	if err != nil {
		return err
	}
	ds, err := wh.Deliveries(r.Context(), ep.ID, limit)
	if err != nil {
		return err
	}
	out := struct {
		Endpoint   endpointDoc   `json:"endpoint"`
		Deliveries []deliveryDoc `json:"deliveries"`
	}{Endpoint: endpointDocOf(ep), Deliveries: []deliveryDoc{}}
	for _, d := range ds {
		out.Deliveries = append(out.Deliveries, deliveryDocOf(d))
	}
	web.WriteJSON(w, http.StatusOK, out)
	return nil
}

// apiDelivery handles GET /admin/api/deliveries/{id}: the delivery with its
// payload and every attempt.
func (s *Server) apiDelivery(w http.ResponseWriter, r *http.Request) error {
	wh, err := s.store.Webhooks()
	if err != nil {
		return err
	}
	d, _, _, err := s.store.delivery(r.Context(), wh, r.PathValue("id"), actorOf(r))
	if err != nil {
		return err
	}
	doc := deliveryDocOf(d)
	doc.Payload = d.Payload
	doc.AttemptLog = []attemptDoc{}
	for _, a := range d.Tries {
		doc.AttemptLog = append(doc.AttemptLog, attemptDoc{N: a.N, At: a.At.UTC(), StatusCode: a.StatusCode,
			Error: a.Error, DurationMS: a.DurationMS})
	}
	// attempt_log is always present here, even empty.
	web.WriteJSON(w, http.StatusOK, struct {
		deliveryDoc
		AttemptLog []attemptDoc `json:"attempt_log"`
	}{doc, doc.AttemptLog})
	return nil
}

// apiRedeliver handles POST /admin/api/deliveries/{id}/redeliver: 202, the
// delivery is queued again with a fresh run of attempts.
func (s *Server) apiRedeliver(w http.ResponseWriter, r *http.Request) error {
	d, err := s.store.Redeliver(r.Context(), r.PathValue("id"), actorOf(r))
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusAccepted, map[string]any{"id": d.ID, "endpoint_id": d.EndpointID, "status": "pending"})
	return nil
}

// The pages of webhooks: an MCP server's page lists its endpoints (with the
// add and delete forms), an endpoint's page its deliveries, a delivery's
// page its attempts (with the Redeliver form). Every form is a POST with the
// admin session's CSRF token.

func eventsText(events []string) string {
	if len(events) == 0 {
		return "every event"
	}
	return strings.Join(events, ", ")
}

func clientName(c clientauth.Client) string {
	if c.Name == "" {
		return c.ID
	}
	return c.Name
}

// checkForm reads a page's form and checks its CSRF token.
func (s *Server) checkForm(w http.ResponseWriter, r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return web.Refuse(http.StatusBadRequest, "bad_form", "The form could not be read.", err)
	}
	if err := s.sessions.CheckCSRF(principalOf(r.Context()).sess, r.PostForm.Get(session.CSRFField)); err != nil {
		return web.Refuse(http.StatusForbidden, "csrf_failed", "The form has expired. Open the page again and retry.", err)
	}
	return nil
}

// clientPage handles GET /admin/clients/{id}: the MCP server, its request
// rules and recent approvals (approvals.go) and its webhook endpoints.
func (s *Server) clientPage(w http.ResponseWriter, r *http.Request) error {
	wh, err := s.store.Webhooks()
	if err != nil {
		return err
	}
	c, err := s.client(r, r.PathValue("id"))
	if err != nil {
		return clientError(err)
	}
	eps, err := wh.Endpoints(r.Context(), c.ID)
	if err != nil {
		return err
	}
	row := s.clientRow(r, c)
	v := templates.AdminClientView{Nav: s.nav(r, "clients"), ID: c.ID, Name: clientName(c), Resources: c.Resources,
		Providers: row.Providers, Created: row.Created, LastUsed: row.LastUsed, Disabled: c.Disabled,
		ConnectionsURL: row.ConnectionsURL, CreateURL: s.href(r, "/admin/clients/"+c.ID+"/webhooks"), Types: webhook.Types,
		CutOffURL: s.href(r, "/admin/clients/"+c.ID+"/cut-off")}
	if p := principalOf(r.Context()); c.Disabled && (p.operator || p.role.Allows(RoleSecurity)) {
		v.EnableURL = s.href(r, "/admin/clients/"+c.ID+"/enable")
	}
	v.Manage = s.clientManage(r, c) // clients_edit.go
	// Its request rules and recent approvals (approvals.go).
	if err := s.approvalsView(r, c, &v); err != nil {
		return err
	}
	for _, e := range eps {
		v.Endpoints = append(v.Endpoints, templates.AdminEndpointRow{ID: e.ID, URL: e.URL, Events: eventsText(e.Events),
			Created: fmtTime(e.CreatedAt), DeliveriesURL: s.href(r, "/admin/webhooks/"+e.ID),
			DeleteURL: s.href(r, "/admin/webhooks/"+e.ID+"/delete")})
	}
	return web.Render(w, r, http.StatusOK, templates.AdminClient(v))
}

// createWebhookPage handles POST /admin/clients/{id}/webhooks (url, events):
// the answer shows the new endpoint's secret, this once.
func (s *Server) createWebhookPage(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkForm(w, r); err != nil {
		return err
	}
	c, err := s.client(r, r.PathValue("id"))
	if err != nil {
		return clientError(err)
	}
	ep, secret, err := s.store.CreateWebhook(r.Context(), c.ID, strings.TrimSpace(r.PostForm.Get("url")),
		r.PostForm["events"], actorOf(r))
	if err != nil {
		return err
	}
	return web.Render(w, r, http.StatusOK, templates.AdminWebhookCreated(templates.AdminWebhookCreatedView{
		Nav: s.nav(r, "clients"), ID: ep.ID, URL: ep.URL, Events: eventsText(ep.Events), ClientName: clientName(c),
		Secret: secret, ClientURL: s.href(r, "/admin/clients/"+c.ID), DeliveriesURL: s.href(r, "/admin/webhooks/"+ep.ID)}))
}

// deleteWebhookPage handles POST /admin/webhooks/{id}/delete, then back to
// the MCP server's page.
func (s *Server) deleteWebhookPage(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkForm(w, r); err != nil {
		return err
	}
	if r.PostForm.Get("confirm") != r.PathValue("id") {
		return web.Refuse(http.StatusBadRequest, "confirmation_required",
			"Confirm the deletion on the confirmation page.", nil)
	}
	ep, err := s.store.DeleteWebhook(r.Context(), r.PathValue("id"), actorOf(r))
	if err != nil {
		return err
	}
	http.Redirect(w, r, s.href(r, "/admin/clients/"+ep.ClientID), http.StatusSeeOther)
	return nil
}

// confirmDeleteWebhookPage handles GET /admin/webhooks/{id}/delete: the
// confirmation step (what goes with the endpoint), with the CSRF-protected
// form that repeats the endpoint's id.
func (s *Server) confirmDeleteWebhookPage(w http.ResponseWriter, r *http.Request) error {
	wh, err := s.store.Webhooks()
	if err != nil {
		return err
	}
	ep, _, err := s.store.endpoint(r.Context(), wh, r.PathValue("id"), actorOf(r))
	if err != nil {
		return err
	}
	return web.Render(w, r, http.StatusOK, templates.AdminDeleteWebhook(templates.AdminDeleteWebhookView{
		Nav: s.nav(r, "clients"), ID: ep.ID, URL: ep.URL, ClientID: ep.ClientID,
		Action: s.href(r, "/admin/webhooks/"+ep.ID+"/delete"), CSRF: s.sessions.CSRFToken(principalOf(r.Context()).sess),
		BackURL: s.href(r, "/admin/clients/"+ep.ClientID)}))
}

// webhookPage handles GET /admin/webhooks/{id}[?limit=N]: the endpoint's
// latest deliveries.
func (s *Server) webhookPage(w http.ResponseWriter, r *http.Request) error {
	wh, err := s.store.Webhooks()
	if err != nil {
		return err
	}
	limit, err := deliveryLimit(r)
	if err != nil {
		return err
	}
	ep, _, err := s.store.endpoint(r.Context(), wh, r.PathValue("id"), actorOf(r))
	if err != nil {
		return err
	}
	ds, err := wh.Deliveries(r.Context(), ep.ID, limit)
	if err != nil {
		return err
	}
	name := ep.ClientID
	if c, err := s.clients.Get(r.Context(), ep.ClientID); err == nil {
		name = clientName(c)
	}
	v := templates.AdminWebhookView{Nav: s.nav(r, "clients"), ID: ep.ID, URL: ep.URL, Events: eventsText(ep.Events),
		Created: fmtTime(ep.CreatedAt), ClientName: name, ClientURL: s.href(r, "/admin/clients/"+ep.ClientID)}
	for _, d := range ds {
		v.Deliveries = append(v.Deliveries, templates.AdminDeliveryRow{URL: s.href(r, "/admin/deliveries/"+d.ID), ID: d.ID,
			Type: d.Type, Status: d.Status, Attempts: strconv.Itoa(d.Attempts), Created: fmtTime(d.CreatedAt),
			Next: fmtOptTime(d.NextAttemptAt)})
	}
	return web.Render(w, r, http.StatusOK, templates.AdminWebhook(v))
}

func fmtOptTime(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return fmtTime(*t)
}

// deliveryPage handles GET /admin/deliveries/{id}: the delivery, its
// payload and its attempts.
func (s *Server) deliveryPage(w http.ResponseWriter, r *http.Request) error {
	wh, err := s.store.Webhooks()
	if err != nil {
		return err
	}
	d, ep, _, err := s.store.delivery(r.Context(), wh, r.PathValue("id"), actorOf(r))
	if err != nil {
		return err
	}
	payload := d.Payload
	var buf bytes.Buffer
	if json.Indent(&buf, []byte(d.Payload), "", "  ") == nil {
		payload = buf.String()
	}
	v := templates.AdminDeliveryView{Nav: s.nav(r, "clients"), ID: d.ID, Type: d.Type, Status: d.Status,
		Attempts: strconv.Itoa(d.Attempts), Created: fmtTime(d.CreatedAt), Next: fmtOptTime(d.NextAttemptAt),
		Delivered: fmtOptTime(d.DeliveredAt), Payload: payload, EndpointURL: ep.URL, WebhookURL: s.href(r, "/admin/webhooks/"+ep.ID),
		RedeliverURL: s.href(r, "/admin/deliveries/"+d.ID+"/redeliver")}
	for _, a := range d.Tries {
		st := "no answer"
		if a.StatusCode != 0 {
			st = strconv.Itoa(a.StatusCode)
		}
		v.Tries = append(v.Tries, templates.AdminAttemptRow{N: strconv.Itoa(a.N), At: fmtTime(a.At), Status: st,
			Error: a.Error, Duration: strconv.Itoa(a.DurationMS) + " ms"})
	}
	return web.Render(w, r, http.StatusOK, templates.AdminDelivery(v))
}

// redeliverPage handles POST /admin/deliveries/{id}/redeliver, then back to
// the delivery's page.
func (s *Server) redeliverPage(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkForm(w, r); err != nil {
		return err
	}
	d, err := s.store.Redeliver(r.Context(), r.PathValue("id"), actorOf(r))
	if err != nil {
		return err
	}
	http.Redirect(w, r, s.href(r, "/admin/deliveries/"+d.ID), http.StatusSeeOther)
	return nil
}
