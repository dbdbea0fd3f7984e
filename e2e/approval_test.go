package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connectd/connectd/client"
	mcpserver "github.com/connectd/connectd/examples/mcp-server"
	"github.com/connectd/connectd/internal/clientauth"
)

// Per-request approval (issue 36) end to end: a proxy-only client whose
// request rules ask before an issue is opened, the example MCP servers' open_issue
// tool, MCP clients of both protocol generations, the user's browser on
// connectd's approval page, and the fake provider, which counts the POSTs
// that reach it.

const (
	// issuesPath is open_issue's POST below the fake provider's API base:
	// its echo endpoint, which answers any method.
	issuesPath = "/echo/repos/{repo}/issues"
	issueRepo  = "acme/plans"
	askRule    = `POST /echo/repos/*/issues ask "Open issues in your repositories"`
)

// approvalRules lets the client list the files and makes it ask before an
// issue is opened.
var approvalRules = &clientauth.ProxyRules{Rules: []string{"GET /files*", askRule},
	Description: "lists your files; asks you before it opens an issue"}

// newApprovalWorld is the world with the Go example registered proxy-only
// under approvalRules, its open_issue posting to issuesPath.
func newApprovalWorld(t *testing.T, legacy mcpserver.LegacyStyle) *world {
	t.Helper()
	w := newWorldWith(t, worldOptions{legacy: legacy, proxyOnly: true,
		set: func(c *mcpserver.Config) { c.IssuesPath = issuesPath }})
	w.setRules(w.clientID)
	return w
}

func (w *world) setRules(clientID string) {
	w.t.Helper()
	if err := w.env.Server.Clients().SetProxyRules(context.Background(), clientID, providerName, approvalRules); err != nil {
		w.t.Fatal(err)
	}
}

// issuePosts counts the POSTs that reached the fake provider's issues
// endpoint.
func (w *world) issuePosts() int {
	n := 0
	for _, r := range w.files.APIRequests() {
		if r.Method == http.MethodPost && strings.HasPrefix(r.Path, "/api/echo/repos/") {
			n++
		}
	}
	return n
}

// decision is the user's choice on the approval page.
type decision string

const (
	allowOnce decision = "once"
	deny      decision = "deny"
)

// decisionValues are the values of the approval form's decision button
// each choice may have, in order of preference.
var decisionValues = map[decision][]string{
	allowOnce: {"once", "allow_once", "allow"},
	deny:      {"deny"},
}

var (
	formTag   = regexp.MustCompile(`(?is)<form\b([^>]*)>(.*?)</form>`)
	fieldTag  = regexp.MustCompile(`(?is)<(?:input|button)\b[^>]*>`)
	attrValue = func(tag, name string) (string, bool) {
		m := regexp.MustCompile(`(?is)\b` + name + `\s*=\s*"([^"]*)"`).FindStringSubmatch(tag)
		if m == nil {
			return "", false
		}
		return html.UnescapeString(m[1]), true
	}
)

// approvalForm finds, on the approval page, the form whose decision button
// is one of values: where it posts and what (its hidden fields, the CSRF
// token among them, and the decision).
func approvalForm(page, pageURL string, values []string) (string, url.Values, error) {
	for _, want := range values {
		for _, f := range formTag.FindAllStringSubmatch(page, -1) {
			form := url.Values{}
			found := false
			for _, tag := range fieldTag.FindAllString(f[2], -1) {
				name, _ := attrValue(tag, "name")
				value, _ := attrValue(tag, "value")
				typ, _ := attrValue(tag, "type")
				switch {
				case name == "decision" && value == want:
					found = true
				case name != "" && name != "decision" && strings.EqualFold(typ, "hidden"):
					form.Set(name, value)
				}
			}
			if !found {
				continue
			}
			form.Set("decision", want)
			action, _ := attrValue(f[1], "action")
			u, err := url.Parse(pageURL)
			if err != nil {
				return "", nil, err
			}
			to, err := u.Parse(action)
			if err != nil {
				return "", nil, err
			}
			return to.String(), form, nil
		}
	}
	return "", nil, fmt.Errorf("the approval page has no form with decision %v", values)
}

