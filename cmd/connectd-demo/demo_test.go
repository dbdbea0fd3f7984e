package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connectd/connectd/client"
	"github.com/connectd/connectd/examples/mcp-server/devtoken"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/flowtest"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/testkit"
)

// binDir holds the connectd binary the tests build; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// connectdBinary builds cmd/connectd once for every test of this package:
// the demo runs the real binary.
var connectdBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "connectd-demo-test-")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "connectd")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/connectd/connectd/cmd/connectd").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/connectd: %v\n%s", err, out)
	}
	return bin, nil
})

// demoRun is one connectd-demo started through run (runDemo).
type demoRun struct {
	out, logs *testkit.LogBuffer
	done      chan error
	stop      context.CancelFunc
	files     *providertest.Server // Demo Files, for its records
}

// demoPorts is how many ports a demo run takes: connectd, the identity
// provider, Demo Files, the two example MCP servers, the operators'
// listener, the webhook receiver.
const demoPorts = 7

func startDemo(t *testing.T, dbURL, stateDir string, ports []int, extra ...string) *demoRun {
	return startDemoEnv(t, dbURL, stateDir, ports, nil, extra...)
}

// startDemoEnv is startDemo with more environment variables.
func startDemoEnv(t *testing.T, dbURL, stateDir string, ports []int, moreEnv []string, extra ...string) *demoRun {
	t.Helper()
	bin, err := connectdBinary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &demoRun{out: &testkit.LogBuffer{}, logs: &testkit.LogBuffer{}, done: make(chan error, 1), stop: cancel}
	args := []string{"-connectd", bin, "-port", strconv.Itoa(ports[0]), "-idp-port", strconv.Itoa(ports[1]),
		"-provider-port", strconv.Itoa(ports[2]), "-mcp-port", strconv.Itoa(ports[3]),
		"-internal-addr", "127.0.0.1:" + strconv.Itoa(ports[4]), "-mcp2-port", strconv.Itoa(ports[5]),
		"-webhook-port", strconv.Itoa(ports[6]), "-state-dir", stateDir}
	args = append(args, extra...)
	env := append([]string{"CONNECTD_DATABASE_URL=" + dbURL, "CONNECTD_LOG_FORMAT=json"}, moreEnv...)
	filesc := make(chan *providertest.Server, 1)
	go func() { d.done <- runDemo(ctx, args, env, d.out, d.logs, func(f *providertest.Server) { filesc <- f }) }()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(d.out.String(), "forgets them all, with the database") {
		select {
		case err := <-d.done:
			t.Fatalf("demo exited: %v\n%s", err, d.logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no walkthrough:\n%s", d.logs.String())
		}
	}
	d.files = <-filesc // given before the walkthrough is printed
	return d
}

// shutdown stops the demo like Ctrl-C and checks that every port is free
// again: nothing is left running.
func (d *demoRun) shutdown(t *testing.T, ports []int) {
	t.Helper()
	d.stop()
	select {
	case err := <-d.done:
		if err != nil {
			t.Fatalf("demo ended with %v\n%s", err, d.logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("demo did not stop")
	}
	for _, p := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d still in use after the demo stopped: %v", p, err)
		}
		ln.Close()
	}
}

// demoBrowser opens a connect link in a fresh browser (flowtest's, following
// redirects), signs in as user at the demo's identity provider, and (allow)
// clicks Allow.
func demoBrowser(connectURL, user string, allow bool) (int, string, error) {
	return demoBrowserAs(connectURL, user, allow, "")
}

// demoBrowserAs is demoBrowser that, when Demo Files shows its account
// chooser after Allow, picks account there (its subject); with account
// empty the chooser is where it stops.
func demoBrowserAs(connectURL, user string, allow bool, account string) (int, string, error) {
	_, r, err := demoBrowse(connectURL, user, allow, account)
	return r.Status, r.Body, err
}

// demoBrowse is demoBrowserAs returning the pages: the consent page (the
// page after sign-in) and the last one.
func demoBrowse(connectURL, user string, allow bool, account string) (consent, last flowtest.Response, err error) {
	b := flowtest.New(&http.Client{Timeout: 10 * time.Second})
	r, err := b.Follow(http.MethodGet, connectURL, nil)
	if err != nil {
		return r, r, err
	}
	picker, err := url.Parse(r.URL)
	if err != nil {
		return r, r, err
	}
	form := picker.Query()
	form.Set("user", user)
	picker.RawQuery = ""
	if r, err = b.Follow(http.MethodPost, picker.String(), form); err != nil {
		return r, r, err
	}
	consent = r
	if !allow || r.Status != http.StatusOK {
		return consent, r, nil
	}
	form, ok := flowtest.AllowForm(r.Body)
	if !ok {
		return consent, r, fmt.Errorf("no consent form: %s", r.Body)
	}
	if r, err = b.Follow(http.MethodPost, connectURL, form); err != nil {
		return consent, r, err
	}
	if account != "" {
		form, ok := providertest.ChooserForm(r.Body, account)
		if !ok {
			return consent, r, fmt.Errorf("no Demo Files account chooser offering %s: %d %s\n%s", account, r.Status, r.URL, r.Body)
		}
		chooser, err := url.Parse(r.URL)
		if err != nil {
			return consent, r, err
		}
		chooser.RawQuery = ""
		if r, err = b.Follow(http.MethodPost, chooser.String(), form); err != nil {
			return consent, r, err
		}
	}
	return consent, r, nil
}

// TestDemo runs connectd-demo as make demo does and follows its
// walkthrough with the SDK's MCP client: the example MCP server is
// registered proxy-only; alice's tool call yields a connect link, bob
// opening it is refused, alice connecting it gets her files (through
// connectd's proxy: the token read is refused to a proxy-only client); the
// demo stops cleanly, and starts again on the same database with
// -credential token, which switches the client off proxy-only and has the
// example read tokens. The walkthrough names this run's (moved) ports; a
// webhook endpoint registered with connectd-demo clients while it runs
// still gets deliveries that verify after the restart (the demo keeps its
// keys), and alice's connection still works then (and Demo Files' tokens).
func TestDemo(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.EmptyURL(t) // the demo migrates it
	stateDir := t.TempDir()
	ports, err := testkit.FreePorts(demoPorts)
	if err != nil {
		t.Fatal(err)
	}
	// A webhook receiver, which connectd (dev mode) may reach because the
	// demo's egress allow-list gets its address from the environment.
	type delivery struct {
		header http.Header
		body   []byte
		at     time.Time
	}
	var mu sync.Mutex
	var deliveries []delivery
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		deliveries = append(deliveries, delivery{r.Header.Clone(), body, time.Now()})
		mu.Unlock()
	}))
	defer rcv.Close()
	rcvEnv := []string{"CONNECTD_EGRESS_ALLOW_HOSTS=" + strings.TrimPrefix(rcv.URL, "http://")}
	d := startDemoEnv(t, dbURL, stateDir, ports, rcvEnv)
	idpURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	mcpURL := fmt.Sprintf("http://127.0.0.1:%d/mcp", ports[3])
	for _, want := range []string{fmt.Sprintf("http://127.0.0.1:%d ", ports[0]), idpURL, mcpURL, "as bob",
		"registered proxy-only", `DEMO_FLAGS="-credential token"`, "connectd clients proxy-only cli_",
		fmt.Sprintf("go run ./examples/mcp-server/cmd/try -idp %s -mcp %s -user alice\n", idpURL, mcpURL),
		fmt.Sprintf("TOKEN=$(go run ./examples/mcp-server/cmd/try -idp %s -mcp %s -user alice -token-only)", idpURL, mcpURL),
		"go run ./cmd/connectd-demo -state-dir " + stateDir + " clients create --name",
		fmt.Sprintf("go run ./examples/mcp-server/cmd/try -idp %s -user alice -mcp http://127.0.0.1:%d/mcp", idpURL, ports[3]+10)} {
		if !strings.Contains(d.out.String(), want) {
			t.Errorf("walkthrough lacks %q:\n%s", want, d.out.String())
		}
	}
	for _, p := range []string{"8080", "8081", "8082", "8083", "8084"} {
		if !slices.Contains(ports, mustAtoi(p)) && strings.Contains(d.out.String(), "127.0.0.1:"+p) {
			t.Errorf("walkthrough names port %s, which this run does not use:\n%s", p, d.out.String())
		}
	}
	for _, f := range []string{"vault-keys", "session-keys", "connectd.env"} {
		if st, err := os.Stat(filepath.Join(stateDir, f)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, st, err)
		}
	}
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	clients := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool, AllowHTTP: true})
	if c := demoClient(t, clients); !c.ProxyOnly || !strings.Contains(d.out.String(), "proxy-only "+c.ID+" --off") {
		t.Fatalf("the demo's client %s: proxy-only %v, want true, named in the walkthrough", c.ID, c.ProxyOnly)
	}
	// The providers file names the secret by reference only.
	pf, err := os.ReadFile(filepath.Join(stateDir, "providers.json"))
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(stateDir, "providers.json")); st.Mode().Perm() != 0o600 ||
		!strings.Contains(string(pf), `"client_secret_env": "CONNECTD_DEMO_FILES_SECRET"`) || strings.Contains(string(pf), `"client_secret":`) {
		t.Fatalf("providers file (%v):\n%s", st.Mode(), pf)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	call := func(user string, handler func(*mcp.ElicitParams) string) (*mcp.CallToolResult, error) {
		tok, err := devtoken.Get(ctx, devtoken.Request{Issuer: idpURL, User: user, Resource: mcpURL})
		if err != nil {
			return nil, err
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "1"}, &mcp.ClientOptions{
			Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
			ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: handler(r.Params)}, nil
			},
		})
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: mcpURL,
			HTTPClient: &http.Client{Transport: bearerRT(tok)}}, nil)
		if err != nil {
			return nil, err
		}
		defer cs.Close()
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_files", Arguments: map[string]any{}})
	}

	browsed := make(chan error, 2)
	res, err := call("alice", func(p *mcp.ElicitParams) string {
		go func() {
			// Bob first: refused. Then alice connects.
			if st, body, err := demoBrowser(p.URL, "bob", false); err != nil || st != http.StatusForbidden ||
				!strings.Contains(body, "created for another account") {
				browsed <- fmt.Errorf("bob opening alice's link: %d %v", st, err)
				return
			}
			st, body, err := demoBrowser(p.URL, "alice", true)
			if err == nil && (st != http.StatusOK || !strings.Contains(body, "Connected")) {
				err = fmt.Errorf("alice connecting: %d", st)
			}
			browsed <- err
		}()
		return "accept"
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-browsed; err != nil {
		t.Fatal(err)
	}
	if res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "notes.txt") {
		t.Fatalf("list_files: %+v", res.Content)
	}

	// Walkthrough step 4: alice's account page lists the connection and the
	// example MCP server allowed to use it.
	cdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	aliceB := flowtest.New(&http.Client{Timeout: 10 * time.Second})
	page := signInAt(t, aliceB, cdURL+"/account", "alice")
	for _, want := range []string{"Connected accounts", "Demo Files", "Files Assistant", "files.read", "Remove access"} {
		if !strings.Contains(page.Body, want) {
			t.Fatalf("alice's account page lacks %q:\n%s", want, page.Body)
		}
	}

	// Step 5: the admin signs in at /admin, finds alice's connection and its
	// audit trail, and revokes it; alice's next call asks her to connect.
	adminB := flowtest.New(&http.Client{Timeout: 10 * time.Second})
	page = signInAt(t, adminB, cdURL+"/admin", "admin")
	conn := regexp.MustCompile(`href="(/admin/connections/cn_[a-z0-9]+)">alice<`).FindStringSubmatch(page.Body)
	if conn == nil {
		t.Fatalf("the admin's connection list does not link alice's connection:\n%s", page.Body)
	}
	page = follow(t, adminB, http.MethodGet, cdURL+conn[1], nil)
	if !strings.Contains(page.Body, "connection.created") && !strings.Contains(page.Body, "consent.granted") {
		t.Fatalf("alice's connection page shows no audit trail:\n%s", page.Body)
	}
	page = follow(t, adminB, http.MethodGet, cdURL+conn[1]+"/revoke", nil)
	form := url.Values{"csrf_token": {formValue(t, page.Body, "csrf_token")}, "confirm": {formValue(t, page.Body, "confirm")}}
	page = follow(t, adminB, http.MethodPost, cdURL+conn[1]+"/revoke", form)
	if !strings.Contains(page.Body, "Revoked") {
		t.Fatalf("revoke: %d\n%s", page.Status, page.Body)
	}
	var askedAgain bool
	res, err = call("alice", func(p *mcp.ElicitParams) string {
		askedAgain = true
		go func() { _, _, err := demoBrowser(p.URL, "alice", true); browsed <- err }()
		return "accept"
	})
	if err != nil || !askedAgain || res.IsError {
		t.Fatalf("after the admin revoked: asked=%v %v %+v", askedAgain, err, res)
	}
	if err := <-browsed; err != nil {
		t.Fatal(err)
	}
	// A webhook endpoint for the example MCP server, registered as the
	// walkthrough says, while the demo runs.
	var whOut bytes.Buffer
	if err := run(ctx, []string{"-state-dir", stateDir, "clients", "webhooks", "add", "--client", demoClient(t, clients).ID,
		"--url", rcv.URL + "/hooks"}, nil, &whOut, io.Discard); err != nil {
		t.Fatalf("connectd-demo clients webhooks add: %v\n%s", err, whOut.String())
	}
	secret := regexp.MustCompile(`secret: (whsec_\S+)`).FindStringSubmatch(whOut.String())
	if secret == nil {
		t.Fatalf("webhooks add printed no secret:\n%s", whOut.String())
	}
	d.shutdown(t, ports)

	// Again on the same database, in token mode: the client registration
	// is reused with a new key and is proxy-only no more; alice's
	// connection (sealed under the kept key, its tokens known to Demo Files,
	// which kept them too) still works: her files without a link.
	restarted := time.Now()
	d = startDemoEnv(t, dbURL, stateDir, ports, rcvEnv, "-credential", "token")
	defer d.shutdown(t, ports)
	if c := demoClient(t, clients); c.ProxyOnly || !strings.Contains(d.out.String(), "-credential token") {
		t.Fatalf("with -credential token the demo's client %s is proxy-only: %v", c.ID, c.ProxyOnly)
	}
	var asked bool
	res, err = call("alice", func(*mcp.ElicitParams) string { asked = true; return "decline" })
	if err != nil || asked || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "notes.txt") {
		t.Fatalf("after a restart: asked=%v %v %+v", asked, err, res)
	}
	if strings.Contains(d.logs.String(), `"connection needed: elicitation minted"`) {
		t.Fatalf("an elicitation was minted after the restart:\n%s", d.logs.String())
	}

	// The walkthrough's client without URL mode: try -no-url prints the
	// fallback's link, bob connects in the browser, and try's next call
	// (held by the server while the link is pending) prints his files.
	try := exec.CommandContext(ctx, "go", "run", "github.com/connectd/connectd/examples/mcp-server/cmd/try",
		"-user", "bob", "-no-url", "-idp", idpURL, "-mcp", mcpURL, "-tool", "list_files", "-args", "{}")
	out := &testkit.LogBuffer{}
	try.Stdout, try.Stderr = out, out
	if err := try.Start(); err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`http://\S+/c/[A-Za-z0-9_-]+`)
	for link.FindString(out.String()) == "" {
		if ctx.Err() != nil {
			t.Fatalf("try -no-url printed no link:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, body, err := demoBrowser(link.FindString(out.String()), "bob", true); err != nil || st != http.StatusOK ||
		!strings.Contains(body, "Connected") {
		t.Fatalf("bob connecting: %d %v", st, err)
	}
	if err := try.Wait(); err != nil || !strings.Contains(out.String(), "notes.txt") ||
		!strings.Contains(out.String(), "this is what the model sees") {
		t.Fatalf("try -no-url: %v\n%s", err, out.String())
	}
	// bob's new connection is news for the example MCP server: delivered
	// after the restart, signed with the secret shown before it.
	for {
		mu.Lock()
		var after []delivery
		for _, dl := range deliveries {
			if dl.at.After(restarted) {
				after = append(after, dl)
			}
		}
		mu.Unlock()
		if len(after) > 0 {
			for _, dl := range after {
				if _, err := client.VerifyWebhook(secret[1], dl.header, dl.body, time.Now()); err != nil {
					t.Fatalf("a delivery after the restart does not verify with the secret from before it: %v\n%s", err, dl.body)
				}
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no webhook delivery after the restart (%d before)", len(deliveries))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The demo's own receiver (issue 38 item 7: webhooks could not be
	// tried in the demo), registered anew at each start, prints bob's
	// events with their signature verified, and nothing it refused.
	if !strings.Contains(d.out.String(), fmt.Sprintf("the demo's receiver at http://127.0.0.1:%d/webhooks", ports[6])) {
		t.Fatalf("the walkthrough does not name the demo's webhook receiver:\n%s", d.out.String())
	}
	for !strings.Contains(d.logs.String(), `"msg":"webhook received, signature verified"`) {
		if ctx.Err() != nil {
			t.Fatalf("the demo's webhook receiver printed no verified event:\n%s", d.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if strings.Contains(d.logs.String(), "webhook refused") {
		t.Fatalf("the demo's receiver refused a delivery:\n%s", d.logs.String())
	}
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

// demoClient is the demo's registration of the example MCP server.
func demoClient(t *testing.T, clients *clientauth.Clients) clientauth.Client {
	t.Helper()
	list, err := clients.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if c.Name == demoClientName {
			return c
		}
	}
	t.Fatalf("no client %q in the demo's database", demoClientName)
	panic("unreachable")
}

// signInAt opens u in b, answers the demo identity provider's picker as
// user, and returns the page b lands on.
func signInAt(t *testing.T, b *flowtest.Browser, u, user string) flowtest.Response {
	t.Helper()
	r := follow(t, b, http.MethodGet, u, nil)
	if m := regexp.MustCompile(`<a class="button" href="([^"]+)">Sign in as an administrator`).FindStringSubmatch(r.Body); m != nil {
		// A 403 page with a sign-in button (an admin page a signed-in non-admin
		// asks for); an anonymous browser is sent straight to the sign-in.
		base, _ := url.Parse(r.URL)
		next, _ := base.Parse(html.UnescapeString(m[1]))
		r = follow(t, b, http.MethodGet, next.String(), nil)
	}
	picker, err := url.Parse(r.URL)
	if err != nil || !strings.Contains(r.Body, `value="`+user+`"`) {
		t.Fatalf("%s did not lead to the sign-in picker: %d %s", u, r.Status, r.URL)
	}
	form := picker.Query()
	form.Set("user", user)
	picker.RawQuery = ""
	r = follow(t, b, http.MethodPost, picker.String(), form)
	if r.Status != http.StatusOK {
		t.Fatalf("signed in as %s at %s: %d\n%s", user, r.URL, r.Status, r.Body)
	}
	return r
}

func follow(t *testing.T, b *flowtest.Browser, method, u string, form url.Values) flowtest.Response {
	t.Helper()
	r, err := b.Follow(method, u, form)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// formValue is the value of the hidden input name in page.
func formValue(t *testing.T, page, name string) string {
	t.Helper()
	m := regexp.MustCompile(`name="` + name + `" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no %s in the form:\n%s", name, page)
	}
	return m[1]
}

type bearerRT string

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// TestHelp: -h prints the demo's usage and flags on stdout, nothing on
// stderr, and is no error (exit 0); a wrong flag is a usage error (exit 2)
// with the usage on stderr. No database is needed for either.
func TestHelp(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, nil, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v, want flag.ErrHelp (exit 0)", err)
	}
	if !strings.Contains(stdout.String(), "-idp-port") || stderr.Len() != 0 {
		t.Fatalf("-h: stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	stdout.Reset()
	err := run(context.Background(), []string{"-x"}, nil, &stdout, &stderr)
	var u *usageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "not defined") {
		t.Errorf("-x: %v, want a usage error (exit 2)", err)
	}
	if stdout.Len() != 0 || !strings.Contains(stderr.String(), "usage") {
		t.Errorf("-x: stdout %q, stderr %q; want the usage on stderr only", stdout.String(), stderr.String())
	}
}

// tryBinary builds the walkthrough's MCP client (examples/mcp-server/cmd/try)
// once, next to the connectd binary.
var tryBinary = sync.OnceValues(func() (string, error) {
	if _, err := connectdBinary(); err != nil {
		return "", err
	}
	bin := filepath.Join(binDir, "try")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/connectd/connectd/examples/mcp-server/cmd/try").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./examples/mcp-server/cmd/try: %v\n%s", err, out)
	}
	return bin, nil
})

// tryRun is one run of try against the demo.
type tryRun struct {
	cmd   *exec.Cmd
	out   *testkit.LogBuffer
	stdin io.WriteCloser
	done  chan struct{} // closed when try has exited, with err
	err   error
}

func startTry(t *testing.T, ctx context.Context, idpURL, mcpURL string, args ...string) *tryRun {
	t.Helper()
	bin, err := tryBinary()
	if err != nil {
		t.Fatal(err)
	}
	r := &tryRun{cmd: exec.CommandContext(ctx, bin, append([]string{"-idp", idpURL, "-mcp", mcpURL}, args...)...),
		out: &testkit.LogBuffer{}, done: make(chan struct{})}
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.err = r.cmd.Wait(); close(r.done) }()
	return r
}

// await waits until try's output matches re, and returns the match.
func (r *tryRun) await(t *testing.T, ctx context.Context, re *regexp.Regexp) []string {
	t.Helper()
	for {
		if m := re.FindStringSubmatch(r.out.String()); m != nil {
			return m
		}
		select {
		case <-r.done:
			if m := re.FindStringSubmatch(r.out.String()); m != nil {
				return m
			}
			t.Fatalf("try exited (%v) without printing %s:\n%s", r.err, re, r.out.String())
		case <-ctx.Done():
			t.Fatalf("try printed no %s in time:\n%s", re, r.out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// finish waits for try to end well with want in its output.
func (r *tryRun) finish(t *testing.T, want string) {
	t.Helper()
	r.stdin.Close()
	<-r.done // the test's context kills it at the latest
	if r.err != nil || !strings.Contains(r.out.String(), want) {
		t.Fatalf("try: %v, want %q in:\n%s", r.err, want, r.out.String())
	}
}

var connectLink = regexp.MustCompile(`http://\S+/c/[A-Za-z0-9_-]+`)

// TestDemoSeveralAccounts: alice has two Demo Files accounts, "Work files"
// and "Home files". She connects the first through the example MCP server
// (try): Demo Files approves at once as the account it is signed in with. An
// application that asks connectd for another of her accounts (account
// "new") gets her to Demo Files' account chooser, where she picks "Home
// files": that application's connection list and token name it so, and
// alice's account page shows both accounts. Once she allows the example
// server that account too (try -account), try without -account is asked
// which account (account_required, a form), lists both, and gets the files
// of the one chosen.
func TestDemoSeveralAccounts(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.EmptyURL(t)
	ports, err := testkit.FreePorts(demoPorts)
	if err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	d := startDemo(t, dbURL, stateDir, ports)
	defer d.shutdown(t, ports)
	cdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	idpURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	mcpURL := fmt.Sprintf("http://127.0.0.1:%d/mcp", ports[3])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The first account, through try: no chooser at Demo Files.
	try := startTry(t, ctx, idpURL, mcpURL, "-user", "alice")
	link := try.await(t, ctx, connectLink)[0]
	if st, body, err := demoBrowser(link, "alice", true); err != nil || st != http.StatusOK || !strings.Contains(body, "Connected") {
		t.Fatalf("alice connecting her first account: %d %v\n%s", st, err, body)
	}
	try.finish(t, "files for work-account")

	// Another application, registered at connectd for Demo Files while the
	// demo runs, with the command the walkthrough prints (connectd-demo
	// clients create), asks for another of alice's accounts.
	otherResource := fmt.Sprintf("http://127.0.0.1:%d/other-app", ports[3])
	var reg, regErr bytes.Buffer
	if err := run(ctx, []string{"-state-dir", stateDir, "clients", "create", "--name", "Another application",
		"--resource", otherResource, "--provider", demoProvider}, nil, &reg, &regErr); err != nil {
		t.Fatalf("connectd-demo clients create: %v\n%s%s", err, reg.String(), regErr.String())
	}
	if strings.Contains(regErr.String(), "warning") {
		t.Errorf("clients create warns about the demo's own provider:\n%s", regErr.String())
	}
	key := regexp.MustCompile(`key: (cks_\S+)`).FindStringSubmatch(reg.String())
	if key == nil {
		t.Fatalf("clients create printed no key:\n%s", reg.String())
	}
	other, err := client.New(client.Config{BaseURL: cdURL, Key: key[1], AllowHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	aliceTok, err := devtoken.Get(ctx, devtoken.Request{Issuer: idpURL, User: "alice", Resource: otherResource})
	if err != nil {
		t.Fatal(err)
	}
	el, err := other.Mint(ctx, aliceTok, client.MintRequest{Provider: demoProvider, Scopes: []string{demoScope},
		Account: client.AccountNew})
	if err != nil {
		t.Fatal(err)
	}
	// Allow leads to Demo Files' chooser, which offers both accounts.
	if st, body, err := demoBrowser(el.URL, "alice", true); err != nil || st != http.StatusOK ||
		!strings.Contains(body, "Work files") || !strings.Contains(body, "Home files") {
		t.Fatalf("no account chooser at Demo Files for another account: %d %v\n%s", st, err, body)
	}
	el, err = other.Mint(ctx, aliceTok, client.MintRequest{Provider: demoProvider, Scopes: []string{demoScope},
		Account: client.AccountNew})
	if err != nil {
		t.Fatal(err)
	}
	if st, body, err := demoBrowserAs(el.URL, "alice", true, "home-account"); err != nil || st != http.StatusOK ||
		!strings.Contains(body, "Connected") {
		t.Fatalf("alice connecting her second account: %d %v\n%s", st, err, body)
	}
	// As an MCP server does, hear of the completion before reading the token
	// (connectd's consent cache learns of the new approval first).
	if st, err := other.Wait(ctx, aliceTok, el.ID); err != nil || st.Status != client.StatusCompleted {
		t.Fatalf("the other application's elicitation: %v %+v", err, st)
	}

	// The other application sees the one it was allowed, named by Demo
	// Files' label; alice's account page shows both, and who may use which.
	conns, err := other.Connections(ctx, aliceTok)
	if err != nil {
		t.Fatal(err)
	}
	if len(conns) != 1 || conns[0].Provider != demoProvider || conns[0].DisplayName != "Home files" {
		t.Fatalf("the other application's connections: %+v", conns)
	}
	home := conns[0].ID
	tok, err := other.AccountToken(ctx, aliceTok, demoProvider, "", demoScope)
	if err != nil || tok.Account.ID != home || tok.Account.DisplayName != "Home files" {
		t.Fatalf("the other application's token: %v %+v", err, tok)
	}
	page := signInAt(t, flowtest.New(&http.Client{Timeout: 10 * time.Second}), cdURL+"/account", "alice")
	for _, want := range []string{"Work files", "Home files", "Files Assistant", "Another application"} {
		if !strings.Contains(page.Body, want) {
			t.Fatalf("alice's account page lacks %q:\n%s", want, page.Body)
		}
	}

	// The example server may use only the first; try -account names the
	// second, and alice allows it (no new sign-in at Demo Files).
	try = startTry(t, ctx, idpURL, mcpURL, "-user", "alice", "-account", home)
	link = try.await(t, ctx, connectLink)[0]
	if st, body, err := demoBrowser(link, "alice", true); err != nil || st != http.StatusOK || !strings.Contains(body, "Connected") {
		t.Fatalf("alice allowing her second account: %d %v\n%s", st, err, body)
	}
	try.finish(t, "files for home-account")

	// Now try without -account is asked which, and lists both.
	for _, pick := range []struct{ name, owner string }{{"Home files", "home-account"}, {"Work files", "work-account"}} {
		try = startTry(t, ctx, idpURL, mcpURL, "-user", "alice")
		try.await(t, ctx, regexp.MustCompile(`Type its number`))
		n := try.await(t, ctx, regexp.MustCompile(`(\d)\. `+pick.name))[1]
		if !strings.Contains(try.out.String(), "Work files") || !strings.Contains(try.out.String(), "Home files") {
			t.Fatalf("try's account form does not list both accounts:\n%s", try.out.String())
		}
		if _, err := io.WriteString(try.stdin, n+"\n"); err != nil {
			t.Fatal(err)
		}
		try.finish(t, "files for "+pick.owner)
		if connectLink.MatchString(try.out.String()) {
			t.Fatalf("try asked to connect again:\n%s", try.out.String())
		}
	}
}

// TestDemoTwoOrganizations is the walkthrough's "Two organizations": the
// demo sets up globex with connectd orgs (its name, brand colour and own
// Demo Files app), and runs a second example MCP server registered in it.
// alice connects Demo Files through the default organization's server
// (the deployment's app at Demo Files), then calls globex's server, which
// does not see that connection: its link goes through globex's app (the
// code is exchanged at Demo Files with globex's client id), and its consent
// page names Globex, in Globex's brand, and its application. /account groups
// her two connections under each organization. After a restart on the same
// database the organization and its app are the same (set again, not
// doubled) and globex's server still lists her files without a link.
func TestDemoTwoOrganizations(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.EmptyURL(t)
	ports, err := testkit.FreePorts(demoPorts)
	if err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	d := startDemo(t, dbURL, stateDir, ports)
	cdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	idpURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	mcpURL := fmt.Sprintf("http://127.0.0.1:%d/mcp", ports[3])
	mcp2URL := fmt.Sprintf("http://127.0.0.1:%d/mcp", ports[5])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, want := range []string{"Two organizations", mcp2URL, "connectd orgs apps set globex demo-files --client-id " + globexAppID,
		fmt.Sprintf("go run ./examples/mcp-server/cmd/try -idp %s -mcp %s -user alice\n", idpURL, mcp2URL),
		"Connections for " + globexName} {
		if !strings.Contains(d.out.String(), want) {
			t.Errorf("walkthrough lacks %q:\n%s", want, d.out.String())
		}
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// globex and its app, as connectd orgs made them: one app, with a
	// secret, at Demo Files under globex's client id.
	globex := func() (appID string) {
		t.Helper()
		var name, color, logo string
		if err := pool.QueryRow(ctx, `SELECT name, brand_color, logo_url FROM organizations WHERE id = $1`, globexOrg).
			Scan(&name, &color, &logo); err != nil {
			t.Fatalf("organization %s: %v", globexOrg, err)
		}
		if name != globexName || color != globexColor || logo != "" {
			t.Fatalf("organization %s: %q %q %q", globexOrg, name, color, logo)
		}
		rows, err := pool.Query(ctx, `SELECT id, client_id, secret IS NOT NULL FROM provider_apps WHERE org_id = $1 AND provider = $2`,
			globexOrg, demoProvider)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var n int
		for rows.Next() {
			var clientID string
			var sealed bool
			if err := rows.Scan(&appID, &clientID, &sealed); err != nil {
				t.Fatal(err)
			}
			if clientID != globexAppID || !sealed {
				t.Fatalf("globex's app: client id %q, secret set %v", clientID, sealed)
			}
			n++
		}
		if err := rows.Err(); err != nil || n != 1 {
			t.Fatalf("globex has %d apps at %s (%v), want 1", n, demoProvider, err)
		}
		return appID
	}
	appID := globex()
	clients := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool, AllowHTTP: true})
	list, err := clients.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	orgOf := map[string]string{}
	for _, c := range list {
		orgOf[c.Name] = c.Org
	}
	if orgOf[demoClientName] != "default" || orgOf[globexClientName] != globexOrg {
		t.Fatalf("the demo's clients' organizations: %v", orgOf)
	}

	// codeExchanges are the client ids Demo Files exchanged codes for.
	codeExchanges := func() []string {
		var ids []string
		for _, r := range d.files.TokenRequests() {
			if r.GrantType == "authorization_code" {
				ids = append(ids, r.ClientID)
			}
		}
		return ids
	}

	// Through the default organization's server: the deployment's app.
	try := startTry(t, ctx, idpURL, mcpURL, "-user", "alice")
	link := try.await(t, ctx, connectLink)[0]
	consent, done, err := demoBrowse(link, "alice", true, "")
	if err != nil || done.Status != http.StatusOK || !strings.Contains(done.Body, "Connected") {
		t.Fatalf("alice connecting through Files Assistant: %d %v\n%s", done.Status, err, done.Body)
	}
	if strings.Contains(consent.Body, globexName) || strings.Contains(consent.Body, "/static/brand/"+globexOrg+".css") {
		t.Fatalf("the default organization's consent page carries globex's brand:\n%s", consent.Body)
	}
	try.finish(t, "files for work-account")
	if got := codeExchanges(); len(got) != 1 || got[0] != "connectd-demo" {
		t.Fatalf("Demo Files' code exchanges %v, want one by the deployment's app", got)
	}

	// Through globex's server: it does not see that connection, so alice
	// is asked to connect, through globex's app and brand.
	try = startTry(t, ctx, idpURL, mcp2URL, "-user", "alice")
	link = try.await(t, ctx, connectLink)[0]
	consent, done, err = demoBrowse(link, "alice", true, "")
	if err != nil || done.Status != http.StatusOK || !strings.Contains(done.Body, "Connected") {
		t.Fatalf("alice connecting through Globex Files: %d %v\n%s", done.Status, err, done.Body)
	}
	for _, want := range []string{globexName, "/static/brand/" + globexOrg + ".css", "Globex Files"} {
		if !strings.Contains(html.UnescapeString(consent.Body), want) {
			t.Fatalf("globex's consent page lacks %q:\n%s", want, consent.Body)
		}
	}
	globexTry := try // finished below, after the pages
	if got := codeExchanges(); len(got) != 2 || got[1] != globexAppID {
		t.Fatalf("Demo Files' code exchanges %v, want the second by globex's app %s", got, globexAppID)
	}
	b := flowtest.New(&http.Client{Timeout: 10 * time.Second})
	css := follow(t, b, http.MethodGet, cdURL+"/static/brand/"+globexOrg+".css", nil)
	if css.Status != http.StatusOK || !strings.Contains(css.Body, globexColor) {
		t.Fatalf("globex's stylesheet: %d %s", css.Status, css.Body)
	}
	var conns []string
	rows, err := pool.Query(ctx, `SELECT org_id || '/' || coalesce(app_id, '') FROM connections WHERE subject = 'alice' ORDER BY org_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	if want := []string{"default/", globexOrg + "/" + appID}; rows.Err() != nil || !slices.Equal(conns, want) {
		t.Fatalf("alice's connections %v (%v), want %v", conns, rows.Err(), want)
	}

	// alice's account page: both, each under its organization.
	page := signInAt(t, b, cdURL+"/account", "alice")
	body := html.UnescapeString(page.Body)
	def, glob := strings.Index(body, "Connections for Default"), strings.Index(body, "Connections for "+globexName)
	if def < 0 || glob < 0 {
		t.Fatalf("alice's account page does not group by organization:\n%s", page.Body)
	}
	// Each group names its own organization's server.
	first, second := body[min(def, glob):max(def, glob)], body[max(def, glob):]
	defGroup, globGroup := first, second
	if glob < def {
		defGroup, globGroup = second, first
	}
	if !strings.Contains(defGroup, "Files Assistant") || strings.Contains(defGroup, "Globex Files") ||
		!strings.Contains(globGroup, "Globex Files") || strings.Contains(globGroup, "Files Assistant") {
		t.Fatalf("alice's account page groups the servers wrongly:\n%s", page.Body)
	}
	// And globex's server gets alice's files with globex's connection (the
	// /v1 API and proxy scoped by the client's organization); a second link
	// would say it does not see that connection.
	globexLink := link
	for !strings.Contains(globexTry.out.String(), "files for work-account") {
		for _, l := range connectLink.FindAllString(globexTry.out.String(), -1) {
			if l != globexLink {
				t.Fatalf("globex's server asked alice to connect again after she connected through it: it does not see "+
					"its organization's connection:\n%s", globexTry.out.String())
			}
		}
		select {
		case <-globexTry.done:
			t.Fatalf("try ended without the files: %v\n%s", globexTry.err, globexTry.out.String())
		case <-ctx.Done():
			t.Fatalf("no files from globex's server in time:\n%s", globexTry.out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	globexTry.finish(t, "files for work-account")
	d.shutdown(t, ports)

	// Again on the same database: globex and its app are the same (the app
	// set again, same id, this run's secret), and globex's server still
	// lists alice's files, without a link.
	d = startDemo(t, dbURL, stateDir, ports)
	defer d.shutdown(t, ports)
	if got := globex(); got != appID {
		t.Fatalf("after a restart globex's app is %s, was %s", got, appID)
	}
	try = startTry(t, ctx, idpURL, mcp2URL, "-user", "alice")
	try.finish(t, "files for work-account")
	if connectLink.MatchString(try.out.String()) {
		t.Fatalf("globex's server asked alice to connect again after a restart:\n%s", try.out.String())
	}
}

// TestDemoApproval (issue 36): in the demo, the example MCP server's
// open_issue is a call alice approves first (the demo's request rule that
// asks): try prints the approval link, alice allows that one request on
// connectd's page, and try gets the issue opened; the token read stays
// refused (a client whose rules ask is proxy-only).
func TestDemoApproval(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.EmptyURL(t)
	ports, err := testkit.FreePorts(demoPorts)
	if err != nil {
		t.Fatal(err)
	}
	d := startDemo(t, dbURL, t.TempDir(), ports)
	defer d.shutdown(t, ports)
	idpURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	mcpURL := fmt.Sprintf("http://127.0.0.1:%d/mcp", ports[3])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	try := startTry(t, ctx, idpURL, mcpURL, "-user", "alice")
	link := try.await(t, ctx, connectLink)[0]
	if st, body, err := demoBrowser(link, "alice", true); err != nil || st != http.StatusOK || !strings.Contains(body, "Connected") {
		t.Fatalf("alice connecting: %d %v\n%s", st, err, body)
	}
	try.finish(t, "files for work-account")

	try = startTry(t, ctx, idpURL, mcpURL, "-user", "alice", "-tool", "open_issue",
		"-args", `{"repo":"alice/notes","title":"Hello from the demo"}`)
	link = try.await(t, ctx, connectLink)[0]
	b := flowtest.New(&http.Client{Timeout: 10 * time.Second})
	page := signInAt(t, b, link, "alice")
	for _, want := range []string{"open issues in your Demo Files repositories", "/echo/repos/alice/notes/issues",
		"Hello from the demo", "Allow such requests for 1 hour"} {
		if !strings.Contains(page.Body, want) {
			t.Fatalf("the approval page does not show %q:\n%s", want, page.Body)
		}
	}
	done := follow(t, b, http.MethodPost, link, url.Values{"csrf_token": {formValue(t, page.Body, "csrf_token")},
		"body_sha256": {formValue(t, page.Body, "body_sha256")}, "decision": {"once"}})
	if done.Status != http.StatusOK || !strings.Contains(done.Body, "Allowed") {
		t.Fatalf("allow: %d\n%s", done.Status, done.Body)
	}
	try.finish(t, "Opened the issue in alice/notes.")
}
