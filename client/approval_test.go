package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connectd/connectd/client"
)

// approvalDoc is the approval a user_approval_required refusal carries, as
// docs/api.md describes it: the mint answer of an elicitation of kind
// approval, and the request it is about.
func approvalDoc(base, id string) map[string]any {
	doc := minted(base)
	u := base + "/c/" + id
	el := map[string]any{"mode": "url", "elicitationId": id, "url": u, "message": "Approve: Open issues in your repositories"}
	doc["elicitation_id"], doc["url"], doc["elicitation"] = id, u, el
	doc["scopes"] = []string{}
	doc["expires_at"] = time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)
	doc["url_elicitation_required_error"] = map[string]any{"code": -32042, "message": "This request requires the user's approval.",
		"data": map[string]any{"elicitations": []any{el}}}
	doc["input_request"] = map[string]any{"method": "elicitation/create",
		"params": map[string]any{"mode": "url", "message": el["message"], "url": u}}
	doc["kind"], doc["method"], doc["path"] = "approval", "POST", "/repos/a/b/issues"
	doc["rule"], doc["message"] = "POST /repos/*/issues", "Open issues in your repositories"
	return doc
}

// approvalFake is connectd's proxy asking for approval of every POST, and
// its status endpoint answering status(id).
func approvalFake(t *testing.T, retryWait time.Duration, status func(id string) map[string]any) (*proxyFake, *client.Client) {
	t.Helper()
	var f *proxyFake
	f, _ = newProxyFake(t, "", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/proxy/github/"):
			envelope(w, r, http.StatusForbidden, map[string]any{"error": "user_approval_required",
				"error_description": "the user must approve this call first: Open issues in your repositories",
				"approval":          approvalDoc(f.srv.URL, "AID")})
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/elicitations/"):
			writeJSON(w, http.StatusOK, status(strings.TrimPrefix(r.URL.Path, "/v1/elicitations/")))
		default:
			envelope(w, r, http.StatusNotFound, map[string]any{"error": "not_found"})
		}
	})
	c, err := client.New(client.Config{BaseURL: f.srv.URL, Key: testKey, HTTPClient: f.srv.Client(), RetryWait: retryWait})
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

func pendingStatus(id string) map[string]any {
	return map[string]any{"elicitation_id": id, "status": "pending", "kind": "approval", "provider": "github",
		"scopes": []string{}, "expires_at": time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)}
}