// approve opens an approval link as user — signing in, as the identity
// binding of connectd's links asks — checks that the page shows the request
// and the operator's words, and clicks d.
func (b *browser) approve(approvalURL, user string, d decision) error {
	status, page, err := b.open(approvalURL, user)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("approval page: %d", status)
	}
	for _, want := range []string{"POST", "Open issues in your repositories", "/echo/repos/" + issueRepo + "/issues"} {
		if !strings.Contains(html.UnescapeString(page), want) {
			return fmt.Errorf("the approval page does not show %q", want)
		}
	}
	action, form, err := approvalForm(page, approvalURL, decisionValues[d])
	if err != nil {
		return err
	}
	r, err := b.b.Follow(http.MethodPost, action, form)
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK {
		return fmt.Errorf("after %s on the approval page: %d at %s", d, r.Status, r.URL)
	}
	return nil
}

func callOpenIssue(ctx context.Context, cs *mcp.ClientSession, title string) (*mcp.CallToolResult, error) {
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: "open_issue", Arguments: map[string]any{"repo": issueRepo, "title": title}})
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// TestApprovalGoExample: the Go example's open_issue on a proxy-only
// client whose rules ask, with the Go SDK's MCP client on 2025-11-25
// (elicitation/create within the call, and -32042 with the retry) and on
// 2026-07-28 (InputRequiredResult and the retry); and the TypeScript
// example's with -32042 (--style error), which the official TypeScript
// clients' test does not drive. Approved once, the
// retried POST reaches the provider exactly once; denied, the tool answers
// the documented denial and the provider is never called.
func TestApprovalGoExample(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		protocol string
		legacy   mcpserver.LegacyStyle
		ts       bool // the TypeScript example instead
	}{
		{"2025-11-25 elicit", client.ProtocolVersion20251125, mcpserver.LegacyElicit, false},
		{"2025-11-25 error", client.ProtocolVersion20251125, mcpserver.LegacyError, false},
		{"2026-07-28", client.ProtocolVersion20260728, mcpserver.LegacyElicit, false},
		{"typescript 2025-11-25 error", client.ProtocolVersion20251125, mcpserver.LegacyError, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newApprovalWorld(t, tc.legacy)
			if tc.ts {
				w.startTSServerWith("error", "", true, "--issues-path", issuesPath, "--retry-hold", "20")
				w.setRules(w.tsClientID)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			// What the user does with the next link they are shown: connect,
			// or a decision on the approval page.
			next := make(chan decision, 4)
			asked := make(chan *mcp.ElicitParams, 8)
			browsed := make(chan error, 8)
			completed := make(chan string, 8)
			var mu sync.Mutex
			seen := map[string]bool{}
			act := func(p *mcp.ElicitParams) {
				mu.Lock()
				again := seen[p.URL]
				seen[p.URL] = true
				mu.Unlock()
				if again {
					return // the same link again (a retry while the user is on the page): already being handled
				}
				asked <- p
				select {
				case d := <-next:
					go func() { browsed <- w.browser().approve(p.URL, "alice", d) }()
				default:
					go func() { browsed <- w.browser().connectProxyOnly(p.URL, "alice") }()
				}
			}
			cs, _, err := w.connect(ctx, "alice", tc.protocol, mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					act(r.Params)
					return &mcp.ElicitResult{Action: "accept"}, nil
				},
				ElicitationCompleteHandler: func(_ context.Context, r *mcp.ElicitationCompleteNotificationRequest) {
					completed <- r.Params.ElicitationID
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			// -32042: the tool call's error carries the link; the user acts
			// on it, connectd reports completion, the client calls again.
			call := func(name string, do func() (*mcp.CallToolResult, error)) *mcp.CallToolResult {
				t.Helper()
				res, err := do()
				if tc.legacy == mcpserver.LegacyError {
					if p := urlElicitationOf(err); p != nil {
						act(p)
						if err := wait(t, browsed, "the browser"); err != nil {
							t.Fatal(err)
						}
						wait(t, completed, "notifications/elicitation/complete")
						res, err = do()
					}
				} else if err == nil {
					if err := wait(t, browsed, "the browser"); err != nil {
						t.Fatal(err)
					}
				}
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				return res
			}

			// Connect first (the user's file-service account).
			checkFiles(t, call("list_files", func() (*mcp.CallToolResult, error) { return callListFiles(ctx, cs) }))

			// Approve: the retried POST passes, once.
			next <- allowOnce
			res := call("open_issue", func() (*mcp.CallToolResult, error) { return callOpenIssue(ctx, cs, "Ship the plan") })
			if res.IsError || !strings.HasPrefix(resultText(res), "Opened the issue in "+issueRepo) {
				t.Fatalf("approved open_issue: %q", resultText(res))
			}
			p := <-asked // the connect link
			p = <-asked  // the approval
			if p.Mode != "url" || !strings.HasPrefix(p.URL, w.connectd.URL+"/") {
				t.Fatalf("approval elicitation: %+v", p)
			}
			if n := w.issuePosts(); n != 1 {
				t.Fatalf("%d POSTs reached the provider after one approval, want 1", n)
			}

			// Deny another request: the documented denial, no POST.
			next <- deny
			res = call("open_issue", func() (*mcp.CallToolResult, error) { return callOpenIssue(ctx, cs, "Delete the plan") })
			if !res.IsError || !strings.HasPrefix(resultText(res), client.DeniedText) {
				t.Fatalf("denied open_issue: %q", resultText(res))
			}
			if n := w.issuePosts(); n != 1 {
				t.Fatalf("%d POSTs reached the provider after a denial, want still 1", n)
			}
		})
	}
}

