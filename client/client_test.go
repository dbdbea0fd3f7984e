package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connectd/connectd/client"
)

const (
	testKey   = "cks_test-key-0123456789"
	testToken = "eyJ.user-token.sig"
)

// fake is a stand-in connectd: it checks the credentials of every call,
// records it, and answers from a per-route function.
type fake struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	calls  []call
	routes map[string]func(w http.ResponseWriter, r *http.Request, body []byte)
}

type call struct {
	method, path, query string
	body                []byte
}

func newFake(t *testing.T) (*fake, *client.Client) {
	t.Helper()
	f := &fake{t: t, routes: map[string]func(http.ResponseWriter, *http.Request, []byte){}}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Authorization") != "Bearer "+testKey || r.Header.Get(client.UserTokenHeader) != testToken {
			t.Errorf("%s %s: credentials missing", r.Method, r.URL.Path)
		}
		if len(body) > 0 && r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: body without JSON content type", r.Method, r.URL.Path)
		}
		f.mu.Lock()
		f.calls = append(f.calls, call{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, body})
		h := f.routes[r.Method+" "+r.URL.Path]
		f.mu.Unlock()
		if h == nil {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": "not_found", "error_description": "no such API endpoint"})
			return
		}
		h(w, r, body)
	}))
	t.Cleanup(f.srv.Close)
	c, err := client.New(client.Config{BaseURL: f.srv.URL, Key: testKey, HTTPClient: f.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

func (f *fake) handle(route string, h func(w http.ResponseWriter, r *http.Request, body []byte)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[route] = h
}

func (f *fake) answer(route string, status int, v any) {
	f.handle(route, func(w http.ResponseWriter, _ *http.Request, _ []byte) { writeJSON(w, status, v) })
}

func (f *fake) last() call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[len(f.calls)-1]
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// minted is a mint answer as connectd writes it (docs/api.md).
func minted(base string) map[string]any {
	u := base + "/c/EID"
	el := map[string]any{"mode": "url", "elicitationId": "EID", "url": u, "message": "Connect it."}
	return map[string]any{
		"elicitation_id": "EID", "status": "pending", "provider": "github", "scopes": []string{"repo"},
		"expires_at": "2026-11-30T12:10:00Z", "url": u, "request_state": "rs1.STATE",
		"elicitation": el,
		"url_elicitation_required_error": map[string]any{"code": -32042, "message": "This request requires more information.",
			"data": map[string]any{"elicitations": []any{el}}},
		"input_request": map[string]any{"method": "elicitation/create",
			"params": map[string]any{"mode": "url", "message": "Connect it.", "url": u}},
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name string
		cfg  client.Config
		ok   bool
	}{
		{"https", client.Config{BaseURL: "https://connect.example.com", Key: testKey}, true},
		{"https with prefix and slash", client.Config{BaseURL: "https://example.com/connectd/", Key: testKey}, true},
		{"http loopback", client.Config{BaseURL: "http://127.0.0.1:8080", Key: testKey}, true},
		{"http localhost", client.Config{BaseURL: "http://localhost:8080", Key: testKey}, true},
		{"http remote", client.Config{BaseURL: "http://connect.example.com", Key: testKey}, false},
		{"http remote allowed", client.Config{BaseURL: "http://connectd:8080", Key: testKey, AllowHTTP: true}, true},
		{"other scheme", client.Config{BaseURL: "ftp://connect.example.com", Key: testKey}, false},
		{"relative", client.Config{BaseURL: "/connect", Key: testKey}, false},
		{"user info", client.Config{BaseURL: "https://u:p@connect.example.com", Key: testKey}, false},
		{"query", client.Config{BaseURL: "https://connect.example.com?x=1", Key: testKey}, false},
		{"no key", client.Config{BaseURL: "https://connect.example.com"}, false},
		{"key with newline", client.Config{BaseURL: "https://connect.example.com", Key: "cks_a\r\nX-Evil: 1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.New(tt.cfg)
			if (err == nil) != tt.ok {
				t.Fatalf("New: %v, want ok=%v", err, tt.ok)
			}
			if err != nil && tt.cfg.Key != "" && strings.Contains(err.Error(), tt.cfg.Key) {
				t.Fatal("the error repeats the key")
			}
		})
	}
}

func TestEndpoints(t *testing.T) {
	f, c := newFake(t)
	ctx := context.Background()

	f.answer("POST /v1/elicitations", http.StatusCreated, minted(f.srv.URL))
	e, err := c.Mint(ctx, testToken, client.MintRequest{Provider: "github", Scopes: []string{"repo"}, Message: "Connect it.",
		RequestDigest: "d1"})
	if err != nil {
		t.Fatal(err)
	}
	var sent map[string]any
	json.Unmarshal(f.last().body, &sent)
	if sent["provider"] != "github" || sent["message"] != "Connect it." || sent["request_digest"] != "d1" || len(sent) != 4 {
		t.Fatalf("mint body: %s", f.last().body)
	}
	if e.ID != "EID" || e.Status != client.StatusPending || e.URL != f.srv.URL+"/c/EID" || e.RequestState != "rs1.STATE" ||
		e.Params.ElicitationID != "EID" || e.URLElicitationRequiredError.Code != -32042 ||
		e.URLElicitationRequiredError.Data.Elicitations[0].URL != e.URL || e.InputRequest.Method != "elicitation/create" ||
		e.InputRequest.Params.ElicitationID != "" || e.ExpiresAt.IsZero() {
		t.Fatalf("mint answer: %+v", e)
	}

	f.answer("GET /v1/elicitations/EID", http.StatusOK, map[string]any{"elicitation_id": "EID", "status": "completed",
		"provider": "github", "completed_at": "2026-11-30T12:01:00Z"})
	for _, tc := range []struct {
		wait  time.Duration
		query string
	}{{0, ""}, {30 * time.Second, "wait=30s"}, {1500 * time.Millisecond, "wait=2s"}, {5 * time.Minute, "wait=60s"}} {
		st, err := c.Status(ctx, testToken, "EID", tc.wait)
		if err != nil || st.Status != client.StatusCompleted || st.CompletedAt == nil || !st.Status.Final() {
			t.Fatalf("status: %+v %v", st, err)
		}
		if q := f.last().query; q != tc.query {
			t.Fatalf("wait %s sent query %q, want %q", tc.wait, q, tc.query)
		}
	}

	f.answer("POST /v1/elicitations/resolve", http.StatusOK, map[string]any{"elicitation_id": "EID", "status": "pending",
		"request_state": "rs1.FRESH"})
	st, err := c.Resolve(ctx, testToken, "rs1.STATE", "d1")
	if err != nil || st.RequestState != "rs1.FRESH" {
		t.Fatalf("resolve: %+v %v", st, err)
	}
	if b := string(f.last().body); b != `{"request_state":"rs1.STATE","request_digest":"d1"}` {
		t.Fatalf("resolve body: %s", b)
	}

	f.answer("GET /v1/connections", http.StatusOK, map[string]any{"connections": []any{
		map[string]any{"provider": "github", "status": "active", "scopes": []string{"repo"}, "account_label": "octocat"}}})
	conns, err := c.Connections(ctx, testToken)
	if err != nil || len(conns) != 1 || conns[0].AccountLabel != "octocat" {
		t.Fatalf("connections: %+v %v", conns, err)
	}

	f.answer("GET /v1/connections/github/token", http.StatusOK, map[string]any{"provider": "github", "kind": "oauth2",
		"token_type": "Bearer", "access_token": "gho_SECRET", "scopes": []string{"repo", "read:org"}})
	tok, err := c.Token(ctx, testToken, "github", "repo", "read:org")
	if err != nil || tok.AccessToken != "gho_SECRET" || tok.Kind != "oauth2" {
		t.Fatalf("token: %v %v", tok, err)
	}
	if q := f.last().query; q != "scopes=repo%2Cread%3Aorg" {
		t.Fatalf("token query %q", q)
	}

	f.answer("DELETE /v1/connections/github", http.StatusOK, map[string]any{"provider": "github",
		"revoked_at_provider": true, "revocation": "revoked"})
	un, err := c.Unlink(ctx, testToken, "github")
	if err != nil || !un.RevokedAtProvider || un.Revocation != "revoked" {
		t.Fatalf("unlink: %+v %v", un, err)
	}

	// Path parameters are escaped, never spliced into the path.
	c.Token(ctx, testToken, "../../admin")
	if p := f.last().path; p != "/v1/connections/..%2F..%2Fadmin/token" {
		t.Fatalf("path %q", p)
	}
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	f, c := newFake(t)
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("followed a redirect; X-User-Token %q", r.Header.Get(client.UserTokenHeader))
	}))
	defer elsewhere.Close()
	f.handle("GET /v1/connections", func(w http.ResponseWriter, r *http.Request, _ []byte) {
		http.Redirect(w, r, elsewhere.URL+"/steal", http.StatusFound)
	})
	_, err := c.Connections(context.Background(), testToken)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusFound {
		t.Fatalf("redirect: %v", err)
	}
}

