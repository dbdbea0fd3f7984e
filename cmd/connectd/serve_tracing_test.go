package main

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/connectd/connectd/internal/pgtest"
)

// TestServeExportsTraces: `connectd serve` with CONNECTD_TRACING=otlp and
// the standard endpoint variable exports its spans to an OTLP/HTTP receiver
// (protobuf, as a collector takes them) — on both listeners, an MCP
// server's traceparent on /v1 continued — and flushes them when it stops;
// the access log names the trace.
func TestServeExportsTraces(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	spans := map[string]string{} // name → trace id
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(raw, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans[s.Name] = hex.EncodeToString(s.TraceId)
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer rec.Close()
	in := start(t, map[string]string{
		"CONNECTD_DATABASE_URL":       pgtest.EmptyURL(t),
		"CONNECTD_AUTO_MIGRATE":       "true",
		"CONNECTD_TRACING":            "otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT": rec.URL,
		"OTEL_TRACES_SAMPLER":         "always_on",
	})
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest(http.MethodGet, in.base+"/v1/connections", nil)
	req.Header.Set("Traceparent", "00-"+trace+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if code, _ := getJSON(t, in.internal+"/healthz"); code != http.StatusOK {
		t.Fatalf("internal healthz: %d", code)
	}
	in.stop()
	if err := <-in.done; err != nil {
		t.Fatalf("run: %v", err)
	}
	in.done <- nil
	mu.Lock()
	defer mu.Unlock()
	if spans["GET /v1/connections"] != trace {
		t.Errorf("the /v1 call's span is in trace %q, want the caller's; spans %v", spans["GET /v1/connections"], spans)
	}
	if _, ok := spans["GET /healthz"]; !ok {
		t.Errorf("no span of the operators' listener: %v", spans)
	}
	if !strings.Contains(in.logs.String(), `"trace_id":"`+trace+`"`) {
		t.Errorf("the access log does not name the trace:\n%s", in.logs.String())
	}
}
