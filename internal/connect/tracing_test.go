package connect_test

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/tracing"
)

// otlpReceiver is an OTLP/HTTP trace receiver, as a collector serves it:
// POST /v1/traces with a protobuf ExportTraceServiceRequest (gzip or not).
// It keeps every request, decoded, and its JSON form for the secret scan.
type otlpReceiver struct {
	t   *testing.T
	srv *httptest.Server
	mu  sync.Mutex
	req []*collectortrace.ExportTraceServiceRequest
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rc := &otlpReceiver{t: t}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		rc.req = append(rc.req, &req)
		rc.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// span is one received span with its resource's attributes.
type span struct {
	*tracepb.Span
	resource map[string]string
}

func (s span) attr(key string) string { return attrs(s.Attributes)[key] }

func (s span) traceID() string  { return hex.EncodeToString(s.TraceId) }
func (s span) spanID() string   { return hex.EncodeToString(s.SpanId) }
func (s span) parentID() string { return hex.EncodeToString(s.ParentSpanId) }

func attrs(kv []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, a := range kv {
		m[a.Key] = anyString(a.Value)
	}
	return m
}

func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	}
	return protojson.Format(v)
}

// spans returns every span received so far.
func (rc *otlpReceiver) spans() []span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []span
	for _, req := range rc.req {
		for _, rs := range req.ResourceSpans {
			res := attrs(rs.GetResource().GetAttributes())
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					out = append(out, span{s, res})
				}
			}
		}
	}
	return out
}

// text is everything received, as JSON: every span's name, attributes,
// events, links and status, and every resource.
func (rc *otlpReceiver) text() string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var b strings.Builder
	for _, req := range rc.req {
		b.WriteString(protojson.Format(req))
	}
	return b.String()
}

