package e2e_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connectd/connectd/client"
	mcpserver "github.com/connectd/connectd/examples/mcp-server"
	"github.com/connectd/connectd/internal/testkit"
)

// The TypeScript client (@connectd/client) and example MCP server
// (ts/example-mcp-server), driven against a real connectd: the TS server is
// started with node and called with the Go SDK's MCP client, the user's
// browser is the Go one; the client's integration tests (node --test) call
// connectd directly and complete links through a control endpoint served
// here. make test installs ts/node_modules and builds; this test rebuilds
// (tsc -b is incremental) so a stale dist is never tested.

// tsDir is the npm workspace root, from e2e/.
const tsDir = "../ts"

var tsBuild = sync.OnceValue(func() error {
	if _, err := exec.LookPath("node"); err != nil {
		return errors.New("node not found: Node.js 20+ and npm are needed for the TypeScript tests (apt-get install nodejs npm), then run make test")
	}
	if _, err := os.Stat(filepath.Join(tsDir, "node_modules")); err != nil {
		return errors.New("ts/node_modules is missing: run make test (or cd ts && npm ci) first")
	}
	cmd := exec.Command("node", "node_modules/typescript/bin/tsc", "-b", "client", "example-mcp-server", "client/tsconfig.test.json")
	cmd.Dir = tsDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building ts/ (tsc -b): %v\n%s", err, out)
	}
	return nil
})

func needTS(t *testing.T) {
	t.Helper()
	if err := tsBuild(); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer collects a child process's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// tlsFiles writes the httptest certificate (shared by every TLS server of
// the world) and its key as PEM files: the CA for NODE_EXTRA_CA_CERTS, and
// the TS server's own certificate.
func (w *world) tlsFiles() (certFile, keyFile string) {
	w.t.Helper()
	dir := w.t.TempDir()
	cert := w.connectd.TLS.Certificates[0]
	var certPEM bytes.Buffer
	for _, der := range cert.Certificate {
		pem.Encode(&certPEM, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		w.t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, certPEM.Bytes(), 0o600); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		w.t.Fatal(err)
	}
	return certFile, keyFile
}

// node starts a node process in dir; it is stopped on cleanup, and its
// output goes to t.Log when the test failed (or with -v).
// The returned channel is closed when the process has exited; exitErr then
// holds what Wait returned.
func (w *world) node(dir string, env []string, args ...string) (out *syncBuffer, exited <-chan struct{}, exitErr *error) {
	w.t.Helper()
	out = &syncBuffer{}
	cmd := exec.Command("node", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	done := make(chan struct{})
	exitErr = new(error)
	go func() { *exitErr = cmd.Wait(); close(done) }()
	w.t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if w.t.Failed() || testing.Verbose() {
			w.t.Logf("node %s output:\n%s", strings.Join(args, " "), out.String())
		}
	})
	return out, done, exitErr
}

// startTSServer registers the TypeScript example MCP server at connectd
// (its own client and resource), starts it, waits until it serves, and
// points the world's MCP URL at it: connect, token and fallbackLink then
// drive it.
func (w *world) startTSServer(style string, flags ...string) {
	w.t.Helper()
	w.startTSServerWith(style, "", false, flags...)
}