// urlElicitationOf returns the first elicitation of a -32042 error, or nil.
func urlElicitationOf(err error) *mcp.ElicitParams {
	var rpcErr *jsonrpc.Error
	var data client.URLElicitationData
	if !errors.As(err, &rpcErr) || rpcErr.Code != client.URLElicitationRequiredCode ||
		json.Unmarshal(rpcErr.Data, &data) != nil || len(data.Elicitations) == 0 {
		return nil
	}
	e := data.Elicitations[0]
	return &mcp.ElicitParams{Mode: e.Mode, URL: e.URL, Message: e.Message, ElicitationID: e.ElicitationID}
}

// TestApprovalOfficialTypeScriptClients: the official TypeScript SDK
// clients — v2 on 2026-07-28, v1 on 2025-11-25 — against both example
// servers on a proxy-only client whose rules ask (ts/client/test/approval):
// connect, approve one open_issue (the retried POST reaches the provider
// once), deny another (the documented denial; the provider is not called).
func TestApprovalOfficialTypeScriptClients(t *testing.T) {
	t.Parallel()
	for _, server := range []string{"go", "typescript"} {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			w := newApprovalWorld(t, mcpserver.LegacyElicit)
			needTS(t)
			if server == "typescript" {
				w.startTSServerWith("elicit", "", true, "--retry-hold", "20", "--issues-path", issuesPath)
				w.setRules(w.tsClientID)
			}
			certFile, _ := w.tlsFiles()
			env := []string{"MCP_URL=" + w.mcpURL, "CONTROL_URL=" + w.approvalControl(), "NODE_EXTRA_CA_CERTS=" + certFile,
				"ISSUE_REPO=" + issueRepo, "DENIED_TEXT=" + client.DeniedText,
				"USER_V2=alice", "TOKEN_V2=" + w.token("alice", w.mcpURL), "USER_V1=bob", "TOKEN_V1=" + w.token("bob", w.mcpURL)}
			w.runNodeTests(env, "build-test/approval/")
		})
	}
}

// approvalControl serves, for node tests: POST /complete {url, user} (connect,
// as control), POST /decide {url, user, decision: "once" | "deny"} (the user's
// choice on the approval page) and GET /posts (how many POSTs reached the
// provider's issues endpoint, as JSON {"posts": n}).
func (w *world) approvalControl() string {
	w.t.Helper()
	control := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in struct{ URL, User, Decision string }
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/posts":
			rw.Header().Set("Content-Type", "application/json")
			json.NewEncoder(rw).Encode(map[string]int{"posts": w.issuePosts()})
			return
		case r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&in) != nil || !strings.HasPrefix(in.URL, w.connectd.URL+"/"):
			http.Error(rw, "POST /complete {url, user} or /decide {url, user, decision}, GET /posts", http.StatusBadRequest)
			return
		}
		var err error
		switch r.URL.Path {
		case "/complete":
			err = w.browser().connectProxyOnly(in.URL, in.User)
		case "/decide":
			if _, ok := decisionValues[decision(in.Decision)]; !ok {
				http.Error(rw, "decision: once or deny", http.StatusBadRequest)
				return
			}
			err = w.browser().approve(in.URL, in.User, decision(in.Decision))
		default:
			err = errors.New("no such control")
		}
		if err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		rw.WriteHeader(http.StatusNoContent)
	}))
	w.t.Cleanup(control.Close)
	return control.URL
}
