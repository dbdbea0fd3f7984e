package mcpserver_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connectd/connectd/client"
	mcpserver "github.com/connectd/connectd/examples/mcp-server"
)

// approvalConnectd stands in for connectd with a request rule that asks
// for every proxied POST: each is answered user_approval_required with one
// approval until the user decides; once approved, one POST passes (and
// reaches the "provider": passed counts them); once denied, the same POST
// asks anew (another approval, AID2).
type approvalConnectd struct {
	mu       sync.Mutex
	decision string // "", "approve" or "deny"
	used     bool
	passed   int
	refused  int
}

func (c *approvalConnectd) decide(d string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.decision = d
}

func (c *approvalConnectd) counts() (passed, refused int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.passed, c.refused
}

func (c *approvalConnectd) status(base string) map[string]any {
	st := map[string]any{"elicitation_id": "AID", "kind": "approval", "status": "pending", "provider": "demo-files",
		"scopes": []string{}, "expires_at": time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339), "request_state": "rs1.FRESH"}
	switch c.decision {
	case "approve":
		st["status"] = "completed"
		delete(st, "request_state")
	case "deny":
		st["status"], st["reason"] = "declined", "user_denied"
		delete(st, "request_state")
	}
	return st
}

func (c *approvalConnectd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	base := "http://" + r.Host
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/proxy/demo-files/repos/acme/plans/issues":
		if c.decision == "approve" && !c.used {
			c.used, c.passed = true, c.passed+1
			writeJSON(w, http.StatusCreated, map[string]any{"number": 7, "html_url": "https://files.example/acme/plans/issues/7"})
			return
		}
		c.refused++
		// After a denial the same request asks anew: another approval.
		id := "AID"
		if c.decision == "deny" {
			id = "AID2"
		}
		u := base + "/c/" + id
		el := map[string]any{"mode": "url", "elicitationId": id, "url": u, "message": "Approve: Open issues"}
		approval := c.status(base)
		approval["elicitation_id"], approval["status"], approval["request_state"] = id, "pending", "rs1.STATE"
		delete(approval, "reason")
		for k, v := range map[string]any{"url": u, "elicitation": el,
			"url_elicitation_required_error": map[string]any{"code": -32042, "message": "This request requires the user's approval.",
				"data": map[string]any{"elicitations": []any{el}}},
			"input_request": map[string]any{"method": "elicitation/create", "params": map[string]any{"mode": "url", "url": u,
				"message": "Approve: Open issues"}},
			"method": "POST", "path": "/repos/acme/plans/issues", "rule": "POST /repos/*/issues", "message": "Open issues"} {
			approval[k] = v
		}
		writeError(w, r, http.StatusForbidden, map[string]any{"error": "user_approval_required",
			"error_description": "the user must approve this call first: Open issues", "approval": approval})
	case r.Method == http.MethodGet && r.URL.Path == "/v1/elicitations/AID":
		writeJSON(w, http.StatusOK, c.status(base))
	case r.Method == http.MethodDelete && r.URL.Path == "/v1/elicitations/AID":
		writeJSON(w, http.StatusOK, c.status(base))
	default:
		writeError(w, r, http.StatusNotFound, map[string]any{"error": "not_found"})
	}
}

// TestOpenIssueApproval: open_issue's POST meets connectd's
// user_approval_required; the tool hands the approval to the MCP client in
// the session's shape (elicitation/create within the call on 2025-11-25,
// InputRequiredResult and the retry on 2026-07-28). Approved, the same POST
// is sent again and passes once; denied, the tool answers the documented
// denial and the POST never passes.
func TestOpenIssueApproval(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		for _, decision := range []string{"approve", "deny"} {
			t.Run(version+" "+decision, func(t *testing.T) {
				t.Parallel()
				cd := &approvalConnectd{}
				idp, mcpURL := setupWith(t, cd, 0)
				token, err := idp.AccessToken("alice", mcpURL)
				if err != nil {
					t.Fatal(err)
				}
				var asked []*mcp.ElicitParams
				c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{Capabilities: urlOnly,
					ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						asked = append(asked, r.Params)
						cd.decide(decision) // the user decides on the approval page
						return &mcp.ElicitResult{Action: "accept"}, nil
					}})
				cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: mcpURL,
					HTTPClient: &http.Client{Transport: bearer(token)}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "open_issue",
					Arguments: map[string]any{"repo": "acme/plans", "title": "Ship it"}})
				if err != nil {
					t.Fatal(err)
				}
				if len(asked) != 1 || asked[0].Mode != "url" || !strings.HasSuffix(asked[0].URL, "/c/AID") {
					t.Fatalf("asked: %+v", asked)
				}
				passed, _ := cd.counts()
				switch decision {
				case "approve":
					if res.IsError || text(res) != "Opened https://files.example/acme/plans/issues/7." || passed != 1 {
						t.Fatalf("approved: %q (error %t), %d passed", text(res), res.IsError, passed)
					}
				case "deny":
					if !res.IsError || !strings.HasPrefix(text(res), client.DeniedText) || passed != 0 {
						t.Fatalf("denied: %q (error %t), %d passed", text(res), res.IsError, passed)
					}
				}
			})
		}
	}
}

// TestOpenIssueApprovalRPCError: with LegacyError the first call is
// answered -32042 with the approval; the user decides, the client hears
// notifications/elicitation/complete and retries the same call: approved,
// the POST passes once; denied, the retry is answered the denial (not a new
// approval) and the POST never passes.
func TestOpenIssueApprovalRPCError(t *testing.T) {
	t.Parallel()
	for _, decision := range []string{"approve", "deny"} {
		t.Run(decision, func(t *testing.T) {
			t.Parallel()
			cd := &approvalConnectd{}
			idp, mcpURL := setupWith(t, cd, 0, func(c *mcpserver.Config) { c.Legacy = mcpserver.LegacyError })
			token, err := idp.AccessToken("alice", mcpURL)
			if err != nil {
				t.Fatal(err)
			}
			completed := make(chan string, 2)
			c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{Capabilities: urlOnly,
				ElicitationCompleteHandler: func(_ context.Context, r *mcp.ElicitationCompleteNotificationRequest) {
					completed <- r.Params.ElicitationID
				}})
			cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: mcpURL,
				HTTPClient: &http.Client{Transport: bearer(token)}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			params := &mcp.CallToolParams{Name: "open_issue", Arguments: map[string]any{"repo": "acme/plans", "title": "Ship it"}}
			_, err = cs.CallTool(t.Context(), params)
			var rpcErr *jsonrpc.Error
			if !errors.As(err, &rpcErr) || rpcErr.Code != client.URLElicitationRequiredCode || !strings.Contains(string(rpcErr.Data), "/c/AID") {
				t.Fatalf("first call: %v", err)
			}
			cd.decide(decision)
			select {
			case id := <-completed:
				if id != "AID" {
					t.Fatalf("completion of %q", id)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no notifications/elicitation/complete")
			}
			res, err := cs.CallTool(t.Context(), params)
			if err != nil {
				t.Fatal(err)
			}
			passed, _ := cd.counts()
			switch decision {
			case "approve":
				if res.IsError || passed != 1 {
					t.Fatalf("approved retry: %q, %d passed", text(res), passed)
				}
			case "deny":
				if !res.IsError || !strings.HasPrefix(text(res), client.DeniedText+": POST /repos/acme/plans/issues") || passed != 0 {
					t.Fatalf("denied retry: %q, %d passed", text(res), passed)
				}
			}
		})
	}
}
