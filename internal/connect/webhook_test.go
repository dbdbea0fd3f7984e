package connect_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/vault"
)

// received is one verified webhook request.
type received struct {
	id   string         // webhook-id
	Type string         `json:"type"`
	Data map[string]any `json:"data"`
	raw  string
}

// receiver is an MCP server's webhook endpoint over TLS. It verifies every
// request with the Standard Webhooks reference library and the secret
// connectd showed at registration, and records the events; a request that
// does not verify is counted and refused.
type receiver struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	got     []received // not yet taken by wait
	all     []string   // every verified body
	refused int
}

func (e *env) newReceiver(m *mcpServer, events ...string) *receiver {
	e.t.Helper()
	rc := &receiver{t: e.t}
	var wh *standardwebhooks.Webhook
	rc.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if err := wh.Verify(body, r.Header); err != nil {
			rc.refused++
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var ev received
		if err := json.Unmarshal(body, &ev); err != nil {
			rc.refused++
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		ev.id, ev.raw = r.Header.Get("webhook-id"), string(body)
		rc.got = append(rc.got, ev)
		rc.all = append(rc.all, ev.raw)
		w.WriteHeader(http.StatusNoContent)
	}))
	e.t.Cleanup(rc.srv.Close)
	_, secret, err := e.server.Webhooks().Create(context.Background(), m.client.ID, rc.srv.URL+"/hooks", events)
	if err != nil {
		e.t.Fatal(err)
	}
	if wh, err = standardwebhooks.NewWebhook(secret); err != nil {
		e.t.Fatal(err)
	}
	return rc
}

