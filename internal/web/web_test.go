package web_test

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/testkit"
	"github.com/connectd/connectd/internal/web"
)

// logLines decodes JSON log output into one map per line.
func logLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		out = append(out, m)
	}
	return out
}

func newServer(t *testing.T, logs io.Writer, h http.Handler) *httptest.Server {
	t.Helper()
	logger := web.NewLogger(logs, slog.LevelDebug, "json")
	mux := http.NewServeMux()
	mux.Handle("/", h)
	srv := httptest.NewServer(web.Chain(mux, web.RequestIDs, web.AccessLog(logger, nil), web.Recover(logger),
		web.SecurityHeaders(true)))
	t.Cleanup(srv.Close)
	return srv
}

func TestPanicAnswersJSON500WithoutInternals(t *testing.T) {
	t.Parallel()
	logs := &testkit.LogBuffer{}
	srv := newServer(t, logs, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic("boom: secret-internal-detail")
	}))
	resp, err := testClient.Get(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("content type %q", ct)
	}
	var env web.Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("body not JSON: %s", body)
	}
	rid := resp.Header.Get(web.RequestIDHeader)
	if env.Error != "internal_error" || env.RequestID == "" || env.RequestID != rid {
		t.Fatalf("envelope %+v, header request id %q", env, rid)
	}
	for _, leak := range []string{"boom", "secret-internal-detail", "goroutine", ".go:"} {
		if strings.Contains(string(body), leak) {
			t.Fatalf("response body leaks %q: %s", leak, body)
		}
	}
	// The stack goes to the log, tagged with the request id.
	var found bool
	for _, l := range logLines(t, logs.String()) {
		if l["msg"] == "panic" && l["request_id"] == rid && strings.Contains(l["stack"].(string), "goroutine") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no panic log line with request id %s:\n%s", rid, logs.String())
	}
}

func TestPanicForBrowserRendersErrorPage(t *testing.T) {
	t.Parallel()
	srv := newServer(t, io.Discard, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic("x") }))
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	req.Header.Set("Accept", "text/html")
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(body), "Something went wrong") {
		t.Fatalf("status %d type %q body %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}

func TestRequestIDPropagation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		incoming string
		adopt    bool
	}{
		{"sane id adopted", "abc-123.DEF_9:x", true},
		{"none generated", "", false},
		{"too long replaced", strings.Repeat("a", 65), false},
		{"space replaced", "a b", false},
		{"log forging replaced", "x\",\"level\":\"ERROR", false},
		{"tab replaced", "a\tb", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			logs := &testkit.LogBuffer{}
			var seen string
			logger := web.NewLogger(logs, slog.LevelDebug, "json")
			srv := newServer(t, logs, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen = web.RequestID(r.Context())
				logger.InfoContext(r.Context(), "inside handler")
			}))
			req, _ := http.NewRequest("GET", srv.URL+"/p?code=should-not-be-logged", nil)
			if tt.incoming != "" {
				req.Header[web.RequestIDHeader] = []string{tt.incoming}
			}
			resp, err := testClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got := resp.Header.Get(web.RequestIDHeader)
			if got == "" || got != seen {
				t.Fatalf("response id %q, handler saw %q", got, seen)
			}
			if tt.adopt && got != tt.incoming {
				t.Fatalf("sane incoming id %q not adopted (got %q)", tt.incoming, got)
			}
			if !tt.adopt && got == tt.incoming {
				t.Fatalf("unsafe incoming id %q adopted", tt.incoming)
			}
			lines := logLines(t, logs.String())
			var handlerLine, accessLine bool
			for _, l := range lines {
				if l["request_id"] != got {
					t.Fatalf("log line without the request id: %v", l)
				}
				handlerLine = handlerLine || l["msg"] == "inside handler"
				accessLine = accessLine || l["msg"] == "request"
			}
			if !handlerLine || !accessLine {
				t.Fatalf("missing handler or access line:\n%s", logs.String())
			}
			if strings.Contains(logs.String(), "should-not-be-logged") {
				t.Fatal("query string leaked into the access log")
			}
		})
	}
}

func TestAPIErrorMapping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"typed", web.Errorf(http.StatusBadRequest, "bad_thing", "bad thing"), 400, "bad_thing"},
		{"wrapped typed", errors.Join(errors.New("ctx"), web.Errorf(409, "conflict", "c")), 409, "conflict"},
		{"untyped hides text", errors.New("pq: password=hunter2"), 500, "internal_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, io.Discard, web.API(slog.New(slog.DiscardHandler), func(w http.ResponseWriter, r *http.Request) error {
				return tt.err
			}))
			resp, err := testClient.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			var env web.Envelope
			if err := json.Unmarshal(body, &env); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status || env.Error != tt.code {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, env.Error, tt.status, tt.code)
			}
			if strings.Contains(string(body), "hunter2") {
				t.Fatal("internal error text leaked")
			}
		})
	}
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	srv := newServer(t, io.Discard, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	resp, err := testClient.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := map[string]string{
		"Content-Security-Policy":   web.ContentSecurityPolicy,
		"X-Frame-Options":           "DENY",
		"X-Content-Type-Options":    "nosniff",
		"Referrer-Policy":           "no-referrer",
		"Strict-Transport-Security": "max-age=63072000; includeSubDomains",
	}
	for k, v := range want {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
}

// TestSecurityHeadersNotShared: the header values are shared between
// responses; what a handler adds to or replaces on one response must show on
// that response only.
func TestSecurityHeadersNotShared(t *testing.T) {
	t.Parallel()
	first := true
	srv := newServer(t, io.Discard, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if first {
			first = false
			w.Header().Add("Cache-Control", "private")
			web.AllowFormAction(w.Header(), "https://provider.example/authorize")
		}
	}))
	for i, want := range [][]string{{"no-store", "private"}, {"no-store"}} {
		resp, err := testClient.Get(srv.URL + "/page")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Values("Cache-Control"); !slices.Equal(got, want) {
			t.Errorf("response %d: Cache-Control = %q, want %q", i, got, want)
		}
		if got, widened := resp.Header.Get("Content-Security-Policy"), i == 0; (got != web.ContentSecurityPolicy) != widened {
			t.Errorf("response %d: CSP = %q", i, got)
		}
	}
}

// TestAccessLogRoute: the access log line and the observer (the metrics)
// of a request through Public name the route pattern that served it (the
// log's route was empty, and the metrics matched the route table again,
// while the database deadlines were put on a copy of the request made below
// the access log).
func TestAccessLogRoute(t *testing.T) {
	t.Parallel()
	logs := &testkit.LogBuffer{}
	m := web.NewMux()
	m.Handle(web.Route{Pattern: "GET /v1/things/{id}", Kind: web.KindAPI, Class: web.ClassAPI,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			web.WriteJSON(w, http.StatusOK, map[string]string{"id": r.PathValue("id")})
		})})
	var observed string
	h, err := web.Public(m, web.PublicConfig{Logger: web.NewLogger(logs, slog.LevelInfo, "json"),
		Observe: func(r *http.Request, status int, d time.Duration) { observed = r.Pattern }})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/things/42", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	if observed != "GET /v1/things/{id}" {
		t.Errorf("observer saw route %q", observed)
	}
	var route any = "(no request line)"
	for _, l := range logLines(t, logs.String()) {
		if l["msg"] == "request" {
			route = l["route"]
		}
	}
	if route != "GET /v1/things/{id}" {
		t.Errorf("access log route %v", route)
	}
}
