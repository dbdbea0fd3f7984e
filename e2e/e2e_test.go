package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connectd/connectd/client"
	mcpserver "github.com/connectd/connectd/examples/mcp-server"
	"github.com/connectd/connectd/examples/mcp-server/devtoken"
	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/flowtest"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/servertest"
	"github.com/connectd/connectd/internal/web"
)

const (
	providerName = "demo-files"
	scope        = "files.read"
	// retryWait is how long the MCP server's connectd client waits when a
	// request is retried while its link is pending (client.Config.RetryWait).
	retryWait = 8 * time.Second
)

// world is connectd with its identity provider, a third-party provider and
// the example MCP server, each behind its own TLS listener on 127.0.0.1.
type world struct {
	t          *testing.T
	env        *servertest.Env
	tls        *http.Client // trusts the test certificate (shared by every httptest TLS server)
	connectd   *httptest.Server
	idp        *httptest.Server
	files      *providertest.Server
	mcpURL     string         // the MCP server's endpoint and resource URI
	cd         *client.Client // connectd API client with the MCP server's key
	clientID   string         // the MCP server's registration at connectd
	tsClientID string         // the TypeScript example's, once startTSServer registered it
}

// worldOptions are how the example MCP server runs and is registered.
type worldOptions struct {
	legacy     mcpserver.LegacyStyle
	credential mcpserver.Credential    // default: through connectd's proxy
	proxyOnly  bool                    // registered proxy-only: it never receives a credential
	set        func(*mcpserver.Config) // adjusts the example server's Config last
}

func newWorld(t *testing.T, legacy mcpserver.LegacyStyle) *world {
	t.Helper()
	return newWorldWith(t, worldOptions{legacy: legacy})
}

func newWorldWith(t *testing.T, o worldOptions) *world {
	t.Helper()
	ctx := t.Context()
	logger := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		logger = web.NewLogger(tWriter{t}, slog.LevelDebug, "text")
	}

	// connectd, wired by server.New as `connectd serve` wires it; the MCP
	// authorization server with connectd's login client and a public client
	// for MCP clients (devtoken); the third-party provider whose file API
	// needs its token.
	env := servertest.New(t, servertest.Options{
		IdP: func(_ int, c *devidp.Config) {
			c.Clients = append(c.Clients, devidp.Client{ID: devtoken.ClientID, RedirectURIs: []string{devtoken.RedirectURI}})
		},
		Fake: providertest.Options{APIScope: scope, Subject: "demo-account",
			Quirks: providertest.Quirks{IssParameter: true}},
		FakeName:  providerName,
		FakeEntry: func(entry map[string]any) { entry["scopes"] = []string{scope} },
		Config: func(c *server.Config) {
			// The wall clock: the MCP servers, the MCP clients and the
			// browser all wait on it.
			c.Now, c.Logger = time.Now, logger
		},
	})
	env.Run(env.Server) // long-poll wake-ups (LISTEN/NOTIFY), sweeps
	w := &world{t: t, env: env, tls: env.Config.HTTPClient, connectd: env.Public, idp: env.IdPs[0].Server, files: env.Fake}

	// The example MCP server, registered at connectd.
	mcpMux := http.NewServeMux()
	mcpSrv := httptest.NewTLSServer(mcpMux)
	t.Cleanup(mcpSrv.Close)
	w.mcpURL = mcpSrv.URL + "/mcp"
	c, key := env.NewClient("Files Assistant", []string{w.mcpURL}, []string{providerName})
	w.clientID = c.ID
	if o.proxyOnly {
		if err := env.Server.Clients().SetProxyOnly(ctx, c.ID, true); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if w.cd, err = client.New(client.Config{BaseURL: w.connectd.URL, Key: key, HTTPClient: w.tls, RetryWait: retryWait}); err != nil {
		t.Fatal(err)
	}
	cfg := mcpserver.Config{Resource: w.mcpURL, Issuer: w.idp.URL, Connectd: w.cd,
		Provider: providerName, Scopes: []string{scope}, Credential: o.credential, FilesAPI: w.files.APIURL(), Legacy: o.legacy,
		WaitTimeout: 20 * time.Second, HTTPClient: w.tls, Logger: logger}
	if o.set != nil {
		o.set(&cfg)
	}
	srv, err := mcpserver.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	mcpMux.Handle("/", srv.Handler())
	return w
}