func TestNoUserTokenNoCall(t *testing.T) {
	f, c := newFake(t)
	if _, err := c.Token(context.Background(), "", "github"); !errors.Is(err, client.ErrUserToken) {
		t.Fatalf("no user token: %v", err)
	}
	if len(f.calls) != 0 {
		t.Fatal("a call went out without a user token")
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		status   int
		code     string
		body     string
		header   http.Header
		want     []error
		notWant  []error
		needs    bool
		missing  []string
		retryAft time.Duration
	}{
		{status: 404, code: "not_connected", want: []error{client.ErrNotConnected}, needs: true},
		{status: 403, code: "consent_required", want: []error{client.ErrConsentRequired}, needs: true},
		{status: 403, code: "insufficient_scope", want: []error{client.ErrInsufficientScope}, needs: true,
			body:    `{"error":"insufficient_scope","error_description":"lacks scopes","missing_scopes":["write","admin"]}`,
			missing: []string{"write", "admin"}},
		{status: 409, code: "reauthorization_required", want: []error{client.ErrReauthorizationRequired}, needs: true},
		{status: 409, code: "account_required", want: []error{client.ErrAccountRequired},
			notWant: []error{client.ErrReauthorizationRequired, client.ErrNotConnected}},
		{status: 404, code: "not_found", want: []error{client.ErrNotFound}, notWant: []error{client.ErrNotConnected}},
		{status: 401, code: "invalid_client", want: []error{client.ErrInvalidClient}, notWant: []error{client.ErrUserToken}},
		{status: 401, code: "wrong_audience", want: []error{client.ErrUserToken}},
		{status: 401, code: "token_expired", want: []error{client.ErrUserToken}},
		{status: 401, code: "missing_user_token", want: []error{client.ErrUserToken}},
		{status: 400, code: "unknown_provider", want: []error{client.ErrUnknownProvider}},
		{status: 403, code: "provider_not_allowed", want: []error{client.ErrProviderNotAllowed}},
		{status: 400, code: "invalid_scope", want: []error{client.ErrInvalidRequest}},
		{status: 400, code: "request_state_invalid", want: []error{client.ErrRequestState, client.ErrRequestStateInvalid}},
		{status: 400, code: "request_state_expired", want: []error{client.ErrRequestState, client.ErrRequestStateExpired}},
		{status: 409, code: "request_state_replayed", want: []error{client.ErrRequestState, client.ErrRequestStateReplayed},
			notWant: []error{client.ErrReauthorizationRequired}},
		{status: 403, code: "request_state_wrong_user", want: []error{client.ErrRequestState, client.ErrRequestStateWrongUser}},
		{status: 403, code: "request_state_wrong_client", want: []error{client.ErrRequestState, client.ErrRequestStateWrongClient}},
		{status: 400, code: "request_digest_mismatch", want: []error{client.ErrRequestState, client.ErrRequestDigestMismatch}},
		{status: 429, code: "rate_limited", want: []error{client.ErrRateLimited}, header: http.Header{"Retry-After": {"7"}},
			retryAft: 7 * time.Second},
		{status: 503, code: "provider_unavailable", want: []error{client.ErrUnavailable}, header: http.Header{"Retry-After": {"5"}},
			retryAft: 5 * time.Second},
		{status: 503, code: "jwks_unavailable", want: []error{client.ErrUnavailable}},
		{status: 503, code: "database_unavailable", want: []error{client.ErrUnavailable}},
		{status: 502, body: "<html>bad gateway</html>", want: []error{client.ErrUnavailable}, notWant: []error{client.ErrUserToken}},
		{status: 429, body: "slow down", want: []error{client.ErrRateLimited}},
		{status: 401, code: "some_future_token_code", want: []error{client.ErrUserToken}},
		{status: 418, code: "teapot", notWant: []error{client.ErrNotConnected, client.ErrUnavailable, client.ErrUserToken}},
	}
	for _, tt := range tests {
		name := tt.code
		if name == "" {
			name = fmt.Sprint(tt.status)
		}
		t.Run(name, func(t *testing.T) {
			f, c := newFake(t)
			f.handle("GET /v1/connections/github/token", func(w http.ResponseWriter, r *http.Request, _ []byte) {
				for k, v := range tt.header {
					w.Header()[k] = v
				}
				body := tt.body
				if body == "" {
					body = fmt.Sprintf(`{"error":%q,"error_description":"described","request_id":"rid-1"}`, tt.code)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, body)
			})
			_, err := c.Token(context.Background(), testToken, "github")
			var ae *client.APIError
			if !errors.As(err, &ae) || ae.Status != tt.status || ae.Code != tt.code {
				t.Fatalf("error %#v, want APIError %d %q", err, tt.status, tt.code)
			}
			for _, s := range tt.want {
				if !errors.Is(err, s) {
					t.Errorf("%v does not match %v", err, s)
				}
			}
			for _, s := range tt.notWant {
				if errors.Is(err, s) {
					t.Errorf("%v matches %v", err, s)
				}
			}
			if client.NeedsConnection(err) != tt.needs {
				t.Errorf("NeedsConnection = %v", !tt.needs)
			}
			if got := client.MissingScopes(err); fmt.Sprint(got) != fmt.Sprint(tt.missing) {
				t.Errorf("missing scopes %v, want %v", got, tt.missing)
			}
			if ae.RetryAfter != tt.retryAft {
				t.Errorf("Retry-After %s, want %s", ae.RetryAfter, tt.retryAft)
			}
			if tt.body == "" && (ae.Description != "described" || ae.RequestID != "rid-1") {
				t.Errorf("description/request id: %+v", ae)
			}
			if s := err.Error(); strings.Contains(s, testKey) || strings.Contains(s, testToken) {
				t.Fatalf("the error text carries a credential: %s", s)
			}
		})
	}
}

