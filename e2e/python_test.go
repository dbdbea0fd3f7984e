package e2e_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	mcpserver "github.com/connectd/connectd/examples/mcp-server"
	"github.com/connectd/connectd/internal/flowtest"
)

// The Python client (python/, the connectd package), driven against a real
// connectd: its unit tests and its integration tests
// (python/tests/test_integration.py) run with python3 -m unittest, given
// this world in the environment — connectd's URL and CA, two registered
// clients' keys (A, B), alice's and bob's MCP access tokens for each, a
// control endpoint that completes a connect link in the Go browser as a
// user (and as which account at the provider), and webhook signatures made
// by the Standard Webhooks reference library. No test may skip here.

// pythonDir is the Python package, from e2e/.
const pythonDir = "../python"

var pythonCheck = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("../scripts/ensure-python").CombinedOutput()
	return string(out), err
})

func needPython(t *testing.T) {
	t.Helper()
	if out, err := pythonCheck(); err != nil {
		t.Fatalf("scripts/ensure-python: %v\n%s", err, out)
	}
}

// TestPythonClient runs python/'s tests (python3 -m unittest discover)
// against this world's connectd.
func TestPythonClient(t *testing.T) {
	t.Parallel()
	needPython(t)
	w := newWorld(t, mcpserver.LegacyElicit)
	env := []string{"CONNECTD_PYTHON_E2E=1", "CONNECTD_URL=" + w.connectd.URL, "CONNECTD_PROVIDER=" + providerName,
		"CONNECTD_SCOPE=" + scope, "PYTHONPATH=src", "PYTHONDONTWRITEBYTECODE=1"}
	for _, c := range []string{"A", "B"} {
		resource := "https://py-client-" + strings.ToLower(c) + ".example/mcp"
		_, key := w.env.NewClient("Files Assistant "+c+" (Python)", []string{resource}, []string{providerName})
		env = append(env, "CONNECTD_KEY_"+c+"="+key,
			"ALICE_TOKEN_"+c+"="+w.token("alice", resource), "BOB_TOKEN_"+c+"="+w.token("bob", resource))
	}

	// POST /complete {"url": connect link, "user": who, "subject": the
	// provider account (default the world's)}: the user opens the link in
	// the browser, signs in, allows, and signs in at the provider as subject.
	// The Python tests run one at a time, so the subject is theirs.
	var mu sync.Mutex
	control := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in struct{ URL, User, Subject string }
		if r.Method != http.MethodPost || r.URL.Path != "/complete" || json.NewDecoder(r.Body).Decode(&in) != nil {
			http.Error(rw, "POST /complete {url, user, subject}", http.StatusBadRequest)
			return
		}
		if !strings.HasPrefix(in.URL, w.connectd.URL+"/c/") {
			http.Error(rw, "not a connect link of this connectd", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if in.Subject == "" {
			in.Subject = "demo-account"
		}
		w.files.SetSubject(in.Subject)
		if err := w.browser().allow(in.URL, in.User); err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		rw.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(control.Close)
	certFile, _ := w.tlsFiles()
	env = append(env, "CONTROL_URL="+control.URL, "CONNECTD_CA_FILE="+certFile,
		"CONNECTD_WEBHOOK_VECTORS="+webhookVectors(t))

	py := os.Getenv("PYTHON") // as scripts/ensure-python reads it
	if py == "" {
		py = "python3"
	}
	cmd := exec.Command(py, "-m", "unittest", "discover", "-s", "tests", "-t", ".", "-v")
	cmd.Dir = pythonDir
	cmd.Env = append(os.Environ(), env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("python3 -m unittest: %v\n%s", err, out.String())
		}
	case <-time.After(4 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("python3 -m unittest did not finish\n%s", out.String())
	}
	got := out.String()
	// Every test runs here: the integration tests and the reference
	// library's vectors skip only when run outside this test.
	if strings.Contains(got, "skipped") {
		t.Fatalf("python tests skipped under go test:\n%s", got)
	}
	if testing.Verbose() {
		t.Logf("python3 -m unittest:\n%s", got)
	} else {
		t.Logf("python3 -m unittest: %s", lastLines(got, 3))
	}
}

// allow opens the link as user and allows on the consent page, then
// follows whatever comes next: the provider round trip back to connectd's
// callback, or (the user already connected, only this client lacked
// approval) nothing. Either ends on connectd's "Connected" page.
func (b *browser) allow(connectURL, user string) error {
	status, page, err := b.open(connectURL, user)
	if err != nil {
		return err
	}
	form, ok := flowtest.AllowForm(page)
	if status != http.StatusOK || !ok {
		return fmt.Errorf("consent page: %d", status)
	}
	r, err := b.b.Follow(http.MethodPost, connectURL, form)
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK || !strings.Contains(r.Body, "Connected") {
		return fmt.Errorf("after Allow: %d at %s", r.Status, r.URL)
	}
	return nil
}

// webhookVectors signs webhooks with the Standard Webhooks reference
// library (as connectd's deliveries are signed) and returns them as JSON
// for the Python tests: some that must verify (one among several
// signatures), some that must not (a tampered body, another secret's
// signature, a stale timestamp, a v2 signature).
func webhookVectors(t *testing.T) string {
	t.Helper()
	key := func() string {
		raw := make([]byte, 32)
		_, _ = rand.Read(raw)
		return "whsec_" + base64.StdEncoding.EncodeToString(raw)
	}
	secret := key()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	other, err := standardwebhooks.NewWebhook(key())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	type vector struct {
		Name    string            `json:"name"`
		Body    string            `json:"body"`
		Headers map[string]string `json:"headers"`
		Now     int64             `json:"now"`
		Valid   bool              `json:"valid"`
	}
	sign := func(h *standardwebhooks.Webhook, id string, at time.Time, body string) string {
		s, err := h.Sign(id, at, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	body := `{"type":"connection.created","timestamp":"2026-11-30T12:00:00Z","data":{"provider":"demo-files","connection_id":"cn_aaaaaaaaaaaaaaaaaaaaaaaaaa"}}`
	headers := func(id string, at time.Time, sig string) map[string]string {
		return map[string]string{"webhook-id": id, "webhook-timestamp": strconv.FormatInt(at.Unix(), 10), "webhook-signature": sig}
	}
	vs := []vector{
		{"signed", body, headers("msg_1", now, sign(wh, "msg_1", now, body)), now.Unix(), true},
		{"among others", body, headers("msg_2", now, sign(other, "msg_2", now, body)+" "+sign(wh, "msg_2", now, body)),
			now.Unix(), true},
		{"4 minutes old", body, headers("msg_3", now.Add(-4*time.Minute), sign(wh, "msg_3", now.Add(-4*time.Minute), body)),
			now.Unix(), true},
		{"tampered body", `{"type":"connection.revoked"}`, headers("msg_4", now, sign(wh, "msg_4", now, body)), now.Unix(), false},
		{"another secret", body, headers("msg_5", now, sign(other, "msg_5", now, body)), now.Unix(), false},
		{"stale", body, headers("msg_6", now.Add(-6*time.Minute), sign(wh, "msg_6", now.Add(-6*time.Minute), body)),
			now.Unix(), false},
		{"v2 only", body, headers("msg_7", now, "v2,"+strings.TrimPrefix(sign(wh, "msg_7", now, body), "v1,")), now.Unix(), false},
	}
	// The reference library agrees with each verdict.
	for _, v := range vs {
		h := http.Header{}
		for k, x := range v.Headers {
			h.Set(k, x)
		}
		if err := wh.Verify([]byte(v.Body), h); (err == nil) != v.Valid && v.Name != "stale" {
			t.Fatalf("vector %q: the reference library says %v", v.Name, err)
		}
	}
	b, err := json.Marshal(map[string]any{"secret": secret, "vectors": vs})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
