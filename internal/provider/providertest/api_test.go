package providertest_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/provider/providertest"
)

// apiDo sends method to the fake's API at path (under APIBaseURL) with
// the given Authorization values, without following redirects.
func apiDo(t *testing.T, srv *providertest.Server, method, path string, body io.Reader, auth ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, srv.APIBaseURL()+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range auth {
		req.Header.Add("Authorization", a)
	}
	c := *srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestAPIBase: ProviderConfig names the API base, under which the file API
// is /files.
func TestAPIBase(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Options{})
	if got := srv.ProviderConfig("fake", "S")["api_base_url"]; got != srv.URL()+"/api" || got != srv.APIBaseURL() {
		t.Fatalf("api_base_url %v", got)
	}
	tok := srv.Grant([]string{"files.read"}, 0)
	if resp := apiDo(t, srv, http.MethodGet, "/files", nil, "Bearer "+tok.AccessToken); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET {api_base}/files: %d", resp.StatusCode)
	}
	if srv.APIURL() != srv.APIBaseURL()+"/files" {
		t.Fatalf("APIURL %s", srv.APIURL())
	}
}

// TestAPIEndpointsNeedTheToken: every proxy-test endpoint (and the file
// API) refuses a request without exactly one valid Bearer token as the file
// API always has, and counts it.
func TestAPIEndpointsNeedTheToken(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Options{})
	tok := srv.Grant([]string{"files.read"}, 0).AccessToken
	paths := []string{"/files", "/stream?n=1&gap=0s", "/echo", "/echo/a/b", "/redirect?to=https://elsewhere.example/", "/cookie",
		"/limited?after=1", "/bytes?n=1"}
	for _, auth := range [][]string{nil, {"Bearer wrong-token"}, {tok}, {"Basic " + tok}, {"Bearer " + tok, "Bearer " + tok}} {
		for _, p := range paths {
			resp := apiDo(t, srv, http.MethodGet, p, nil, auth...)
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Bearer error="invalid_token"` {
				t.Errorf("%s with %d Authorization values: %d %q", p, len(auth), resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
		}
	}
	want := providertest.Counts{API: 5, Stream: 5, Echo: 10, Redirect: 5, Cookie: 5, Limited: 5, Bytes: 5}
	if got := srv.Counts(); got != want {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
	// A revoked token is no better.
	rec := srv.Grant([]string{"files.read"}, 0)
	if code, _ := post(t, srv, srv.RevocationURL(), map[string][]string{"token": {rec.AccessToken}}); code != http.StatusOK {
		t.Fatalf("revoke: %d", code)
	}
	if resp := apiDo(t, srv, http.MethodGet, "/echo", nil, "Bearer "+rec.AccessToken); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("revoked token: %d", resp.StatusCode)
	}
}

// TestAPIEndpointsRefuseLikeTheFileAPI: ServerError and APIScope apply to
// them too.
func TestAPIEndpointsRefuseLikeTheFileAPI(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Options{APIScope: "files.read"})
	narrow := srv.Grant([]string{"other"}, 0).AccessToken
	if resp := apiDo(t, srv, http.MethodGet, "/echo", nil, "Bearer "+narrow); resp.StatusCode != http.StatusForbidden ||
		!strings.Contains(resp.Header.Get("WWW-Authenticate"), "insufficient_scope") {
		t.Fatalf("without the API scope: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	tok := srv.Grant([]string{"files.read"}, 0).AccessToken
	srv.SetQuirks(providertest.Quirks{ServerError: true})
	if resp := apiDo(t, srv, http.MethodGet, "/bytes?n=1", nil, "Bearer "+tok); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("ServerError: %d", resp.StatusCode)
	}
}

// TestStream: the events arrive one by one, each as it is written, gap
// apart.
func TestStream(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Options{})
	tok := srv.Grant(nil, 0).AccessToken
	const gap = 150 * time.Millisecond
	start := time.Now()
	resp := apiDo(t, srv, http.MethodGet, "/stream?n=3&gap="+gap.String(), nil, "Bearer "+tok)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	r := bufio.NewReader(resp.Body)
	var events []string
	var at []time.Duration
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			events = append(events, strings.TrimSpace(data))
			at = append(at, time.Since(start))
		}
	}
	if strings.Join(events, ",") != "1,2,3" {
		t.Fatalf("events %q", events)
	}
	if at[0] > gap || at[2]-at[0] < 2*gap-gap/3 {
		t.Fatalf("events at %v: not one by one, %v apart", at, gap)
	}
	if srv.Counts().Stream != 1 {
		t.Fatalf("counts %+v", srv.Counts())
	}
	for _, q := range []string{"n=-1", "n=1001", "n=x", "gap=11s", "gap=soon"} {
		if resp := apiDo(t, srv, http.MethodGet, "/stream?"+q, nil, "Bearer "+tok); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("stream?%s: %d", q, resp.StatusCode)
		}
	}
}

// TestEcho: the answer is the request as received, the token redacted.
func TestEcho(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Options{})
	tok := srv.Grant(nil, 0).AccessToken
	body := strings.Repeat("payload ", 1000)
	req, _ := http.NewRequest(http.MethodPut, srv.APIBaseURL()+"/echo/items/7?x=1&y=%20two", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-Custom", "one")
	req.Header.Add("X-Custom", "two")
	req.Header.Set("Content-Type", "text/plain")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.Contains(string(raw), tok) {
		t.Fatalf("%d, token in the answer: %v", resp.StatusCode, strings.Contains(string(raw), tok))
	}
	var got providertest.EchoAnswer
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(body))
	if got.Method != http.MethodPut || got.Path != "/api/echo/items/7" || got.RawQuery != "x=1&y=%20two" ||
		got.Host != strings.TrimPrefix(srv.URL(), "http://") || got.BodyLength != int64(len(body)) ||
		got.ContentLength != int64(len(body)) || got.BodySHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("echo %+v", got)
	}
	if h := got.Headers; strings.Join(h["X-Custom"], ",") != "one,two" || strings.Join(h["Authorization"], ",") != "[redacted]" ||
		strings.Join(h["Content-Type"], ",") != "text/plain" {
		t.Fatalf("headers %v", h)
	}
	// Any method, the bare path too.
	resp2 := apiDo(t, srv, http.MethodDelete, "/echo", nil, "Bearer "+tok)
	var del providertest.EchoAnswer
	if err := json.NewDecoder(resp2.Body).Decode(&del); err != nil || del.Method != http.MethodDelete || del.Path != "/api/echo" || del.BodyLength != 0 {
		t.Fatalf("DELETE /api/echo: %v %+v", err, del)
	}
	if srv.Counts().Echo != 2 {
		t.Fatalf("counts %+v", srv.Counts())
	}
}

// TestRedirectCookieLimitedBytes: the other answers a proxy must handle.
func TestRedirectCookieLimitedBytes(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Options{})
	bearer := "Bearer " + srv.Grant(nil, 0).AccessToken

	resp := apiDo(t, srv, http.MethodGet, "/redirect?to=https%3A%2F%2Felsewhere.example%2Fsteal%3Fa%3D1", nil, bearer)
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "https://elsewhere.example/steal?a=1" {
		t.Fatalf("redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := apiDo(t, srv, http.MethodGet, "/redirect", nil, bearer); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("redirect without to: %d", resp.StatusCode)
	}

	resp = apiDo(t, srv, http.MethodGet, "/cookie", nil, bearer)
	if c := resp.Cookies(); resp.StatusCode != http.StatusOK || len(c) != 1 || c[0].Name != "provider_session" || c[0].Value == "" {
		t.Fatalf("cookie: %d %v", resp.StatusCode, resp.Header.Values("Set-Cookie"))
	}

	resp = apiDo(t, srv, http.MethodGet, "/limited?after=7", nil, bearer)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "7" {
		t.Fatalf("limited: %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp := apiDo(t, srv, http.MethodGet, "/limited", nil, bearer); resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("limited by default: %q", resp.Header.Get("Retry-After"))
	}

	for _, n := range []int{0, 1, 32 << 10, 100_001} {
		resp := apiDo(t, srv, http.MethodGet, "/bytes?n="+strconv.Itoa(n), nil, bearer)
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK || len(b) != n || resp.ContentLength != int64(n) {
			t.Fatalf("bytes?n=%d: %d, %d bytes, Content-Length %d, %v", n, resp.StatusCode, len(b), resp.ContentLength, err)
		}
	}
	for _, q := range []string{"", "n=-1", "n=x", "n=1073741825"} {
		if resp := apiDo(t, srv, http.MethodGet, "/bytes?"+q, nil, bearer); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("bytes?%s: %d", q, resp.StatusCode)
		}
	}
	if c := srv.Counts(); c.Redirect != 2 || c.Cookie != 1 || c.Limited != 2 || c.Bytes != 8 || c.API != 0 {
		t.Fatalf("counts %+v", c)
	}
}