func TestWaitRidesOutOutagesUntilFinal(t *testing.T) {
	f, c := newFake(t)
	var mu sync.Mutex
	answers := []int{200, 503, 200, 200} // pending, outage, pending, completed
	n := 0
	f.handle("GET /v1/elicitations/EID", func(w http.ResponseWriter, r *http.Request, _ []byte) {
		mu.Lock()
		i := n
		n++
		mu.Unlock()
		if r.URL.Query().Get("wait") == "" {
			t.Error("Wait did not long-poll")
		}
		switch {
		case answers[min(i, len(answers)-1)] == 503:
			w.Header().Set("Retry-After", "0")
			writeJSON(w, 503, map[string]any{"error": "provider_unavailable"})
		case i >= len(answers)-1:
			writeJSON(w, 200, map[string]any{"elicitation_id": "EID", "status": "declined", "reason": "user_denied"})
		default:
			writeJSON(w, 200, map[string]any{"elicitation_id": "EID", "status": "pending"})
		}
	})
	st, err := c.Wait(context.Background(), testToken, "EID")
	if err != nil || st.Status != client.StatusDeclined || st.Reason != "user_denied" {
		t.Fatalf("wait: %+v %v", st, err)
	}
	if n != 4 {
		t.Fatalf("%d polls, want 4", n)
	}

	// A refusal ends the wait at once; so does the context.
	f.answer("GET /v1/elicitations/GONE", http.StatusNotFound, map[string]any{"error": "not_found"})
	if _, err := c.Wait(context.Background(), testToken, "GONE"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("wait on a refused id: %v", err)
	}
	f.handle("GET /v1/elicitations/SLOW", func(w http.ResponseWriter, r *http.Request, _ []byte) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		writeJSON(w, 200, map[string]any{"elicitation_id": "SLOW", "status": "pending"})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(ctx, testToken, "SLOW"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait past its context: %v", err)
	}
}

func TestResume(t *testing.T) {
	f, c := newFake(t)
	f.answer("POST /v1/elicitations/resolve", http.StatusOK, map[string]any{"elicitation_id": "EID", "status": "pending",
		"provider": "github", "request_state": "rs1.FRESH"})
	var done bool
	var mu sync.Mutex
	f.handle("GET /v1/elicitations/EID", func(w http.ResponseWriter, r *http.Request, _ []byte) {
		mu.Lock()
		d := done
		mu.Unlock()
		if d {
			writeJSON(w, 200, map[string]any{"elicitation_id": "EID", "status": "completed"})
			return
		}
		select { // a long-poll that nothing ends
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		writeJSON(w, 200, map[string]any{"elicitation_id": "EID", "status": "pending"})
	})
	ctx := context.Background()

	// Still pending after maxWait: the fresh request_state comes back.
	st, err := c.Resume(ctx, testToken, "rs1.STATE", "", 150*time.Millisecond)
	if err != nil || st.Status != client.StatusPending || st.RequestState != "rs1.FRESH" {
		t.Fatalf("resume, still pending: %+v %v", st, err)
	}
	again, err := c.Reissue(st, "Still waiting.", "")
	if err != nil || again.RequestState != "rs1.FRESH" || again.ResultType != client.ResultTypeInputRequired ||
		again.InputRequests["connect-github"].Params.URL != f.srv.URL+"/c/EID" ||
		again.InputRequests["connect-github"].Method != "elicitation/create" {
		t.Fatalf("reissue: %+v %v", again, err)
	}
	if _, err := c.Reissue(&client.ElicitationStatus{ID: "EID", Status: client.StatusCompleted}, "", ""); err == nil {
		t.Fatal("reissued a completed elicitation")
	}

	// Completed while waiting.
	mu.Lock()
	done = true
	mu.Unlock()
	st, err = c.Resume(ctx, testToken, "rs1.STATE", "", time.Second)
	if err != nil || st.Status != client.StatusCompleted {
		t.Fatalf("resume, completed: %+v %v", st, err)
	}

	// A refused request_state is the caller's to handle.
	f.answer("POST /v1/elicitations/resolve", http.StatusConflict, map[string]any{"error": "request_state_replayed"})
	if _, err := c.Resume(ctx, testToken, "rs1.STATE", "", time.Second); !errors.Is(err, client.ErrRequestStateReplayed) {
		t.Fatalf("replayed: %v", err)
	}
}

func TestAnswers(t *testing.T) {
	f, c := newFake(t)
	f.answer("POST /v1/elicitations", http.StatusCreated, minted(f.srv.URL))
	ctx := context.Background()
	req := client.MintRequest{Provider: "github"}

	// A client that cannot open a URL-mode elicitation: an older protocol,
	// or no "url" in its elicitation capability.
	noURL := []client.Peer{{ProtocolVersion: "2024-11-05", URLElicitation: true},
		{ProtocolVersion: "2025-06-18", URLElicitation: true}, {ProtocolVersion: "", URLElicitation: true},
		{ProtocolVersion: "latest", URLElicitation: true}, {ProtocolVersion: "2025-11-25"}, {ProtocolVersion: "2026-07-28"}}
	strict, err := client.New(client.Config{BaseURL: f.srv.URL, Key: testKey, HTTPClient: f.srv.Client(), NoFallback: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range noURL {
		if _, err := strict.RequireConnection(ctx, testToken, p, req); !errors.Is(err, client.ErrURLElicitationUnsupported) {
			t.Fatalf("NoFallback, %+v: %v", p, err)
		}
	}
	if len(f.calls) != 0 {
		t.Fatal("NoFallback: minted for a client that cannot carry the link")
	}
	for _, p := range noURL {
		a, err := c.RequireConnection(ctx, testToken, p, req)
		if err != nil || a.Fallback == nil || a.ElicitRequest != nil || a.Error != nil || a.Result != nil || a.Ready {
			t.Fatalf("fallback, %+v: %+v %v", p, a, err)
		}
		b, _ := json.Marshal(a.Fallback)
		want := `{"content":[{"type":"text","text":"Connect it.\n\nThis app cannot open the connect link for you. Open it in your browser:\n` +
			f.srv.URL + `/c/EID\n\nSign in, approve, then try again. The link works only for you, grants nothing by itself, and expires at 12:10 UTC on 30 Nov."}],"isError":true}`
		if string(b) != want {
			t.Fatalf("fallback result:\n%s\nwant\n%s", b, want)
		}
	}

	a, err := c.RequireConnection(ctx, testToken, client.Peer{ProtocolVersion: "2025-11-25", URLElicitation: true}, req)
	if err != nil || a.Generation != client.GenerationURLElicitation || a.Result != nil {
		t.Fatalf("2025-11-25: %+v %v", a, err)
	}
	if p := a.ElicitRequest; p.Mode != "url" || p.ElicitationID != "EID" || p.URL != a.Elicitation.URL || p.Message == "" {
		t.Fatalf("elicitation/create params: %+v", p)
	}
	b, _ := json.Marshal(a.Error)
	want := `{"code":-32042,"message":"This request requires more information.","data":{"elicitations":[{"mode":"url","elicitationId":"EID","url":"` +
		f.srv.URL + `/c/EID","message":"Connect it."}]}}`
	if string(b) != want {
		t.Fatalf("URLElicitationRequiredError:\n%s\nwant\n%s", b, want)
	}

	for _, v := range []string{"2026-07-28", "2027-01-01"} {
		a, err = c.RequireConnection(ctx, testToken, client.Peer{ProtocolVersion: v, URLElicitation: true}, req)
		if err != nil || a.Generation != client.GenerationInputRequired || a.ElicitRequest != nil || a.Error != nil ||
			a.InputKey != "connect-github" {
			t.Fatalf("%s: %+v %v", v, a, err)
		}
		b, _ = json.Marshal(a.Result)
		want = `{"resultType":"input_required","inputRequests":{"connect-github":{"method":"elicitation/create","params":{"mode":"url","url":"` +
			f.srv.URL + `/c/EID","message":"Connect it."}}},"requestState":"rs1.STATE"}`
		if string(b) != want {
			t.Fatalf("InputRequiredResult:\n%s\nwant\n%s", b, want)
		}
	}
	e, _ := c.Mint(ctx, testToken, req)
	if a, _ := e.AnswerFor("2026-07-28", "mine"); a.InputKey != "mine" || a.Result.InputRequests["mine"].Method == "" {
		t.Fatalf("custom input key: %+v", a)
	}
}

func TestRequestDigest(t *testing.T) {
	type args struct {
		Path  string `json:"path"`
		Limit int    `json:"limit"`
	}
	d1, _ := client.RequestDigest("list_files", args{"/a", 10})
	d2, _ := client.RequestDigest("list_files", args{"/a", 10})
	d3, _ := client.RequestDigest("list_files", args{"/b", 10})
	d4, _ := client.RequestDigest("read_file", args{"/a", 10})
	m1, _ := client.RequestDigest("x", map[string]any{"b": 1, "a": 2})
	m2, _ := client.RequestDigest("x", map[string]any{"a": 2, "b": 1})
	if d1 != d2 || d1 == d3 || d1 == d4 || m1 != m2 || len(d1) != 43 {
		t.Fatalf("digests: %s %s %s %s %s %s", d1, d2, d3, d4, m1, m2)
	}
	if _, err := client.RequestDigest("x", func() {}); err == nil {
		t.Fatal("digest of an unmarshalable value")
	}
}

func TestTokenNeverPrintsItsSecret(t *testing.T) {
	tok := client.Token{Provider: "github", Kind: "oauth2", AccessToken: "gho_SECRET", Scopes: []string{"repo"}}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("got", slog.Any("token", tok), slog.Any("ptr", &tok))
	for _, s := range []string{fmt.Sprint(tok), fmt.Sprintf("%v %+v %#v %s", tok, tok, tok, &tok), logs.String()} {
		if strings.Contains(s, "gho_SECRET") {
			t.Fatalf("secret printed: %s", s)
		}
	}
	if !strings.Contains(logs.String(), `"provider":"github"`) {
		t.Fatalf("log lacks the provider: %s", logs.String())
	}
}

func TestGenerationOf(t *testing.T) {
	for v, want := range map[string]client.Generation{
		"2024-11-05": client.GenerationNone, "2025-06-18": client.GenerationNone,
		"2025-11-25": client.GenerationURLElicitation, "2026-01-01": client.GenerationURLElicitation,
		"2026-07-28": client.GenerationInputRequired, "2030-01-01": client.GenerationInputRequired,
		"": client.GenerationNone, "2026-07-28-draft": client.GenerationNone, "DRAFT-2026": client.GenerationNone,
	} {
		if got := client.GenerationOf(v); got != want {
			t.Errorf("GenerationOf(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestConsentRequiredSaysWhatNeedsApproving: a consent_required refusal
// carries the scopes the user has not approved for this MCP server and
// whether the provider account changed, and still means "mint".
func TestConsentRequiredSaysWhatNeedsApproving(t *testing.T) {
	f, c := newFake(t)
	f.handle("GET /v1/connections/github/token", func(w http.ResponseWriter, r *http.Request, _ []byte) {
		writeJSON(w, http.StatusForbidden, map[string]any{"error": "consent_required",
			"error_description": "not approved", "unapproved_scopes": []string{"admin"}, "account_changed": true})
	})
	_, err := c.Token(context.Background(), testToken, "github")
	var ae *client.APIError
	if !errors.As(err, &ae) || !errors.Is(err, client.ErrConsentRequired) || !client.NeedsConnection(err) ||
		fmt.Sprint(ae.UnapprovedScopes) != "[admin]" || !ae.AccountChanged {
		t.Fatalf("got %#v", err)
	}
}

// TestMintAnsweredAgain: connectd answers a mint of a request already
// pending with 200 and that elicitation; Mint takes it like a new one.
func TestMintAnsweredAgain(t *testing.T) {
	f, c := newFake(t)
	f.answer("POST /v1/elicitations", http.StatusOK, minted(f.srv.URL))
	e, err := c.Mint(context.Background(), testToken, client.MintRequest{Provider: "github", Scopes: []string{"repo"}})
	if err != nil || e.ID != "EID" {
		t.Fatalf("got %+v, %v", e, err)
	}
}

// TestRetryWaits: a retried request whose link is still pending (connectd
// answers the mint with 200) waits on the long-poll up to RetryWait before
// answering: with Ready when the user finished meanwhile, with a new link
// when the old one ended otherwise, and with the same link when it is still
// pending. A first mint (201) answers at once.
func TestRetryWaits(t *testing.T) {
	f, _ := newFake(t)
	c, err := client.New(client.Config{BaseURL: f.srv.URL, Key: testKey, HTTPClient: f.srv.Client(),
		RetryWait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	peer := client.Peer{ProtocolVersion: client.ProtocolVersion20251125, URLElicitation: true}
	req := client.MintRequest{Provider: "github", Scopes: []string{"repo"}, RequestDigest: "d1"}
	pending := map[string]any{"elicitation_id": "EID", "status": "pending", "provider": "github",
		"expires_at": "2026-11-30T12:10:00Z"}
	var mu sync.Mutex
	mintStatus, state, polls := http.StatusOK, "completed", 0
	f.handle("POST /v1/elicitations", func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		mu.Lock()
		st := mintStatus
		mintStatus = http.StatusCreated // a second mint here is a new link
		mu.Unlock()
		writeJSON(w, st, minted(f.srv.URL))
	})
	f.handle("GET /v1/elicitations/EID", func(w http.ResponseWriter, r *http.Request, _ []byte) {
		mu.Lock()
		polls++
		doc := maps.Clone(pending)
		doc["status"] = state
		mu.Unlock()
		if doc["status"] == "pending" {
			time.Sleep(50 * time.Millisecond) // a short long-poll
		}
		writeJSON(w, http.StatusOK, doc)
	})
	reset := func(mint int, st string) {
		mu.Lock()
		mintStatus, state, polls = mint, st, 0
		mu.Unlock()
	}
	pollCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return polls
	}
	calls := func() []call {
		f.mu.Lock()
		defer f.mu.Unlock()
		return append([]call(nil), f.calls...)
	}

	t.Run("completed while waiting", func(t *testing.T) {
		reset(http.StatusOK, "completed")
		ans, err := c.RequireConnection(ctx, testToken, peer, req)
		if err != nil || !ans.Ready || ans.Error != nil {
			t.Fatalf("got %+v, %v; want Ready", ans, err)
		}
	})
	t.Run("still pending: the same link after waiting", func(t *testing.T) {
		reset(http.StatusOK, "pending")
		start := time.Now()
		ans, err := c.RequireConnection(ctx, testToken, peer, req)
		if err != nil || ans.Ready || ans.Elicitation.ID != "EID" || ans.Error == nil {
			t.Fatalf("got %+v, %v; want the same link", ans, err)
		}
		if waited, n := time.Since(start), pollCount(); waited < 250*time.Millisecond || n < 2 {
			t.Fatalf("answered after %v and %d polls: it did not wait", waited, n)
		}
	})
	t.Run("declined while waiting: a new link", func(t *testing.T) {
		reset(http.StatusOK, "declined")
		before := len(calls())
		ans, err := c.RequireConnection(ctx, testToken, peer, req)
		if err != nil || ans.Ready || ans.Elicitation.Again {
			t.Fatalf("got %+v, %v; want a newly minted link", ans, err)
		}
		mints := 0
		for _, call := range calls()[before:] {
			if call.method == http.MethodPost {
				mints++
			}
		}
		if mints != 2 {
			t.Fatalf("%d mints, want 2", mints)
		}
	})
	t.Run("a first mint answers at once", func(t *testing.T) {
		reset(http.StatusCreated, "pending")
		ans, err := c.RequireConnection(ctx, testToken, peer, req)
		if n := pollCount(); err != nil || ans.Ready || n != 0 {
			t.Fatalf("got %+v, %v after %d polls", ans, err, n)
		}
	})
}

// TestCancel: Cancel sends DELETE /v1/elicitations/{id} with the client key
// and the user token, and returns the status connectd answers.
func TestCancel(t *testing.T) {
	f, c := newFake(t)
	f.answer("DELETE /v1/elicitations/EID", http.StatusOK, map[string]any{"elicitation_id": "EID", "status": "declined",
		"reason": "client_declined", "provider": "github", "expires_at": "2026-11-30T12:10:00Z"})
	st, err := c.Cancel(context.Background(), testToken, "EID")
	if err != nil || st.Status != client.StatusDeclined || st.Reason != "client_declined" {
		t.Fatalf("got %+v, %v", st, err)
	}
	if len(f.calls) != 1 || f.calls[0].method != http.MethodDelete {
		t.Fatalf("calls: %+v", f.calls)
	}
	if _, err := c.Cancel(context.Background(), testToken, ""); err == nil {
		t.Fatal("an empty id was sent")
	}
}

// twoAccounts is an account_required answer as connectd writes it.
var twoAccounts = map[string]any{"error": "account_required",
	"error_description": "this client may use several of the user's github accounts; name one with account=<id>",
	"accounts": []any{
		map[string]any{"id": "cn_aaaaaaaaaaaaaaaaaaaaaaaaaa", "display_name": "octocat", "label": "work"},
		map[string]any{"id": "cn_bbbbbbbbbbbbbbbbbbbbbbbbbb", "display_name": "octo-home"},
	}}

// TestAccountRequired (issue 24): a client approved for several of the
// user's accounts at a provider that names none gets account_required with
// the accounts; it is a choice to put to the user (a form, or a tool result
// naming the account argument), not a connection to mint.
func TestAccountRequired(t *testing.T) {
	f, c := newFake(t)
	f.answer("GET /v1/connections/github/token", http.StatusConflict, twoAccounts)
	_, err := c.Token(context.Background(), testToken, "github")
	var ae *client.APIError
	if !errors.As(err, &ae) || !errors.Is(err, client.ErrAccountRequired) || client.NeedsConnection(err) || ae.Status != 409 {
		t.Fatalf("got %#v", err)
	}
	want := []client.Account{{ID: "cn_aaaaaaaaaaaaaaaaaaaaaaaaaa", DisplayName: "octocat", Label: "work"},
		{ID: "cn_bbbbbbbbbbbbbbbbbbbbbbbbbb", DisplayName: "octo-home"}}
	if got := client.Accounts(err); fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(ae.Accounts) != fmt.Sprint(want) {
		t.Fatalf("accounts %+v, want %+v", got, want)
	}
	if client.Accounts(&client.APIError{Status: 404, Code: "not_connected"}) != nil || client.ChooseAccount(errors.New("x"), "github") != nil {
		t.Fatal("accounts of another error")
	}

	choice := client.ChooseAccount(err, "github")
	b, _ := json.Marshal(choice.Form(""))
	wantForm := `{"mode":"form","message":"You have several github accounts this app may use. Which one should it use?",` +
		`"requestedSchema":{"type":"object","properties":{"account":{"type":"string","title":"github account","oneOf":[` +
		`{"const":"cn_aaaaaaaaaaaaaaaaaaaaaaaaaa","title":"work (octocat)"},{"const":"cn_bbbbbbbbbbbbbbbbbbbbbbbbbb","title":"octo-home"}]}},` +
		`"required":["account"]}}`
	if string(b) != wantForm {
		t.Fatalf("form:\n%s\nwant\n%s", b, wantForm)
	}
	fb, _ := json.Marshal(choice.Fallback("list_repos"))
	wantFallback := `{"content":[{"type":"text","text":"You have several github accounts this app may use, and it needs to know which one. ` +
		`Ask which, then call list_repos again with account set to its id:\n- work (octocat): cn_aaaaaaaaaaaaaaaaaaaaaaaaaa\n` +
		`- octo-home: cn_bbbbbbbbbbbbbbbbbbbbbbbbbb"}],"isError":true}`
	if string(fb) != wantFallback {
		t.Fatalf("fallback:\n%s\nwant\n%s", fb, wantFallback)
	}
	for content, want := range map[string]string{`{"account":"cn_bbbbbbbbbbbbbbbbbbbbbbbbbb"}`: "cn_bbbbbbbbbbbbbbbbbbbbbbbbbb",
		`{"account":""}`: "", `{"account":3}`: "", `{}`: ""} {
		var m map[string]any
		json.Unmarshal([]byte(content), &m)
		if id, ok := client.ChosenAccount(m); id != want || ok != (want != "") {
			t.Errorf("ChosenAccount(%s) = %q, %t", content, id, ok)
		}
	}

	// Two accounts with the same title are told apart by their ids.
	same := &client.AccountChoice{Provider: "p", Accounts: []client.Account{{ID: "cn_1", DisplayName: "me"},
		{ID: "cn_2", DisplayName: "me"}, {ID: "cn_3"}}}
	opts := same.Form("Which?").RequestedSchema.Properties[client.AccountField].OneOf
	if opts[0].Title != "me [cn_1]" || opts[1].Title != "me [cn_2]" || opts[2].Title != "cn_3" {
		t.Fatalf("titles %+v", opts)
	}
}

// TestAccounts (issue 24): the account of a token read, an unlink and a
// mint goes to connectd as it names it, and the answers say which account.
func TestAccounts(t *testing.T) {
	f, c := newFake(t)
	ctx := context.Background()
	const id = "cn_aaaaaaaaaaaaaaaaaaaaaaaaaa"

	f.answer("GET /v1/connections/github/token", http.StatusOK, map[string]any{"provider": "github",
		"account": map[string]any{"id": id, "display_name": "octocat"}, "kind": "oauth2", "access_token": "gho_SECRET"})
	tok, err := c.AccountToken(ctx, testToken, "github", id, "repo")
	if err != nil || tok.Account.ID != id || tok.Account.DisplayName != "octocat" {
		t.Fatalf("token: %v %v", tok, err)
	}
	if q := f.last().query; q != "account="+id+"&scopes=repo" {
		t.Fatalf("token query %q", q)
	}
	if _, err := c.Token(ctx, testToken, "github"); err != nil || f.last().query != "" {
		t.Fatalf("token without account: query %q, %v", f.last().query, err)
	}
	if s := fmt.Sprint(tok); !strings.Contains(s, id) || strings.Contains(s, "gho_SECRET") {
		t.Fatalf("token prints %s", s)
	}

	f.answer("GET /v1/connections", http.StatusOK, map[string]any{"connections": []any{
		map[string]any{"provider": "github", "id": id, "display_name": "octocat", "label": "work", "status": "active"},
		map[string]any{"provider": "github", "id": "cn_bbbbbbbbbbbbbbbbbbbbbbbbbb", "display_name": "octo-home",
			"status": "reauthorization_required", "consent_required": true}}})
	conns, err := c.Connections(ctx, testToken)
	if err != nil || len(conns) != 2 || conns[0].Account() != (client.Account{ID: id, DisplayName: "octocat", Label: "work"}) ||
		conns[1].ID != "cn_bbbbbbbbbbbbbbbbbbbbbbbbbb" || !conns[1].ConsentRequired || conns[0].ConsentRequired {
		t.Fatalf("connections: %+v %v", conns, err)
	}

	f.answer("DELETE /v1/connections/github", http.StatusOK, map[string]any{"provider": "github",
		"revoked_at_provider": true, "revocation": "revoked", "connections": []any{
			map[string]any{"id": id, "revoked_at_provider": true, "revocation": "revoked"},
			map[string]any{"id": "cn_bbbbbbbbbbbbbbbbbbbbbbbbbb", "revoked_at_provider": false, "revocation": "not_supported"}}})
	un, err := c.UnlinkAccount(ctx, testToken, "github", client.AccountAll)
	if err != nil || len(un.Connections) != 2 || un.Connections[1].Revocation != "not_supported" || !un.Connections[0].RevokedAtProvider {
		t.Fatalf("unlink all: %+v %v", un, err)
	}
	if q := f.last().query; q != "account=all" {
		t.Fatalf("unlink query %q", q)
	}
	if _, err := c.UnlinkAccount(ctx, testToken, "github", id); err != nil || f.last().query != "account="+id {
		t.Fatalf("unlink one: query %q, %v", f.last().query, err)
	}
	if _, err := c.Unlink(ctx, testToken, "github"); err != nil || f.last().query != "" {
		t.Fatalf("unlink: query %q, %v", f.last().query, err)
	}

	f.answer("POST /v1/elicitations", http.StatusCreated, minted(f.srv.URL))
	for _, account := range []string{id, client.AccountNew} {
		if _, err := c.Mint(ctx, testToken, client.MintRequest{Provider: "github", Account: account}); err != nil {
			t.Fatal(err)
		}
		if b := string(f.last().body); b != `{"provider":"github","account":"`+account+`"}` {
			t.Fatalf("mint body %s", b)
		}
	}

	// An unknown account is not_found, as connectd answers it.
	f.answer("GET /v1/connections/github/token", http.StatusNotFound, map[string]any{"error": "not_found"})
	if _, err := c.AccountToken(ctx, testToken, "github", "cn_cccccccccccccccccccccccccc"); !errors.Is(err, client.ErrNotFound) ||
		client.NeedsConnection(err) {
		t.Fatalf("unknown account: %v", err)
	}
}

// TestConnectKeyCarriesTheAccount: a 2026-07-28 connect request minted for
// one account is keyed with it, so the retry knows which token to read.
func TestConnectKeyCarriesTheAccount(t *testing.T) {
	f, c := newFake(t)
	f.answer("POST /v1/elicitations", http.StatusCreated, minted(f.srv.URL))
	const id = "cn_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	peer := client.Peer{ProtocolVersion: client.ProtocolVersion20260728, URLElicitation: true}
	for account, key := range map[string]string{id: "connect-github:" + id, client.AccountNew: "connect-github", "": "connect-github"} {
		a, err := c.RequireConnection(context.Background(), testToken, peer, client.MintRequest{Provider: "github", Account: account})
		if err != nil || a.InputKey != key || a.Result.InputRequests[key].Method != "elicitation/create" {
			t.Fatalf("account %q: %+v %v", account, a, err)
		}
		if got, ok := client.KeyAccount("github", key); !ok || got != strings.TrimPrefix(account, client.AccountNew) {
			t.Fatalf("KeyAccount(%q) = %q, %t", key, got, ok)
		}
	}
	for _, key := range []string{"connect-gitlab:" + id, "connect-github:", "account-github", "connect-githubx"} {
		if _, ok := client.KeyAccount("github", key); ok {
			t.Errorf("KeyAccount(%q) ok", key)
		}
	}
}