// tWriter sends log lines to t.Log (go test -v).
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// token gets user's MCP access token for resource from the identity
// provider, as an MCP client would (authorization code + PKCE + resource).
func (w *world) token(user, resource string) string {
	w.t.Helper()
	tok, err := devtoken.Get(context.Background(), devtoken.Request{Issuer: w.idp.URL, User: user, Resource: resource,
		HTTPClient: w.tls})
	if err != nil {
		w.t.Fatal(err)
	}
	return tok
}

// wire records every MCP request and response body the client sends and
// receives (SSE streams included), to check the shapes on the wire.
type wire struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *wire) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

func (r *wire) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

// transport adds the bearer token and tees bodies into a wire.
type transport struct {
	token string
	wire  *wire
	next  http.RoundTripper
}

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+t.token)
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body.Close()
		fmt.Fprintf(t.wire, "\n>>> %s\n", b)
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(t.wire, "\n<<< %d\n", resp.StatusCode)
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(resp.Body, t.wire), resp.Body}
	return resp, nil
}

// connect opens an MCP session as user with the SDK's client at protocol.
// The client declares URL-mode elicitation unless opts.Capabilities says
// otherwise.
func (w *world) connect(ctx context.Context, user, protocol string, opts mcp.ClientOptions) (*mcp.ClientSession, *wire, error) {
	rec := &wire{}
	if opts.Capabilities == nil {
		opts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &opts)
	hc := &http.Client{Transport: transport{token: w.token(user, w.mcpURL), wire: rec, next: w.tls.Transport}}
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: w.mcpURL, HTTPClient: hc, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		return nil, rec, err
	}
	w.t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != protocol {
		w.t.Fatalf("negotiated protocol %s, want %s", got, protocol)
	}
	return cs, rec, nil
}

func callListFiles(ctx context.Context, cs *mcp.ClientSession) (*mcp.CallToolResult, error) {
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_files", Arguments: map[string]any{}})
}

