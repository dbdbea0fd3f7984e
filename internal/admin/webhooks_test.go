package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/connectd/connectd/internal/webhook"
)

// receiver is an MCP server's webhook endpoint: a TLS server (the harness's
// outbound client trusts its certificate) that records every request.
type receiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []received
	more chan struct{}
}

type received struct {
	path   string
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{more: make(chan struct{}, 100)}
	rc.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, received{path: r.URL.Path, header: r.Header.Clone(), body: body})
		rc.mu.Unlock()
		rc.more <- struct{}{}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// wait returns the first n requests once they arrived.
func (rc *receiver) wait(t *testing.T, n int) []received {
	t.Helper()
	return rc.waitPath(t, "", n)
}

// waitPath returns the first n requests to path ("": any) once they
// arrived.
func (rc *receiver) waitPath(t *testing.T, path string, n int) []received {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		var out []received
		rc.mu.Lock()
		for _, r := range rc.got {
			if path == "" || r.path == path {
				out = append(out, r)
			}
		}
		rc.mu.Unlock()
		if len(out) >= n {
			return out
		}
		select {
		case <-rc.more:
		case <-deadline:
			t.Fatalf("the receiver got %d requests to %q, want %d", len(out), path, n)
		}
	}
}

func decode(t *testing.T, raw string) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("not JSON: %s", raw)
	}
	return out
}

// runJobs runs the server's background work (the River client delivers
// webhooks) until the test ends; the harness itself does not.
func (e *env) runJobs() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.server.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
}

// eventually polls cond until it holds (deliveries are recorded after the
// receiver answered).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

var secretPattern = regexp.MustCompile(`whsec_[A-Za-z0-9+/]{43}=`)

