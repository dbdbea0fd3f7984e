package web

import (
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// BenchmarkTracing is what the server span adds to one request through a
// route table like the public listener's: none (tracing off: no
// middleware), unsampled (the sampler's decision), and sampled (the span
// made and handed to a processor that drops it, so no export is counted).
func BenchmarkTracing(b *testing.B) {
	m := NewMux()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	for _, p := range []string{"GET /v1/connections/{provider}/token", "GET /c/{id}", "POST /c/{id}", "GET /login", "/v1/proxy/{provider}/{path...}", "/"} {
		m.Handle(Route{Pattern: p, Kind: KindAPI, Handler: ok})
	}
	for _, c := range []struct {
		name string
		tp   *sdktrace.TracerProvider
	}{
		{"off", nil},
		{"unsampled", sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))},
		{"sampled", sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))},
	} {
		b.Run(c.name, func(b *testing.B) {
			chain := []func(http.Handler) http.Handler{RequestContext(nil, nil), Routing(m)}
			if c.tp != nil {
				chain = append(chain, Tracing(c.tp, m.Routed))
			}
			h := Chain(m, chain...)
			req := httptest.NewRequest(http.MethodGet, "/v1/connections/github/token", nil)
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, req)
			}
		})
	}
}