// checkFiles checks a successful list_files result.
func checkFiles(t *testing.T, res *mcp.CallToolResult) {
	t.Helper()
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("list_files failed: %+v", res.Content)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(text, "notes.txt") || !strings.Contains(text, "plan.md") {
		t.Fatalf("list_files: %q", text)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out mcpserver.FileList
	if err := json.Unmarshal(b, &out); err != nil || len(out.Files) != 2 || out.Owner != "demo-account" {
		t.Fatalf("structured content: %s", b)
	}
}

// browser is a user's browser (flowtest's, following redirects across
// connectd, the identity provider and the third-party provider). Its methods
// return errors (they run on goroutines started by MCP client handlers).
type browser struct {
	w *world
	b *flowtest.Browser
}

func (w *world) browser() *browser {
	return &browser{w: w, b: flowtest.New(&http.Client{Transport: w.tls.Transport, Timeout: 20 * time.Second})}
}

// open opens a connect URL: connectd sends the browser to sign in at the
// identity provider, whose user picker is answered as user; the browser
// lands back on the connect URL. It returns that final page.
func (b *browser) open(connectURL, user string) (int, string, error) {
	r, err := b.b.Follow(http.MethodGet, connectURL, nil)
	if err != nil {
		return 0, "", err
	}
	if !strings.HasPrefix(r.URL, b.w.idp.URL+"/authorize?") || !strings.Contains(r.Body, `value="alice"`) {
		return 0, "", fmt.Errorf("opening the link did not lead to the sign-in picker: %d %s", r.Status, r.URL)
	}
	action, form, err := servertest.PickerAnswer(r.URL, user)
	if err != nil {
		return 0, "", err
	}
	r, err = b.b.Follow(http.MethodPost, action, form)
	if err != nil {
		return 0, "", err
	}
	if r.URL != connectURL {
		return 0, "", fmt.Errorf("sign-in did not return to the connect URL but to %s", r.URL)
	}
	return r.Status, r.Body, nil
}

// connect opens the link as user, allows on the consent page and follows
// the provider round trip back to connectd's "Connected" page.
func (b *browser) connect(connectURL, user string) error {
	status, page, err := b.open(connectURL, user)
	if err != nil {
		return err
	}
	form, ok := flowtest.AllowForm(page)
	if status != http.StatusOK || !ok || !strings.Contains(page, "Files Assistant") {
		return fmt.Errorf("consent page: %d", status)
	}
	r, err := b.b.Follow(http.MethodPost, connectURL, form)
	if err != nil {
		return err
	}
	// The callback redirects to the link's own success page (no code in
	// the address bar, reloadable).
	if r.Status != http.StatusOK || !strings.Contains(r.Body, "Connected") ||
		!strings.HasPrefix(r.URL, connectURL+"?account=") {
		return fmt.Errorf("after Allow: %d at %s", r.Status, r.URL)
	}
	return nil
}

func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// TestInputRequired20260728: on a 2026-07-28 session the tool answers
// InputRequiredResult with connectd's input request and request_state; the
// SDK client (its multi-round-trip middleware) shows the URL, retries with
// inputResponses and the echoed requestState, and the server resolves it at
// connectd and answers the files once the browser flow is done.
func TestInputRequired20260728(t *testing.T) {
	t.Parallel()
	w := newWorld(t, mcpserver.LegacyElicit)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	asked := make(chan *mcp.ElicitParams, 4)
	browsed := make(chan error, 4)
	cs, rec, err := w.connect(ctx, "alice", client.ProtocolVersion20260728, mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- r.Params
			// The user consents to open the link; the browser does the rest
			// while the retried call waits.
			go func() { browsed <- w.browser().connect(r.Params.URL, "alice") }()
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := callListFiles(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, res)
	if err := wait(t, browsed, "the browser"); err != nil {
		t.Fatal(err)
	}
	p := wait(t, asked, "the elicitation")
	if p.Mode != "url" || !strings.HasPrefix(p.URL, w.connectd.URL+"/c/") || strings.Contains(p.URL, "alice") {
		t.Fatalf("input request: %+v", p)
	}

	// On the wire: an InputRequiredResult carrying connectd's input request
	// and request_state, then the retry echoing it with the user's answer —
	// and never a server-to-client request (forbidden from 2026-07-28).
	got := rec.String()
	key := client.InputKey(providerName)
	for _, want := range []string{
		`"resultType":"input_required"`,
		`"inputRequests":{"` + key + `":{"method":"elicitation/create","params":{"mode":"url","message":`,
		`"requestState":"`,
		`"inputResponses":{"` + key + `":{"action":"accept"}}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("wire lacks %s", want)
		}
	}
	if regexp.MustCompile(`"id":\d+,"method":"elicitation/create"`).MatchString(got) {
		t.Error("the server sent an elicitation/create request on a 2026-07-28 session")
	}
	// No 2025-11-25 shapes, and no "content" in an input_required result.
	for _, never := range []string{`"content":null`, `"elicitationId"`, `-32042`} {
		if strings.Contains(got, never) {
			t.Errorf("the 2026-07-28 wire carries %s", never)
		}
	}
	// The provider's token never crossed the MCP connection.
	tok, err := w.cd.Token(ctx, w.token("alice", w.mcpURL), providerName, scope)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, tok.AccessToken) {
		t.Fatal("the provider token crossed the MCP connection")
	}

	// Connected now: the next call answers at once.
	res, err = callListFiles(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, res)
	if len(asked) != 0 {
		t.Fatal("asked to connect again")
	}
}

// TestURLElicitation20251125: on a 2025-11-25 session the tool sends a
// URL-mode elicitation/create request with connectd's params, waits for
// connectd to report completion, sends notifications/elicitation/complete
// and returns the files, all within the one tool call.
func TestURLElicitation20251125(t *testing.T) {
	t.Parallel()
	w := newWorld(t, mcpserver.LegacyElicit)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	asked := make(chan *mcp.ElicitParams, 4)
	browsed := make(chan error, 4)
	completed := make(chan string, 4)
	cs, rec, err := w.connect(ctx, "alice", client.ProtocolVersion20251125, mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- r.Params
			go func() { browsed <- w.browser().connect(r.Params.URL, "alice") }()
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
		ElicitationCompleteHandler: func(_ context.Context, r *mcp.ElicitationCompleteNotificationRequest) {
			completed <- r.Params.ElicitationID
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := callListFiles(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, res)
	if err := wait(t, browsed, "the browser"); err != nil {
		t.Fatal(err)
	}
	p := wait(t, asked, "the elicitation")
	if p.Mode != "url" || p.ElicitationID == "" || p.URL != w.connectd.URL+"/c/"+p.ElicitationID {
		t.Fatalf("elicitation/create params: %+v", p)
	}
	if id := wait(t, completed, "notifications/elicitation/complete"); id != p.ElicitationID {
		t.Fatalf("completion for %q, want %q", id, p.ElicitationID)
	}
	got := rec.String()
	for _, want := range []string{`"method":"elicitation/create"`, `"method":"notifications/elicitation/complete"`} {
		if !strings.Contains(got, want) {
			t.Errorf("wire lacks %s", want)
		}
	}
	if strings.Contains(got, `"resultType":"input_required"`) {
		t.Error("InputRequiredResult on a 2025-11-25 session")
	}
}

// TestURLElicitationRequiredError20251125: with the error style the tool
// call fails with URLElicitationRequiredError (-32042) carrying connectd's
// elicitation; the server sends notifications/elicitation/complete when the
// user is done, and the client's retry gets the files.
func TestURLElicitationRequiredError20251125(t *testing.T) {
	t.Parallel()
	w := newWorld(t, mcpserver.LegacyError)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	completed := make(chan string, 4)
	cs, _, err := w.connect(ctx, "alice", client.ProtocolVersion20251125, mcp.ClientOptions{
		ElicitationCompleteHandler: func(_ context.Context, r *mcp.ElicitationCompleteNotificationRequest) {
			completed <- r.Params.ElicitationID
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = callListFiles(ctx, cs)
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != client.URLElicitationRequiredCode {
		t.Fatalf("first call: %v, want URLElicitationRequiredError", err)
	}
	var data client.URLElicitationData
	if err := json.Unmarshal(rpcErr.Data, &data); err != nil || len(data.Elicitations) != 1 {
		t.Fatalf("error data: %s", rpcErr.Data)
	}
	e := data.Elicitations[0]
	if e.Mode != "url" || e.ElicitationID == "" || e.URL != w.connectd.URL+"/c/"+e.ElicitationID || e.Message == "" {
		t.Fatalf("elicitation in the error: %+v", e)
	}
	if err := w.browser().connect(e.URL, "alice"); err != nil {
		t.Fatal(err)
	}
	if id := wait(t, completed, "notifications/elicitation/complete"); id != e.ElicitationID {
		t.Fatalf("completion for %q, want %q", id, e.ElicitationID)
	}
	res, err := callListFiles(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, res)
}

// TestFallbackWithoutURLMode: an MCP client that did not declare URL-mode
// elicitation (2025-11-25 declaring form mode only, 2026-07-28 declaring no
// elicitation at all) is never sent an elicitation; the tool answers with a
// result that gives the link in plain words. After the user connects in the
// browser, the next call gets the files.
func TestFallbackWithoutURLMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		protocol string
		caps     *mcp.ClientCapabilities
	}{
		{client.ProtocolVersion20251125, &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}},
		{client.ProtocolVersion20260728, &mcp.ClientCapabilities{}},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, mcpserver.LegacyElicit)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cs, rec, err := w.connect(ctx, "alice", tc.protocol, mcp.ClientOptions{Capabilities: tc.caps})
			if err != nil {
				t.Fatal(err)
			}
			link := w.fallbackLink(ctx, cs)
			if err := w.browser().connect(link, "alice"); err != nil {
				t.Fatal(err)
			}
			res, err := callListFiles(ctx, cs)
			if err != nil {
				t.Fatal(err)
			}
			checkFiles(t, res)
			got := rec.String()
			for _, never := range []string{`"elicitation/create"`, `-32042`, `"inputRequests"`, `"mode":"url"`} {
				if strings.Contains(got, never) {
					t.Errorf("the wire carries %s to a client without URL mode", never)
				}
			}
		})
	}
}

var connectLink = regexp.MustCompile(`https://\S+/c/[A-Za-z0-9_-]+`)

// fallbackLink calls list_files and returns the connect link of the
// fallback tool result it must answer.
func (w *world) fallbackLink(ctx context.Context, cs *mcp.ClientSession) string {
	w.t.Helper()
	res, err := callListFiles(ctx, cs)
	if err != nil {
		w.t.Fatal(err)
	}
	if !res.IsError || len(res.Content) != 1 {
		w.t.Fatalf("want the fallback result, got %+v", res.Content)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	link := connectLink.FindString(text)
	if !strings.HasPrefix(link, w.connectd.URL+"/c/") || !strings.Contains(text, "Open it in your browser") ||
		!strings.Contains(text, "try again") {
		w.t.Fatalf("fallback result: %q", text)
	}
	return link
}

// TestRetryWhilePendingGetsTheSameLink: a client that calls again before the
// user has finished in the browser is held for RetryWait and then given the
// same link, not a new one; a call held while the user finishes gets the
// files. (Shown with the fallback, whose every answer carries the link.)
func TestRetryWhilePendingGetsTheSameLink(t *testing.T) {
	t.Parallel()
	w := newWorld(t, mcpserver.LegacyElicit)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, _, err := w.connect(ctx, "alice", client.ProtocolVersion20251125,
		mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	if err != nil {
		t.Fatal(err)
	}
	first := w.fallbackLink(ctx, cs)
	if again := w.fallbackLink(ctx, cs); again != first {
		t.Fatalf("a retry while pending got a new link:\n%s\nwant\n%s", again, first)
	}

	// The user opens the link and signs in; a third call, held on
	// connectd's long-poll, is answered once they click Allow. (The sign-in
	// comes first so that only the Allow round trip falls in the held call's
	// RetryWait.)
	b := w.browser()
	status, page, err := b.open(first, "alice")
	if err != nil || status != http.StatusOK {
		t.Fatalf("opening the link: %d %v", status, err)
	}
	form, ok := flowtest.AllowForm(page)
	if !ok {
		t.Fatal("no consent form")
	}
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	held := make(chan answer, 1)
	go func() {
		res, err := callListFiles(ctx, cs)
		held <- answer{res, err}
	}()
	time.Sleep(200 * time.Millisecond) // let the call reach its wait; if it is slower, it finds the connection instead
	select {
	case a := <-held:
		t.Fatalf("the retried call answered before the user finished: %+v %v", a.res, a.err)
	default:
	}
	if r, err := b.b.Follow(http.MethodPost, first, form); err != nil || !strings.Contains(r.Body, "Connected") {
		t.Fatalf("after Allow: %v", err)
	}
	a := wait(t, held, "the held call")
	if a.err != nil {
		t.Fatal(a.err)
	}
	checkFiles(t, a.res)
}

// TestDeclinedInTheClientThenAskedAgain: the user declines opening the link
// in the MCP client (2025-11-25 elicitation/create answered "decline"); the
// server ends that link at connectd (DELETE /v1/elicitations/{id}), so the
// next call is asked at once with a new link rather than held on the
// declined one — and connecting through it gets the files.
func TestDeclinedInTheClientThenAskedAgain(t *testing.T) {
	t.Parallel()
	w := newWorld(t, mcpserver.LegacyElicit)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var urls []string
	browsed := make(chan error, 2)
	cs, _, err := w.connect(ctx, "alice", client.ProtocolVersion20251125, mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			urls = append(urls, r.Params.URL)
			if len(urls) == 1 {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			go func() { browsed <- w.browser().connect(r.Params.URL, "alice") }()
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := callListFiles(ctx, cs)
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "declined") {
		t.Fatalf("first call: %+v %v", res, err)
	}
	res, err = callListFiles(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, res)
	if err := wait(t, browsed, "the browser"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(urls) != 2 || urls[0] == urls[1] {
		t.Fatalf("links asked: %v; want a new one after the decline", urls)
	}
}

// TestOtherUserOpeningTheLinkIsRefused: alice's connect link, opened by bob
// (signed in as himself), is refused by connectd without revealing whose it
// was, the provider is never contacted, and alice's declined call shares
// nothing. The MCP server also refuses a token issued for another MCP server.
func TestOtherUserOpeningTheLinkIsRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, mcpserver.LegacyElicit)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	type page struct {
		status int
		body   string
		err    error
	}
	seen := make(chan page, 4)
	cs, _, err := w.connect(ctx, "alice", client.ProtocolVersion20260728, mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			// The attacker forwards alice's link to bob.
			status, body, err := w.browser().open(r.Params.URL, "bob")
			seen <- page{status, body, err}
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := callListFiles(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "declined") {
		t.Fatalf("declined call: %s", res.Content[0].(*mcp.TextContent).Text)
	}
	p := wait(t, seen, "bob's page")
	if p.err != nil {
		t.Fatal(p.err)
	}
	if p.status != http.StatusForbidden || !strings.Contains(p.body, "created for another account") ||
		strings.Contains(p.body, "alice") || strings.Contains(p.body, `name="decision"`) {
		t.Fatalf("bob got %d: %s", p.status, p.body)
	}
	if n := w.files.Counts().Authorize; n != 0 {
		t.Fatalf("the provider was asked to authorize %d times", n)
	}
	for _, user := range []string{"alice", "bob"} {
		if _, err := w.cd.Token(ctx, w.token(user, w.mcpURL), providerName); !errors.Is(err, client.ErrNotConnected) {
			t.Fatalf("%s's token lookup: %v, want not connected", user, err)
		}
	}

	// No token passthrough: a token for another MCP server does not open a
	// session here.
	req, _ := http.NewRequest(http.MethodPost, w.mcpURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+w.token("alice", "https://other.mcp.example/mcp"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := w.tls.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "resource_metadata=") {
		t.Fatalf("token for another audience: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}

// TestHeldRetryAnswersInsideTheClientsPatience: a 2026-07-28 retry whose link
// is still pending is held for RetryHold, then answered the same link with a
// fresh requestState — well inside what an MCP client waits. And a retry the
// client gave up on (its answer, with the fresh state, never delivered: the
// echoed state is spent at connectd) does not strand the user: echoing the
// spent state again starts the call over and gets the same link, and after the
// user connects the files.
// The TypeScript example (--retry-hold) is held to the same.
func TestHeldRetryAnswersInsideTheClientsPatience(t *testing.T) {
	t.Parallel()
	const hold = 2 * time.Second
	for _, server := range []string{"go", "typescript"} {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			w := newWorldWith(t, worldOptions{legacy: mcpserver.LegacyElicit,
				set: func(c *mcpserver.Config) { c.RetryHold = hold }})
			if server == "typescript" {
				w.startTSServer("elicit", "--retry-hold", fmt.Sprint(int(hold/time.Second)))
			}
			heldRetry(t, w, hold)
		})
	}
}

func heldRetry(t *testing.T, w *world, hold time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, rec, err := w.connect(ctx, "alice", client.ProtocolVersion20260728,
		mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	key := client.InputKey(providerName)
	retry := func(ctx context.Context, state string) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_files", Arguments: map[string]any{},
			InputResponses: mcp.InputResponseMap{key: &mcp.ElicitResult{Action: "accept"}}, RequestState: state})
	}
	// linkOf checks res is an InputRequiredResult and returns its link and state.
	linkOf := func(res *mcp.CallToolResult, err error) (string, string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		p, ok := res.InputRequests[key].(*mcp.ElicitParams)
		if !res.NeedsInput() || !ok || p.Mode != "url" || res.RequestState == "" {
			t.Fatalf("want an InputRequiredResult, got %+v", res)
		}
		return p.URL, res.RequestState
	}
	link, spent := linkOf(callListFiles(ctx, cs))

	// The client gives up on the retry before the server answers.
	short, cancelShort := context.WithTimeout(ctx, hold/2)
	_, err = retry(short, spent)
	cancelShort()
	if err == nil {
		t.Fatal("the retry answered before the hold ended")
	}

	// Its next retry echoes the spent state: the call starts over, held on
	// the pending link for RetryWait, and gets the same link again.
	start := time.Now()
	again, fresh := linkOf(retry(ctx, spent))
	if took := time.Since(start); again != link || took > retryWait+5*time.Second {
		t.Fatalf("after a spent state: %s in %v, want %s within %v", again, took, link, retryWait)
	}

	// A held retry of a pending state answers after RetryHold.
	start = time.Now()
	again, fresh = linkOf(retry(ctx, fresh))
	if took := time.Since(start); again != link || took < hold || took > hold+3*time.Second {
		t.Fatalf("held retry: %s in %v, want %s after about %v", again, took, link, hold)
	}

	if err := w.browser().connect(link, "alice"); err != nil {
		t.Fatal(err)
	}
	res, err := retry(ctx, fresh)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, res)
	if strings.Contains(rec.String(), `"content":null`) {
		t.Error(`an InputRequiredResult carries "content": null`)
	}
}