// TestTracing (issue 28 §1): with tracing on, a whole browser flow (login
// at the IdP, consent, the provider round trip with PKCE), token reads, a
// refresh, a proxied call and a webhook delivery are exported over OTLP/HTTP
// to a real receiver as spans named by route pattern; the statements, the
// outbound calls and the River job are children of the request or job that
// made them; an MCP server's traceparent on /v1 becomes the parent of
// connectd's span, one on a browser page does not; log lines carry the
// trace id. And no span, attribute, event, status or resource carries a
// secret the flow handled, a connect URL id, or a query string.
func TestTracing(t *testing.T) {
	t.Parallel()
	rec := newOTLPReceiver(t)
	tr, err := tracing.New(context.Background(), tracing.Config{Enabled: true, Endpoint: rec.srv.URL + "/v1/traces",
		Sampler: sdktrace.AlwaysSample(), ServiceVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	e := newEnv(t, envOptions{rotate: true, tracing: tr.Provider()})
	e.run(e.server)
	m := e.newMCPServer("files", "fake")
	hooks := e.newReceiver(m, "elicitation.completed")
	sec := &secrets{t: t}
	sec.add("client key", m.key, "")
	userToken := m.token("alice")
	sec.add("user token", userToken, "")
	var pages []response
	b := e.browser()
	get := func(u string) response { r := b.get(u); pages = append(pages, r); return r }

	// The browser flow, every secret noted as it appears.
	st, el, _ := m.send(e.srv.URL, http.MethodPost, "/v1/elicitations", userToken,
		map[string]any{"provider": "fake", "scopes": []string{"files.read"}})
	if st != http.StatusCreated && st != http.StatusOK {
		t.Fatalf("mint: %d %v", st, el)
	}
	u := el["url"].(string)
	sec.add("request_state", el["request_state"].(string), "")
	sec.add("connect URL id", u[strings.LastIndexByte(u, '/')+1:], "")
	toLogin := get(u)
	toIdP := get(toLogin.location)
	idpURL, _ := url.Parse(toIdP.location)
	sec.add("login state", idpURL.Query().Get("state"), "")
	loginCB, _ := url.Parse(e.pick(b, toIdP.location, "alice"))
	sec.add("IdP authorization code", loginCB.Query().Get("code"), "")
	get(loginCB.String())
	consent := get(u)
	redirect := b.do(http.MethodPost, u, allowForm(t, consent.body))
	pages = append(pages, redirect)
	authz, _ := url.Parse(redirect.location)
	state := authz.Query().Get("state")
	sec.add("provider state", state, "")
	sh := sha256.Sum256([]byte(state))
	var sealed []byte
	if err := e.pool.QueryRow(context.Background(), "SELECT verifier_sealed FROM oauth_states WHERE state_hash = $1", sh[:]).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	verifier, err := e.keyring.Purpose("connectd/connect/pkce-verifier/v1").Open(sealed, keyring.Binding("connectd/pkce_verifier/v1", string(sh[:])))
	if err != nil {
		t.Fatal(err)
	}
	sec.add("PKCE verifier", string(verifier), "")
	callback := e.authorize(redirect)
	cbURL, _ := url.Parse(callback)
	sec.add("provider authorization code", cbURL.Query().Get("code"), "")
	if done := get(callback); !strings.Contains(done.body, "Connected") {
		t.Fatalf("callback: %d %s", done.status, done.body)
	}
	for _, r := range pages {
		for _, sc := range r.setCookies {
			if c, err := http.ParseSetCookie(sc); err == nil && len(c.Value) >= 8 {
				sec.add("cookie "+c.Name, c.Value, "")
			}
		}
	}
	user := identity.User{Issuer: e.idps[0].Issuer(), Subject: "alice"}
	_, cred, err := e.vault.Get(context.Background(), user, "fake", "")
	if err != nil {
		t.Fatal(err)
	}
	sec.add("access token", cred.AccessToken, "")
	sec.add("refresh token", cred.RefreshToken, "")

	// A token read under the MCP server's own trace, then one past expiry
	// (a refresh at the provider), then a proxied call with a query.
	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	read := func(h http.Header) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/v1/connections/fake/token", nil)
		req.Header.Set("Authorization", "Bearer "+m.key)
		req.Header.Set(mcpauth.UserTokenHeader, userToken)
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body) // the whole answer: the span has ended
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("token read: %d", resp.StatusCode)
		}
	}
	read(http.Header{"Traceparent": {"00-" + callerTrace + "-" + callerSpan + "-01"}})
	e.clock.Advance(59*time.Minute + 30*time.Second)
	read(nil)
	_, cred2, err := e.vault.Get(context.Background(), user, "fake", "")
	if err != nil || cred2.RefreshToken == cred.RefreshToken {
		t.Fatalf("no rotating refresh: %v", err)
	}
	sec.add("refreshed access token", cred2.AccessToken, "")
	sec.add("rotated refresh token", cred2.RefreshToken, "")
	const query = "q=proxy-query-value-1234"
	sec.add("proxied query", "proxy-query-value-1234", "")
	preq, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/v1/proxy/fake/echo/x?"+query, nil)
	preq.Header.Set("Authorization", "Bearer "+m.key)
	preq.Header.Set(mcpauth.UserTokenHeader, userToken)
	presp, err := e.srv.Client().Do(preq)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, presp.Body)
	presp.Body.Close()
	if presp.StatusCode != http.StatusOK {
		t.Fatalf("proxy: %d", presp.StatusCode)
	}
	// A browser page with a traceparent: not continued.
	const pageTrace = "0af7651916cd43dd8448eb211c80319c"
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/c/"+strings.Repeat("A", 22), nil)
	req.Header.Set("Traceparent", "00-"+pageTrace+"-b7ad6b7169203331-01")
	if resp, err := e.srv.Client().Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// The operators' listener is traced too.
	if resp, err := http.Get(e.Internal.URL + "/metrics"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics: %v %v", resp, err)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	hooks.wait("elicitation.completed")

	// Everything exported: a River span ends after its job's webhook
	// arrived (and other jobs, the periodic ones, may run first), so wait
	// for the delivery's before the last flush.
	var spans []span
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := tr.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
		spans = rec.spans()
		if hasSpan(spans, func(s span) bool { return s.Name == "river.work/webhook_deliver" }) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	byID := map[string]span{}
	for _, s := range spans {
		byID[s.spanID()] = s
	}
	find := func(what string, ok func(span) bool) span {
		t.Helper()
		for _, s := range spans {
			if ok(s) {
				return s
			}
		}
		var names []string
		for _, s := range spans {
			names = append(names, s.Name)
		}
		t.Fatalf("no %s among %d spans: %v", what, len(spans), names)
		return span{}
	}
	server := func(name string) func(span) bool {
		return func(s span) bool { return s.Kind == tracepb.Span_SPAN_KIND_SERVER && s.Name == name }
	}
	for _, name := range []string{"POST /v1/elicitations", "GET /c/{id}", "POST /c/{id}", "GET /login", "GET /login/callback",
		"GET /oauth/callback", "GET /v1/connections/{provider}/token", "GET /v1/proxy/{provider}/{path...}", "GET /metrics"} {
		s := find("server span "+name, server(name))
		if s.attr("http.route") == "" || s.attr("http.request.method") == "" || s.attr("http.response.status_code") == "" {
			t.Errorf("%s: attributes %v", name, attrs(s.Attributes))
		}
		if s.resource["service.name"] != "connectd" || s.resource["service.version"] != "test" {
			t.Errorf("%s: resource %v", name, s.resource)
		}
	}
	// The callback's children: statements, and the code exchange at the
	// fake provider.
	cb := find("callback span", server("GET /oauth/callback"))
	fakeURL, _ := url.Parse(e.fake.AuthorizeURL())
	find("statement under the callback", func(s span) bool {
		return s.Kind == tracepb.Span_SPAN_KIND_CLIENT && s.attr("db.system.name") == "postgresql" &&
			s.traceID() == cb.traceID() && s.attr("db.query.text") != ""
	})
	ex := find("code exchange at the provider", func(s span) bool {
		return s.Kind == tracepb.Span_SPAN_KIND_CLIENT && s.Name == "POST" && s.attr("server.address") == fakeURL.Hostname() &&
			s.parentID() == cb.spanID()
	})
	if ex.attr("http.response.status_code") != "200" {
		t.Errorf("exchange span: %v", attrs(ex.Attributes))
	}
	// The proxied call's client span is its server span's child.
	px := find("proxy span", server("GET /v1/proxy/{provider}/{path...}"))
	find("proxied call", func(s span) bool {
		return s.Kind == tracepb.Span_SPAN_KIND_CLIENT && s.Name == "GET" && s.parentID() == px.spanID()
	})
	// The MCP server's trace is continued; the page's is not.
	tok := find("token read in the caller's trace", func(s span) bool {
		return server("GET /v1/connections/{provider}/token")(s) && s.traceID() == callerTrace
	})
	if tok.parentID() != callerSpan {
		t.Errorf("token read's parent %s, want the caller's %s", tok.parentID(), callerSpan)
	}
	for _, s := range spans {
		if s.traceID() == pageTrace {
			t.Errorf("span %q continued a browser page's traceparent", s.Name)
		}
	}
	find("page span in a trace of its own", server("GET /c/{id}"))
	// The webhook delivery: a River work span, its outbound call under it.
	work := find("River work span", func(s span) bool { return s.Name == "river.work/webhook_deliver" })
	hookURL, _ := url.Parse(hooks.srv.URL)
	find("webhook delivery under the job", func(s span) bool {
		return s.Kind == tracepb.Span_SPAN_KIND_CLIENT && s.attr("server.address") == hookURL.Hostname() &&
			s.attr("server.port") == hookURL.Port() && s.traceID() == work.traceID()
	})
	// Log lines name their trace.
	if !strings.Contains(e.logs.String(), `"trace_id":"`+callerTrace+`"`) {
		t.Error("the token read's log lines do not carry its trace id")
	}

	// No secret anywhere in what was exported, and no span name with an id.
	text := rec.text()
	if testing.Verbose() {
		for _, s := range spans {
			t.Logf("%s %s %s<-%s %v", s.Kind, s.Name, s.spanID(), s.parentID(), attrs(s.Attributes))
		}
	}
	if found := sec.in(text, "-"); len(found) > 0 {
		t.Errorf("exported spans carry %v", found)
	}
	for _, s := range spans {
		if strings.Contains(s.Name, "?") || strings.Contains(s.Name, "://") {
			t.Errorf("span name %q holds a URL or query", s.Name)
		}
	}
	for _, leak := range []string{"Bearer ", "Authorization", "Cookie", "code_verifier", "url.full", "url.path", "url.query"} {
		if strings.Contains(text, leak) {
			t.Errorf("exported spans mention %q", leak)
		}
	}
	if len(spans) < 40 || len(sec.list) < 14 {
		t.Fatalf("the flow did less than intended: %d spans, %d secrets", len(spans), len(sec.list))
	}
}

func hasSpan(spans []span, ok func(span) bool) bool {
	for _, s := range spans {
		if ok(s) {
			return true
		}
	}
	return false
}