// postIssue makes the proxied POST an SDK would, returning its error.
func postIssue(t *testing.T, c *client.Client, opts ...client.ProviderOption) error {
	t.Helper()
	hc := c.ProviderClient(testToken, "github", opts...)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://api.github.com/repos/a/b/issues",
		bytes.NewReader([]byte(`{"title":"t"}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatal("the POST was not refused")
	}
	return err
}

// TestApprovalRequired: the proxy's user_approval_required is
// ErrApprovalRequired, and ApprovalRequired reads the whole approval from
// it — through the *url.Error of http.Client and an SDK's own wrapping —
// with the account the call named; no other error has one.
func TestApprovalRequired(t *testing.T) {
	t.Parallel()
	f, c := approvalFake(t, -1, pendingStatus)
	err := postIssue(t, c, client.WithAccount("cn_work"))
	for _, e := range []error{err, fmt.Errorf("sdk: create issue: %w", err)} {
		if !errors.Is(e, client.ErrApprovalRequired) || client.NeedsConnection(e) {
			t.Fatalf("%v: ErrApprovalRequired %t, NeedsConnection %t", e, errors.Is(e, client.ErrApprovalRequired), client.NeedsConnection(e))
		}
		a := client.ApprovalRequired(e)
		if a == nil {
			t.Fatalf("%v: no approval", e)
		}
		u := f.srv.URL + "/c/AID"
		if a.ID != "AID" || a.URL != u || a.Kind != client.KindApproval || a.Status != client.StatusPending ||
			a.Method != "POST" || a.Path != "/repos/a/b/issues" || a.Rule != "POST /repos/*/issues" ||
			a.Message != "Open issues in your repositories" || a.Account != "cn_work" || a.Provider != "github" ||
			a.Params.URL != u || a.Params.ElicitationID != "AID" || a.InputRequest.Params.URL != u ||
			a.URLElicitationRequiredError.Code != client.URLElicitationRequiredCode || a.RequestState != "rs1.STATE" {
			t.Fatalf("approval: %+v", a)
		}
	}
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || ae.Approval == nil {
		t.Fatalf("APIError: %v", err)
	}
	for _, other := range []error{nil, errors.New("x"), &client.APIError{Status: 403, Code: "not_connected"},
		&client.APIError{Status: 403, Code: "proxy_not_allowed", Approval: &client.Approval{}}} {
		if a := client.ApprovalRequired(other); a != nil {
			t.Errorf("ApprovalRequired(%v) = %+v", other, a)
		}
	}
}

// TestRequireApproval: the approval in the shape of what the MCP client
// declared, keyed approve-<provider>:<approval id> on 2026-07-28, and the link
// in plain words for a client without URL mode.
func TestRequireApproval(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		peer       client.Peer
		account    string
		noFallback bool
		check      func(t *testing.T, ans *client.Answer, err error)
	}{
		{name: "2025-11-25", peer: client.Peer{ProtocolVersion: client.ProtocolVersion20251125, URLElicitation: true},
			check: func(t *testing.T, ans *client.Answer, err error) {
				if err != nil || ans.Generation != client.GenerationURLElicitation || ans.ElicitRequest.ElicitationID != "AID" ||
					ans.Error.Code != client.URLElicitationRequiredCode || ans.Approval == nil || ans.Elicitation.ID != "AID" ||
					ans.Result != nil || ans.Fallback != nil || ans.Ready {
					t.Fatalf("%+v, %v", ans, err)
				}
			}},
		{name: "2026-07-28", peer: client.Peer{ProtocolVersion: client.ProtocolVersion20260728, URLElicitation: true},
			check: func(t *testing.T, ans *client.Answer, err error) {
				if err != nil || ans.Generation != client.GenerationInputRequired || ans.InputKey != "approve-github:AID" ||
					ans.Result.RequestState != "rs1.STATE" || ans.Result.InputRequests["approve-github:AID"].Params.URL == "" ||
					ans.ElicitRequest != nil {
					t.Fatalf("%+v, %v", ans, err)
				}
				if id, ok := client.KeyApproval("github", ans.InputKey); !ok || id != "AID" {
					t.Fatalf("KeyApproval(%q) = %q, %t", ans.InputKey, id, ok)
				}
				for _, other := range []string{"approve-github", "approve-github:", "connect-github", "approve-gitlab:AID"} {
					if id, ok := client.KeyApproval("github", other); ok {
						t.Errorf("KeyApproval(%q) = %q, true", other, id)
					}
				}
			}},
		{name: "2026-07-28 with an account", peer: client.Peer{ProtocolVersion: client.ProtocolVersion20260728, URLElicitation: true},
			account: "cn_work",
			check: func(t *testing.T, ans *client.Answer, err error) {
				if err != nil || ans.InputKey != "approve-github:AID" || ans.Approval.Account != "cn_work" {
					t.Fatalf("%+v, %v", ans, err)
				}
			}},
		{name: "no URL mode", peer: client.Peer{ProtocolVersion: client.ProtocolVersion20251125},
			check: func(t *testing.T, ans *client.Answer, err error) {
				if err != nil || ans.Fallback == nil || ans.ElicitRequest != nil || ans.Result != nil || !ans.Fallback.IsError {
					t.Fatalf("%+v, %v", ans, err)
				}
				text := ans.Fallback.Text()
				for _, want := range []string{"/c/AID", "approve or deny POST /repos/a/b/issues", "try again"} {
					if !strings.Contains(text, want) {
						t.Errorf("fallback lacks %q: %s", want, text)
					}
				}
			}},
		{name: "no URL mode, no fallback", peer: client.Peer{ProtocolVersion: client.ProtocolVersion20251125}, noFallback: true,
			check: func(t *testing.T, ans *client.Answer, err error) {
				if !errors.Is(err, client.ErrURLElicitationUnsupported) {
					t.Fatalf("%+v, %v", ans, err)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, c := approvalFake(t, -1, pendingStatus)
			if tc.noFallback {
				var err error
				if c, err = client.New(client.Config{BaseURL: f.srv.URL, Key: testKey, HTTPClient: f.srv.Client(), NoFallback: true}); err != nil {
					t.Fatal(err)
				}
			}
			var opts []client.ProviderOption
			if tc.account != "" {
				opts = append(opts, client.WithAccount(tc.account))
			}
			ans, err := c.RequireApproval(t.Context(), testToken, tc.peer, postIssue(t, c, opts...))
			tc.check(t, ans, err)
		})
	}
	_, c := approvalFake(t, -1, pendingStatus)
	if _, err := c.RequireApproval(t.Context(), testToken, client.Peer{ProtocolVersion: client.ProtocolVersion20251125,
		URLElicitation: true}, &client.APIError{Status: 403, Code: "not_connected"}); err == nil {
		t.Fatal("RequireApproval of a not_connected refusal")
	}
}

// TestRequireApprovalRetry: an approval handed out once and met again (the
// MCP client retried while it was pending) is waited on for RetryWait: an
// approval given meanwhile is Ready, a denial is ErrApprovalDenied, one
// still pending is the same link again. A fresh approval is answered at
// once, without a wait.
func TestRequireApprovalRetry(t *testing.T) {
	t.Parallel()
	peer := client.Peer{ProtocolVersion: client.ProtocolVersion20251125, URLElicitation: true}
	tests := []struct {
		name   string
		final  map[string]any // the status once the retry waits; nil: pending
		ready  bool
		errIs  error
		reason string
	}{
		{name: "approved meanwhile", final: map[string]any{"status": "completed"}, ready: true},
		{name: "denied meanwhile", final: map[string]any{"status": "declined", "reason": "user_denied"}, errIs: client.ErrApprovalDenied},
		{name: "dismissed meanwhile", final: map[string]any{"status": "declined", "reason": "client_declined"},
			errIs: client.ErrApprovalDismissed},
		{name: "expired meanwhile", final: map[string]any{"status": "expired"}, errIs: client.ErrApprovalExpired},
		{name: "still pending"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var polls atomic.Int32
			_, c := approvalFake(t, time.Second, func(id string) map[string]any {
				polls.Add(1)
				st := pendingStatus(id)
				for k, v := range tc.final {
					st[k] = v
				}
				if tc.final == nil {
					time.Sleep(100 * time.Millisecond) // a long-poll that ends pending
				}
				return st
			})
			ans, err := c.RequireApproval(t.Context(), testToken, peer, postIssue(t, c))
			if err != nil || ans.Ready || polls.Load() != 0 {
				t.Fatalf("first: %+v, %v, %d polls", ans, err, polls.Load())
			}
			start := time.Now()
			ans, err = c.RequireApproval(t.Context(), testToken, peer, postIssue(t, c))
			if polls.Load() == 0 {
				t.Fatal("the retry did not wait on the approval")
			}
			switch {
			case tc.errIs != nil:
				if !errors.Is(err, tc.errIs) {
					t.Fatalf("retry: %+v, %v; want %v", ans, err, tc.errIs)
				}
			case tc.ready:
				if err != nil || !ans.Ready || ans.Approval.ID != "AID" {
					t.Fatalf("retry: %+v, %v", ans, err)
				}
			default:
				if err != nil || ans.Ready || ans.ElicitRequest.ElicitationID != "AID" || time.Since(start) < time.Second {
					t.Fatalf("retry: %+v, %v after %s", ans, err, time.Since(start))
				}
			}
		})
	}
}

// TestApprovalOutcome: what each final status of an approval means, and
// the denial's tool result.
func TestApprovalOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		st    client.ElicitationStatus
		errIs error
	}{
		{client.ElicitationStatus{ID: "A", Status: client.StatusCompleted}, nil},
		{client.ElicitationStatus{ID: "A", Status: client.StatusDeclined, Reason: client.ReasonUserDenied}, client.ErrApprovalDenied},
		{client.ElicitationStatus{ID: "A", Status: client.StatusDeclined, Reason: client.ReasonClientDeclined}, client.ErrApprovalDismissed},
		{client.ElicitationStatus{ID: "A", Status: client.StatusExpired}, client.ErrApprovalExpired},
	}
	for _, tc := range tests {
		err := client.ApprovalOutcome(&tc.st)
		if (tc.errIs == nil) != (err == nil) || (tc.errIs != nil && !errors.Is(err, tc.errIs)) {
			t.Errorf("%+v: %v, want %v", tc.st, err, tc.errIs)
		}
	}
	for _, st := range []*client.ElicitationStatus{nil, {ID: "A", Status: client.StatusFailed}, {ID: "A", Status: client.StatusPending}} {
		if err := client.ApprovalOutcome(st); err == nil || errors.Is(err, client.ErrApprovalDenied) {
			t.Errorf("%+v: %v", st, err)
		}
	}
	r := client.DeniedResult(&client.Approval{Method: "POST", Path: "/repos/a/b/issues", Message: "Open issues"})
	if !r.IsError || r.Text() != "The user denied this request: POST /repos/a/b/issues (Open issues). It was not made. "+
		"Do not try it again unless the user asks for it." {
		t.Errorf("DeniedResult: %+v", r)
	}
	if r := client.DeniedResult(nil); !strings.HasPrefix(r.Text(), client.DeniedText+".") {
		t.Errorf("DeniedResult(nil): %q", r.Text())
	}
}

// TestStatusKind: the status document's kind reaches ElicitationStatus.
func TestStatusKind(t *testing.T) {
	t.Parallel()
	_, c := approvalFake(t, -1, func(id string) map[string]any {
		st := pendingStatus(id)
		st["status"], st["reason"] = "declined", "user_denied"
		return st
	})
	st, err := c.Wait(context.Background(), testToken, "AID")
	if err != nil || st.Kind != client.KindApproval || st.Reason != client.ReasonUserDenied ||
		!errors.Is(client.ApprovalOutcome(st), client.ErrApprovalDenied) {
		t.Fatalf("%+v, %v", st, err)
	}
}