// TestWebhooksAPI drives endpoints and deliveries through the admin JSON
// API: bad input gets a 4xx with a stable code and changes nothing; the
// secret is answered once and verifies the real delivery a revocation
// causes; redelivery makes a new attempt; every change is audited by the
// key, without the secret.
func TestWebhooksAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noAdminLogin: true})
	e.runJobs()
	m := e.newMCPServer("files", "fake")
	rc := newReceiver(t)
	k, key := e.newAdminKey("ops")
	base := "/admin/api/clients/" + m.client.ID + "/webhooks"

	var answers []string // every answer after the creation, checked for the secret at the end
	call := func(method, path string, body any, wantStatus int) map[string]any {
		t.Helper()
		st, raw := e.raw(method, path, "Bearer "+key, nil, body)
		answers = append(answers, raw)
		if st != wantStatus {
			t.Fatalf("%s %s: %d %s, want %d", method, path, st, raw, wantStatus)
		}
		return decode(t, raw)
	}

	refusals := []struct {
		name   string
		path   string
		body   any
		status int
		code   string
		says   string
	}{
		{"http outside dev mode", base, map[string]any{"url": "http://hooks.example.com/x"}, 400, "invalid_request", "https"},
		{"user info", base, map[string]any{"url": "https://u:p@hooks.example.com/x"}, 400, "invalid_request", "user info"},
		{"javascript URL", base, map[string]any{"url": "javascript:alert(1)"}, 400, "invalid_request", "scheme"},
		{"no URL", base, map[string]any{"events": []string{}}, 400, "invalid_request", "url"},
		{"unknown event type", base, map[string]any{"url": rc.srv.URL, "events": []string{"connection.exploded"}}, 400, "invalid_request", "connection.exploded"},
		{"unknown member", base, map[string]any{"url": rc.srv.URL, "secret": "whsec_mine"}, 400, "invalid_request", "secret"},
		{"unknown client", "/admin/api/clients/cli_nope/webhooks", map[string]any{"url": rc.srv.URL}, 404, "not_found", "MCP server"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			st, raw := e.raw(http.MethodPost, tt.path, "Bearer "+key, nil, tt.body)
			out := decode(t, raw)
			if st != tt.status || out["error"] != tt.code || !strings.Contains(out["error_description"].(string), tt.says) {
				t.Fatalf("%d %s, want %d %s saying %q", st, raw, tt.status, tt.code, tt.says)
			}
		})
	}
	if n := e.count(`SELECT count(*) FROM webhook_endpoints`); n != 0 {
		t.Fatalf("refused requests left %d endpoints", n)
	}

	// Created: the secret is in this answer only.
	st, raw := e.raw(http.MethodPost, base, "Bearer "+key, nil,
		map[string]any{"url": rc.srv.URL + "/hooks", "events": []string{webhook.ConnectionRevoked}})
	created := decode(t, raw)
	secret, _ := created["secret"].(string)
	if st != http.StatusCreated || !secretPattern.MatchString(secret) {
		t.Fatalf("create: %d %s", st, raw)
	}
	ep := created["endpoint"].(map[string]any)
	epID := ep["id"].(string)
	if ep["client_id"] != m.client.ID || ep["url"] != rc.srv.URL+"/hooks" {
		t.Fatalf("created endpoint: %v", ep)
	}
	if st, raw := e.raw(http.MethodPost, base, "Bearer "+key, nil, map[string]any{"url": rc.srv.URL + "/hooks"}); st != http.StatusConflict ||
		decode(t, raw)["error"] != "conflict" {
		t.Fatalf("the same URL again: %d %s", st, raw)
	}
	// A second endpoint, for every event.
	st, raw = e.raw(http.MethodPost, base, "Bearer "+key, nil, map[string]any{"url": rc.srv.URL + "/all"})
	all := decode(t, raw)
	if st != http.StatusCreated {
		t.Fatalf("create for every event: %d %s", st, raw)
	}
	allID := all["endpoint"].(map[string]any)["id"].(string)

	list := call(http.MethodGet, base, nil, http.StatusOK)["endpoints"].([]any)
	byID := map[string]map[string]any{}
	for _, x := range list {
		byID[x.(map[string]any)["id"].(string)] = x.(map[string]any)
	}
	if len(list) != 2 || byID[epID] == nil || byID[allID] == nil {
		t.Fatalf("list: %v", list)
	}
	if evs := byID[allID]["events"].([]any); len(evs) != 0 {
		t.Fatalf("every-event endpoint lists events %v", evs)
	}
	if evs := byID[epID]["events"].([]any); len(evs) != 1 || evs[0] != webhook.ConnectionRevoked {
		t.Fatalf("filtered endpoint lists events %v", evs)
	}

	// Connecting alice reaches the every-event endpoint only; revoking her
	// connection reaches both (files held consent).
	connID := e.connectFully(m, "alice", "files.read")
	allWH, err := standardwebhooks.NewWebhook(all["secret"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if first := rc.waitPath(t, "/all", 1)[0]; allWH.Verify(first.body, first.header) != nil {
		t.Fatalf("a delivery to the every-event endpoint does not verify with its secret: %s", first.body)
	}
	call(http.MethodPost, "/admin/api/connections/"+connID+"/revoke", map[string]any{"confirm": connID}, http.StatusOK)
	got := rc.waitPath(t, "/hooks", 1)
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(got[0].body, got[0].header); err != nil {
		t.Fatalf("the delivery does not verify with the secret: %v", err)
	}
	if !strings.Contains(string(got[0].body), `"type":"connection.revoked"`) || !strings.Contains(string(got[0].body), connID) {
		t.Fatalf("delivery body: %s", got[0].body)
	}
	msgID := got[0].header.Get("webhook-id")

	deliveries := "/admin/api/webhooks/" + epID + "/deliveries"
	var d map[string]any
	eventually(t, "the delivery recorded as delivered", func() bool {
		ds := call(http.MethodGet, deliveries+"?limit=10", nil, http.StatusOK)["deliveries"].([]any)
		if len(ds) != 1 {
			return false
		}
		d = ds[0].(map[string]any)
		return d["status"] == "delivered"
	})
	if d["id"] != msgID || d["type"] != webhook.ConnectionRevoked || d["attempts"] != float64(1) {
		t.Fatalf("delivery: %v", d)
	}
	one := call(http.MethodGet, "/admin/api/deliveries/"+msgID, nil, http.StatusOK)
	log := one["attempt_log"].([]any)
	if len(log) != 1 || log[0].(map[string]any)["status_code"] != float64(http.StatusNoContent) || one["payload"] == "" {
		t.Fatalf("delivery detail: %v", one)
	}

	// Redelivered: a new attempt, the same webhook-id.
	red := call(http.MethodPost, "/admin/api/deliveries/"+msgID+"/redeliver", nil, http.StatusAccepted)
	if red["id"] != msgID || red["status"] != "pending" {
		t.Fatalf("redeliver: %v", red)
	}
	got = rc.waitPath(t, "/hooks", 2)
	if got[1].header.Get("webhook-id") != msgID || wh.Verify(got[1].body, got[1].header) != nil {
		t.Fatalf("redelivery: %v", got[1].header)
	}
	eventually(t, "the second attempt recorded", func() bool {
		one = call(http.MethodGet, "/admin/api/deliveries/"+msgID, nil, http.StatusOK)
		return len(one["attempt_log"].([]any)) == 2 && one["status"] == "delivered"
	})

	// Mistakes and unknown ids: 4xx, never 500.
	for _, tt := range []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodGet, deliveries + "?limit=0", 400, "invalid_request"},
		{http.MethodGet, deliveries + "?limit=x", 400, "invalid_request"},
		{http.MethodGet, deliveries + "?limit=501", 400, "invalid_request"},
		{http.MethodGet, "/admin/api/webhooks/we_nope/deliveries", 404, "not_found"},
		{http.MethodGet, "/admin/api/deliveries/msg_nope", 404, "not_found"},
		{http.MethodPost, "/admin/api/deliveries/msg_nope/redeliver", 404, "not_found"},
		{http.MethodDelete, "/admin/api/webhooks/we_nope", 404, "not_found"},
		{http.MethodGet, "/admin/api/clients/cli_nope/webhooks", 404, "not_found"},
	} {
		st, raw := e.raw(tt.method, tt.path, "Bearer "+key, nil, nil)
		if st != tt.status || decode(t, raw)["error"] != tt.code {
			t.Errorf("%s %s: %d %s, want %d %s", tt.method, tt.path, st, raw, tt.status, tt.code)
		}
	}

	// Deleted: gone with their deliveries.
	call(http.MethodDelete, "/admin/api/webhooks/"+allID, nil, http.StatusOK)
	call(http.MethodDelete, "/admin/api/webhooks/"+epID, nil, http.StatusOK)
	if st, _ := e.raw(http.MethodGet, deliveries, "Bearer "+key, nil, nil); st != http.StatusNotFound {
		t.Fatalf("deliveries of a deleted endpoint: %d", st)
	}
	if l := call(http.MethodGet, base, nil, http.StatusOK)["endpoints"].([]any); len(l) != 0 {
		t.Fatalf("list after delete: %v", l)
	}

	// Audited, by the key, without the secret.
	for kind, n := range map[string]int{"webhook.created": 2, "webhook.deleted": 2, "webhook.redelivered": 1} {
		if got := e.count(`SELECT count(*) FROM audit_events WHERE kind = $1 AND actor = $2`, kind, "admin_key:"+k.ID); got != n {
			t.Errorf("%s by the key: %d events, want %d", kind, got, n)
		}
	}
	noSecret(t, e, []string{secret, all["secret"].(string)}, answers)
}