// wait returns the first event of typ once it arrived (20 s at most).
func (rc *receiver) wait(typ string) received {
	rc.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rc.mu.Lock()
		i := slices.IndexFunc(rc.got, func(r received) bool { return r.Type == typ })
		var ev received
		if i >= 0 {
			ev = rc.got[i]
			rc.got = slices.Delete(rc.got, i, i+1)
		}
		rc.mu.Unlock()
		if i >= 0 {
			return ev
		}
		if time.Now().After(deadline) {
			rc.mu.Lock()
			defer rc.mu.Unlock()
			rc.t.Fatalf("no %s event; got %+v", typ, rc.got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// none checks that nothing else arrived (after a moment for stragglers).
func (rc *receiver) none() {
	rc.t.Helper()
	time.Sleep(300 * time.Millisecond)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.got) != 0 || rc.refused != 0 {
		rc.t.Fatalf("unexpected events %+v (%d refused)", rc.got, rc.refused)
	}
}

func dataString(ev received, path ...string) string {
	var v any = ev.Data
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

// TestWebhookEvents drives every event kind through the real flow and checks
// what each MCP server's endpoint receives: signed (verified with the
// Standard Webhooks library), only the events about its own users'
// connections and requests, with ids and names and never a credential.
func TestWebhookEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.run(e.server) // River delivers
	a := e.newMCPServer("alpha", "fake")
	b := e.newMCPServer("beta", "fake")
	ra, rb := e.newReceiver(a), e.newReceiver(b)
	ctx := context.Background()

	// alpha connects alice: its request completed, her connection created.
	el := e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	done := ra.wait("elicitation.completed")
	if dataString(done, "elicitation_id") != el["elicitation_id"] || dataString(done, "client_id") != a.client.ID ||
		dataString(done, "user", "subject") != "alice" || dataString(done, "provider") != "fake" || done.id == "" {
		t.Fatalf("elicitation.completed: %s", done.raw)
	}
	created := ra.wait("connection.created")
	connID := dataString(created, "connection_id")
	if !strings.HasPrefix(connID, "cn_") || dataString(created, "status") != "active" {
		t.Fatalf("connection.created: %s", created.raw)
	}
	rb.none() // beta has no approval: it hears nothing of alice's connection

	// beta is approved on the consent page alone: its request completed.
	u := b.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})["url"].(string)
	br := e.browser()
	if r := e.allow(br, u, e.openAs(br, u, "alice")); r.status != http.StatusOK {
		t.Fatalf("consent-only: %d", r.status)
	}
	rb.wait("elicitation.completed")

	// alpha steps up: both approved clients hear the scopes changed.
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"write"}})
	ra.wait("elicitation.completed")
	for _, rc := range []*receiver{ra, rb} {
		ch := rc.wait("connection.scopes_changed")
		if dataString(ch, "connection_id") != connID || !strings.Contains(ch.raw, `"old_scopes":["read"]`) {
			t.Fatalf("connection.scopes_changed: %s", ch.raw)
		}
	}

	// A request declined at connectd, and one left to expire.
	u = a.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"admin"}})["url"].(string)
	br = e.browser()
	page := e.openAs(br, u, "alice")
	if r := br.do(http.MethodPost, u, url.Values{"csrf_token": {csrfOf(t, page.body)}, "decision": {"deny"}}); r.status != http.StatusOK {
		t.Fatalf("deny: %d", r.status)
	}
	if d := ra.wait("elicitation.declined"); dataString(d, "reason") != "user_denied" {
		t.Fatalf("elicitation.declined: %s", d.raw)
	}
	// One whose code the provider refuses (a code it never issued).
	u = a.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"admin"}})["url"].(string)
	br = e.browser()
	cb, _ := url.Parse(e.authorize(e.allow(br, u, e.openAs(br, u, "alice"))))
	q := cb.Query()
	q.Set("code", "not-a-code-the-provider-issued")
	cb.RawQuery = q.Encode()
	e.refused(br.get(cb.String()), http.StatusBadGateway, "exchange_failed")
	if f := ra.wait("elicitation.failed"); dataString(f, "reason") != "exchange_failed" {
		t.Fatalf("elicitation.failed: %s", f.raw)
	}
	a.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"admin"}})
	e.clock.Advance(time.Hour)
	if err := e.server.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	ra.wait("elicitation.expired")

	// The provider stops honouring the grant: the next token read refreshes,
	// is refused, and every approved client hears it once.
	alice := identity.User{Issuer: e.idps[0].Issuer(), Subject: "alice"}
	_, cred, err := e.vault.Get(ctx, alice, "fake", "")
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{cred.AccessToken, cred.RefreshToken}
	if err := server.RevokeFunc(e.server.Orgs().ByID)(ctx, vault.App{Provider: "fake"}, cred); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(3 * time.Hour)
	st, out := a.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	expectError(t, st, out, http.StatusConflict, "reauthorization_required")
	a.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil) // again: no second event
	for _, rc := range []*receiver{ra, rb} {
		if ev := rc.wait("connection.reauthorization_required"); dataString(ev, "reason") != "invalid_grant" {
			t.Fatalf("connection.reauthorization_required: %s", ev.raw)
		}
	}

	// alice takes beta's access back on her account page.
	ab := e.browser()
	page = e.accountPage(ab, "alice")
	if r := e.accountPost(ab, page, "/account/withdraw", url.Values{"confirm": {"yes"}, "provider": {"fake"}, "client": {b.client.ID}}); r.status != http.StatusSeeOther {
		t.Fatalf("withdraw: %d", r.status)
	}
	if w := rb.wait("approval.withdrawn"); dataString(w, "by") != "user" || dataString(w, "provider") != "fake" {
		t.Fatalf("approval.withdrawn: %s", w.raw)
	}

	// alpha unlinks: revoked, by the client; beta no longer hears of it.
	if st, out := a.call(http.MethodDelete, "/v1/connections/fake", "alice", nil); st != http.StatusOK {
		t.Fatalf("unlink: %d %v", st, out)
	}
	if r := ra.wait("connection.revoked"); dataString(r, "by") != "client" || dataString(r, "connection_id") != connID {
		t.Fatalf("connection.revoked: %s", r.raw)
	}
	ra.none()
	rb.none()

	// Nothing any endpoint received carries a credential.
	for _, rc := range []*receiver{ra, rb} {
		rc.mu.Lock()
		for _, raw := range rc.all {
			for _, s := range secrets {
				if s != "" && strings.Contains(raw, s) {
					t.Fatalf("a webhook carried a credential: %s", raw)
				}
			}
		}
		rc.mu.Unlock()
	}
}
