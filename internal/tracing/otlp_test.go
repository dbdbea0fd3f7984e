package tracing

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestExporter: connectd's own OTLP/HTTP exporter sends what the collector
// package's ExportTraceServiceRequest decodes — every attribute type, an
// event, the parent, the error status — gzip-compressed with the headers
// the environment names, and sends a batch again after a 503.
func TestExporter(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		calls int
		got   []*tracepb.ResourceSpans
		hdr   http.Header
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, "not gzip", http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(zr)
		req := &coltracepb.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(b, req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got, hdr = append(got, req.ResourceSpans...), r.Header.Clone()
	}))
	defer srv.Close()
	env := map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "api-key=s%3Dcret,x-other=1",
		"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_TIMEOUT": "5000"}
	exp, err := newExporter(srv.URL+"/v1/traces", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	ctx, parent := tp.Tracer("connectd/test").Start(context.Background(), "GET /v1/connections/{provider}/token",
		trace.WithSpanKind(trace.SpanKindServer))
	_, child := tp.Tracer("connectd/test").Start(ctx, "db", trace.WithAttributes(attribute.Bool("b", true),
		attribute.Int64("i", 7), attribute.Float64("f", 1.5), attribute.String("s", "x"),
		attribute.StringSlice("ss", []string{"a", "b"}), attribute.Int64Slice("is", []int64{1, 2})))
	child.AddEvent("retry", trace.WithAttributes(attribute.Int("attempt", 2)))
	child.SetStatus(codes.Error, "deadline")
	child.End()
	parent.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls < 3 || got == nil {
		t.Fatalf("%d calls, request %v", calls, got)
	}
	if hdr.Get("Api-Key") != "s=cret" || hdr.Get("X-Other") != "1" || hdr.Get("Content-Type") != "application/x-protobuf" {
		t.Fatalf("headers %v", hdr)
	}
	spans := map[string]*tracepb.Span{}
	for _, rs := range got {
		for _, ss := range rs.ScopeSpans {
			if ss.Scope.GetName() != "connectd/test" {
				t.Errorf("scope %v", ss.Scope)
			}
			for _, s := range ss.Spans {
				spans[s.Name] = s
			}
		}
	}
	srvSpan, db := spans["GET /v1/connections/{provider}/token"], spans["db"]
	if srvSpan == nil || db == nil || srvSpan.Kind != tracepb.Span_SPAN_KIND_SERVER || string(db.ParentSpanId) != string(srvSpan.SpanId) ||
		string(db.TraceId) != string(srvSpan.TraceId) || db.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR ||
		db.Status.GetMessage() != "deadline" || len(db.Events) != 1 || db.Events[0].Name != "retry" || db.EndTimeUnixNano < db.StartTimeUnixNano {
		t.Fatalf("spans %v", spans)
	}
	attrs := map[string]string{}
	for _, kv := range db.Attributes {
		attrs[kv.Key] = kv.Value.String()
	}
	for _, k := range []string{"b", "i", "f", "s", "ss", "is"} {
		if attrs[k] == "" {
			t.Errorf("attribute %s missing: %v", k, attrs)
		}
	}
}

// TestExporterSettings: bad standard settings are refused at start, naming
// the variable.
func TestExporterSettings(t *testing.T) {
	t.Parallel()
	for name, env := range map[string]map[string]string{
		"headers":     {"OTEL_EXPORTER_OTLP_HEADERS": "novalue"},
		"timeout":     {"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"},
		"compression": {"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
		"client cert": {"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/nonexistent.pem"},
		"ca":          {"OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent.pem"},
	} {
		_, err := newExporter("http://collector.example/v1/traces", func(k string) string { return env[k] })
		if err == nil || errors.Unwrap(err) != nil && err.Error() == "" {
			t.Errorf("%s: %v", name, err)
		}
	}
}