// startTSServerWith is startTSServer with the example's --credential
// (empty: its default, proxy) and its client registered proxy-only or not.
func (w *world) startTSServerWith(style, credential string, proxyOnly bool, flags ...string) {
	w.t.Helper()
	needTS(w.t)
	ports, err := testkit.FreePorts(1)
	if err != nil {
		w.t.Fatal(err)
	}
	resource := fmt.Sprintf("https://127.0.0.1:%d/mcp", ports[0])
	c, key := w.env.NewClient("Files Assistant (TypeScript)", []string{resource}, []string{providerName})
	w.tsClientID = c.ID
	if proxyOnly {
		if err := w.env.Server.Clients().SetProxyOnly(context.Background(), c.ID, true); err != nil {
			w.t.Fatal(err)
		}
	}
	certFile, keyFile := w.tlsFiles()
	args := append([]string{"dist/main.js", "--resource", resource, "--issuer", w.idp.URL, "--connectd", w.connectd.URL,
		"--files-api", w.files.APIURL(), "--provider", providerName, "--scopes", scope, "--style", style,
		"--wait-timeout", "20", "--retry-wait", fmt.Sprint(int(retryWait / time.Second)),
		"--tls-cert", certFile, "--tls-key", keyFile}, flags...)
	if credential != "" {
		args = append(args, "--credential", credential)
	}
	out, exited, exitErr := w.node(filepath.Join(tsDir, "example-mcp-server"),
		[]string{"NODE_EXTRA_CA_CERTS=" + certFile, "CONNECTD_CLIENT_KEY=" + key}, args...)
	meta := fmt.Sprintf("https://127.0.0.1:%d/.well-known/oauth-protected-resource/mcp", ports[0])
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			w.t.Fatalf("the TypeScript MCP server exited: %v\n%s", *exitErr, out.String())
		default:
		}
		if resp, err := w.tls.Get(meta); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("the TypeScript MCP server did not start serving\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.mcpURL = resource
}

// TestTypeScriptServerURLElicitation20251125 is TestURLElicitation20251125
// against the TypeScript example: elicitation/create within the call,
// notifications/elicitation/complete, then the files.
func TestTypeScriptServerURLElicitation20251125(t *testing.T) {
	t.Parallel()
	w := newWorld(t, mcpserver.LegacyElicit)
	w.startTSServer("elicit")
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

// TestTypeScriptServerURLElicitationRequiredError20251125 is
// TestURLElicitationRequiredError20251125 against the TypeScript example:
// -32042 with connectd's elicitation, the completion notification when the
// user is done, and the retry gets the files.
func TestTypeScriptServerURLElicitationRequiredError20251125(t *testing.T) {
	t.Parallel()
	w := newWorld(t, mcpserver.LegacyElicit)
	w.startTSServer("error")
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

// TestTypeScriptServerFallback is TestFallbackWithoutURLMode and
// TestRetryWhilePendingGetsTheSameLink against the TypeScript example: a
// 2025-11-25 client declaring form mode only, or a 2026-07-28 one declaring
// no elicitation, gets the link in plain words
// (the same link again on a retry while pending), never an elicitation; after
// the user connects, the next call gets the files.
func TestTypeScriptServerFallback(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		protocol string
		caps     *mcp.ClientCapabilities
	}{
		{client.ProtocolVersion20251125, &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}},
		// Served by SDK v2: the capabilities come from the request's _meta.
		{client.ProtocolVersion20260728, &mcp.ClientCapabilities{}},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, mcpserver.LegacyElicit)
			w.startTSServer("elicit")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cs, rec, err := w.connect(ctx, "alice", tc.protocol, mcp.ClientOptions{Capabilities: tc.caps})
			if err != nil {
				t.Fatal(err)
			}
			link := w.fallbackLink(ctx, cs)
			if again := w.fallbackLink(ctx, cs); again != link {
				t.Fatalf("a retry while pending got a new link:\n%s\nwant\n%s", again, link)
			}
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

// TestTypeScriptServerCredentialModes: the TypeScript example registered
// proxy-only (its default mode, through connectd's proxy: the token read
// is refused to it) and in token mode (--credential token) both list the
// files after the user connects, on a 2025-11-25 session.
func TestTypeScriptServerCredentialModes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, credential string
		proxyOnly        bool
	}{
		{"proxy-only", "", true},
		{"token", "token", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, mcpserver.LegacyElicit)
			w.startTSServerWith("elicit", tc.credential, tc.proxyOnly)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			browsed := make(chan error, 4)
			cs, _, err := w.connect(ctx, "alice", client.ProtocolVersion20251125, mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					go func() {
						if tc.proxyOnly {
							browsed <- w.browser().connectProxyOnly(r.Params.URL, "alice")
						} else {
							browsed <- w.browser().connect(r.Params.URL, "alice")
						}
					}()
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
		})
	}
}