// noSecret checks that no answer after the creations, no audit event and no
// log line holds a secret.
func noSecret(t *testing.T, e *env, secrets, answers []string) {
	t.Helper()
	var audit string
	if err := e.pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(detail::text || target || kind, ' '), '') FROM audit_events`).
		Scan(&audit); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if s == "" {
			t.Fatal("no secret to look for")
		}
		body := strings.TrimPrefix(s, "whsec_")
		for _, a := range answers {
			if strings.Contains(a, body) {
				t.Fatalf("an answer after the creation holds the secret: %s", a)
			}
		}
		if strings.Contains(audit, body) || strings.Contains(e.logs.String(), body) {
			t.Fatal("the secret reached the audit trail or the logs")
		}
	}
}

// TestWebhookPages drives the same through the admin pages: an MCP server's
// page with its endpoints and the add form, the secret shown once, the
// deliveries and attempts of an endpoint, Redeliver and Delete — each form
// refused without the admin session's CSRF token.
func TestWebhookPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.runJobs()
	m := e.newMCPServer("files", "fake")
	rc := newReceiver(t)
	_, key := e.newAdminKey("ops")
	b := e.adminBrowser()
	clientURL := e.srv.URL + "/admin/clients/" + m.client.ID

	if r := b.get(e.srv.URL + "/admin/clients"); r.status != http.StatusOK || !strings.Contains(r.body, `href="/admin/clients/`+m.client.ID+`"`) {
		t.Fatalf("clients page does not link the MCP server's page: %d %s", r.status, r.body)
	}
	page := b.get(clientURL)
	if page.status != http.StatusOK || !strings.Contains(page.body, "No endpoint") || !strings.Contains(page.body, "Add endpoint") {
		t.Fatalf("client page: %d %s", page.status, page.body)
	}
	for _, typ := range webhook.Types {
		if !strings.Contains(page.body, `name="events" value="`+typ+`"`) {
			t.Fatalf("the add form has no checkbox for %s", typ)
		}
	}
	csrf := csrfOf(t, page.body)
	add := clientURL + "/webhooks"
	good := url.Values{"csrf_token": {csrf}, "url": {rc.srv.URL + "/hooks"}, "events": {webhook.ConnectionRevoked}}
	with := func(k, v string) url.Values {
		f := url.Values{}
		for kk, vv := range good {
			f[kk] = vv
		}
		f.Set(k, v)
		return f
	}
	refusals := []struct {
		name   string
		b      *browser
		form   url.Values
		status int
		code   string
	}{
		{"no CSRF token", b, with("csrf_token", ""), http.StatusForbidden, "csrf_failed"},
		{"forged CSRF token", b, with("csrf_token", "AAAA"), http.StatusForbidden, "csrf_failed"},
		{"no admin session", e.browser(), good, http.StatusForbidden, "admin_required"},
		{"http URL", b, with("url", "http://hooks.example.com/"), http.StatusBadRequest, "invalid_request"},
		{"user info", b, with("url", "https://a:b@hooks.example.com/"), http.StatusBadRequest, "invalid_request"},
		{"javascript URL", b, with("url", "javascript:alert(1)"), http.StatusBadRequest, "invalid_request"},
		{"unknown event", b, with("events", "nope.nope"), http.StatusBadRequest, "invalid_request"},
	}
	for _, tt := range refusals {
		r := tt.b.do(http.MethodPost, add, tt.form)
		if r.status != tt.status || e.code(r) != tt.code {
			t.Fatalf("%s: %d %q, want %d %q", tt.name, r.status, e.code(r), tt.status, tt.code)
		}
	}
	if n := e.count(`SELECT count(*) FROM webhook_endpoints`); n != 0 {
		t.Fatalf("refused forms left %d endpoints", n)
	}
	if r := b.do(http.MethodPost, e.srv.URL+"/admin/clients/cli_nope/webhooks", good); r.status != http.StatusNotFound {
		t.Fatalf("add to an unknown client: %d", r.status)
	}

	done := b.do(http.MethodPost, add, good)
	secret := secretPattern.FindString(done.body)
	if done.status != http.StatusOK || secret == "" || !strings.Contains(done.body, "shown only this once") {
		t.Fatalf("add: %d %s", done.status, done.body)
	}
	if again := b.do(http.MethodPost, add, good); again.status != http.StatusConflict || e.code(again) != "conflict" {
		t.Fatalf("the same URL again: %d %q", again.status, e.code(again))
	}
	var pages []string
	get := func(u string) response {
		t.Helper()
		r := b.get(u)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", u, r.status, r.body)
		}
		pages = append(pages, r.body)
		return r
	}
	page = get(clientURL)
	m2 := regexp.MustCompile(`href="/admin/webhooks/(we_[a-z0-9]+)"`).FindStringSubmatch(page.body)
	if m2 == nil || !strings.Contains(page.body, rc.srv.URL+"/hooks") || !strings.Contains(page.body, webhook.ConnectionRevoked) {
		t.Fatalf("client page after add: %s", page.body)
	}
	epID := m2[1]

	connID := e.connectFully(m, "alice", "files.read")
	if st, out := e.adminAPI(key, http.MethodPost, "/admin/api/connections/"+connID+"/revoke", map[string]any{"confirm": connID}); st != http.StatusOK {
		t.Fatalf("revoke: %d %v", st, out)
	}
	msgID := rc.wait(t, 1)[0].header.Get("webhook-id")
	epURL := e.srv.URL + "/admin/webhooks/" + epID
	eventually(t, "the delivery shown as delivered", func() bool {
		r := b.get(epURL)
		return strings.Contains(r.body, `href="/admin/deliveries/`+msgID+`"`) && strings.Contains(r.body, "status-delivered")
	})
	get(epURL)
	dURL := e.srv.URL + "/admin/deliveries/" + msgID
	dp := get(dURL)
	for _, want := range []string{"connection.revoked", connID, "204", "Redeliver", rc.srv.URL + "/hooks"} {
		if !strings.Contains(dp.body, want) {
			t.Fatalf("delivery page lacks %q: %s", want, dp.body)
		}
	}

	// Redeliver: refused without the token, then a new attempt.
	if r := b.do(http.MethodPost, dURL+"/redeliver", url.Values{}); r.status != http.StatusForbidden || e.code(r) != "csrf_failed" {
		t.Fatalf("redeliver without CSRF: %d %q", r.status, e.code(r))
	}
	if r := e.browser().do(http.MethodPost, dURL+"/redeliver", url.Values{"csrf_token": {csrf}}); r.status != http.StatusForbidden {
		t.Fatalf("redeliver without an admin session: %d", r.status)
	}
	if r := b.do(http.MethodPost, dURL+"/redeliver", url.Values{"csrf_token": {csrfOf(t, dp.body)}}); r.status != http.StatusSeeOther ||
		!strings.HasSuffix(r.location, "/admin/deliveries/"+msgID) {
		t.Fatalf("redeliver: %d %q", r.status, r.location)
	}
	if got := rc.wait(t, 2); got[1].header.Get("webhook-id") != msgID {
		t.Fatalf("redelivery: %v", got[1].header)
	}
	eventually(t, "two attempts on the delivery page", func() bool {
		return strings.Count(b.get(dURL).body, " ms</td>") == 2
	})
	get(dURL)

	// Delete: refused without the token, then gone.
	del := epURL + "/delete"
	if r := b.do(http.MethodPost, del, url.Values{}); r.status != http.StatusForbidden || e.code(r) != "csrf_failed" {
		t.Fatalf("delete without CSRF: %d %q", r.status, e.code(r))
	}
	if n := e.count(`SELECT count(*) FROM webhook_endpoints`); n != 1 {
		t.Fatal("a refused delete deleted")
	}
	// The client page links to a confirmation step (issue 27: destructive
	// actions confirm); a post without its confirmation deletes nothing.
	if page := get(clientURL); !strings.Contains(page.body, `href="`+strings.TrimPrefix(del, e.srv.URL)+`"`) {
		t.Fatalf("the client page does not lead to the confirmation: %s", page.body)
	}
	confirm := get(del)
	if !strings.Contains(confirm.body, "Delete this webhook endpoint?") || !strings.Contains(confirm.body, `name="confirm" value="`+epID+`"`) {
		t.Fatalf("confirmation page: %s", confirm.body)
	}
	if r := b.do(http.MethodPost, del, url.Values{"csrf_token": {csrf}}); r.status != http.StatusBadRequest ||
		e.code(r) != "confirmation_required" {
		t.Fatalf("delete without the confirmation: %d %q", r.status, e.code(r))
	}
	if n := e.count(`SELECT count(*) FROM webhook_endpoints`); n != 1 {
		t.Fatal("an unconfirmed delete deleted")
	}
	if r := b.do(http.MethodPost, del, url.Values{"csrf_token": {csrfOf(t, confirm.body)}, "confirm": {epID}}); r.status != http.StatusSeeOther ||
		!strings.HasSuffix(r.location, "/admin/clients/"+m.client.ID) {
		t.Fatalf("delete: %d %q", r.status, r.location)
	}
	if page = get(clientURL); strings.Contains(page.body, epID) || !strings.Contains(page.body, "No endpoint") {
		t.Fatalf("client page after delete: %s", page.body)
	}
	for _, u := range []string{epURL, dURL} {
		if r := b.get(u); r.status != http.StatusNotFound {
			t.Fatalf("GET %s after delete: %d", u, r.status)
		}
	}
	for kind, n := range map[string]int{"webhook.created": 1, "webhook.deleted": 1, "webhook.redelivered": 1} {
		if got := e.count(`SELECT count(*) FROM audit_events WHERE kind = $1 AND actor = 'admin:alice'`, kind); got != n {
			t.Errorf("%s by admin:alice: %d events, want %d", kind, got, n)
		}
	}
	noSecret(t, e, []string{secret}, pages)
}