// TestTypeScriptClientIntegration runs @connectd/client's integration tests
// (ts/client/test/integration) against this world's connectd. They get two
// registered clients (A and B, for the consent checks), alice's and bob's MCP
// access tokens for them, and a control endpoint that completes a connect
// link in the Go browser as a given user.
func TestTypeScriptClientIntegration(t *testing.T) {
	t.Parallel()
	w := newWorld(t, mcpserver.LegacyElicit)
	needTS(t)
	env := []string{"CONNECTD_URL=" + w.connectd.URL, "CONNECTD_PROVIDER=" + providerName, "CONNECTD_SCOPE=" + scope}
	for _, c := range []string{"A", "B"} {
		resource := "https://ts-client-" + strings.ToLower(c) + ".example/mcp"
		_, key := w.env.NewClient("Files Assistant "+c, []string{resource}, []string{providerName})
		env = append(env, "CONNECTD_KEY_"+c+"="+key,
			"ALICE_TOKEN_"+c+"="+w.token("alice", resource), "BOB_TOKEN_"+c+"="+w.token("bob", resource))
	}
	control := w.control()
	certFile, _ := w.tlsFiles()
	env = append(env, "CONTROL_URL="+control, "NODE_EXTRA_CA_CERTS="+certFile)

	w.runNodeTests(env, "build-test/integration/")
}

// control serves POST /complete {"url": connect link, "user": who} for node
// tests: the user opens the link in the Go browser, signs in and allows.
// It returns the server's URL.
func (w *world) control() string {
	w.t.Helper()
	control := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in struct{ URL, User string }
		if r.Method != http.MethodPost || r.URL.Path != "/complete" || json.NewDecoder(r.Body).Decode(&in) != nil {
			http.Error(rw, "POST /complete {url, user}", http.StatusBadRequest)
			return
		}
		if !strings.HasPrefix(in.URL, w.connectd.URL+"/c/") {
			http.Error(rw, "not a connect link of this connectd", http.StatusBadRequest)
			return
		}
		if err := w.browser().connect(in.URL, in.User); err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		rw.WriteHeader(http.StatusNoContent)
	}))
	w.t.Cleanup(control.Close)
	return control.URL
}

// runNodeTests runs node --test on dir (below ts/client) with env, failing t
// with the output when a test fails.
func (w *world) runNodeTests(env []string, dir string) {
	w.t.Helper()
	out, exited, exitErr := w.node(filepath.Join(tsDir, "client"), env, "--test", dir)
	select {
	case <-exited:
		if *exitErr != nil {
			w.t.Fatalf("node --test %s: %v\n%s", dir, *exitErr, out.String())
		}
		w.t.Logf("node --test: %s", lastLines(out.String(), 8))
	case <-time.After(3 * time.Minute):
		w.t.Fatalf("node --test %s did not finish\n%s", dir, out.String())
	}
}

// TestOfficialTypeScriptClients drives both example MCP servers — the Go one
// and the TypeScript one — with the official TypeScript SDK clients
// (ts/client/test/mcp): SDK v2's on 2026-07-28 and SDK v1's on 2025-11-25,
// through the real browser flow. A short retry hold (3 s) keeps the v2 retry
// inside it while the browser finishes.
func TestOfficialTypeScriptClients(t *testing.T) {
	t.Parallel()
	for _, server := range []string{"go", "typescript"} {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, mcpserver.LegacyElicit)
			needTS(t)
			if server == "typescript" {
				w.startTSServer("elicit", "--retry-hold", "20")
			}
			certFile, _ := w.tlsFiles()
			env := []string{"MCP_URL=" + w.mcpURL, "CONTROL_URL=" + w.control(), "NODE_EXTRA_CA_CERTS=" + certFile,
				"USER_V2=alice", "TOKEN_V2=" + w.token("alice", w.mcpURL), "USER_V1=bob", "TOKEN_V1=" + w.token("bob", w.mcpURL)}
			w.runNodeTests(env, "build-test/mcp/")
		})
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
