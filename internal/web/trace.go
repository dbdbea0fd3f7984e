package web

import (
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/connectd/connectd/internal/reqid"
)

// traceScope is the instrumentation scope of the server spans.
const traceScope = "github.com/connectd/connectd/internal/web"

// Tracing starts a server span for every request, named by its route
// pattern ("GET /c/{id}", never the path with its ids), and puts it on the
// request's context, so the statements (package db), outbound calls
// (package egress) and log lines (ContextHandler) under it are its children.
// lookup names the route a request dispatches to (Mux.Routed, which reads
// what Routing found).
//
// An incoming W3C traceparent is continued only on KindAPI routes: those
// are called by programs (MCP servers on /v1, operators' tools on the admin
// API) that trace their own calls. A browser page or probe always starts a
// new trace: a browser has no trace of its own to continue, and a
// traceparent there would only let a page someone else controls choose the
// trace a user's sign-in is recorded under, or force it to be sampled.
//
// The span carries the method, the route, the status and the request id —
// no path, query, header, cookie or body. Install it only when tracing is
// on (server: Config.Tracing): with tracing off there is no span to make.
func Tracing(tp trace.TracerProvider, lookup func(*http.Request) Route) func(http.Handler) http.Handler {
	tracer := tp.Tracer(traceScope)
	prop := propagation.TraceContext{}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)} // made once, not per request
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rt := lookup(r)
			ctx := r.Context()
			if _, ok := r.Header["Traceparent"]; ok && rt.Kind == KindAPI {
				// Looked up by its canonical name first: HeaderCarrier.Get
				// would build that name on every request.
				ctx = prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
			}
			method := spanMethod(r.Method)
			name, route := spanName(method, rt.Pattern)
			ctx, span := tracer.Start(ctx, name, opts...)
			defer span.End()
			if !span.IsRecording() {
				// Not sampled: nothing below looks at a span that does not
				// record, so the request goes on as it came, at the cost of
				// the sampler's decision alone.
				next.ServeHTTP(w, r)
				return
			}
			span.SetAttributes(attribute.String("http.request.method", method), attribute.String("http.route", route))
			if id := reqid.From(ctx); id != "" {
				span.SetAttributes(attribute.String("connectd.request_id", id))
			}
			sw := &statusWriter{ResponseWriter: w}
			next.ServeHTTP(sw, r.WithContext(ctx))
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			span.SetAttributes(attribute.Int("http.response.status_code", status))
			if status >= 500 {
				span.SetAttributes(attribute.String("error.type", strconv.Itoa(status)))
				span.SetStatus(otelcodes.Error, "")
			}
		})
	}
}

// spanName is the span name and http.route of a request with method to a
// route registered as pattern: the pattern itself when it names its method
// ("GET /c/{id}", the usual case, so no string is built), else the method
// and the pattern; the method alone when nothing matched.
func spanName(method, pattern string) (name, route string) {
	if pattern == "" {
		return method, ""
	}
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		return pattern, pattern[i+1:]
	}
	return method + " " + pattern, pattern
}

// spanMethod is r.Method when it is a standard method, else "_OTHER"
// (OpenTelemetry's convention): a method is chosen by the caller, and a span
// name must not be.
func spanMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// MuxRoutes is the lookup of Tracing for a plain http.ServeMux (the
// operators' listener): its pattern, as an asset route (no incoming trace
// context is continued there).
func MuxRoutes(m *http.ServeMux) func(*http.Request) Route {
	return func(r *http.Request) Route {
		_, pattern := m.Handler(r)
		return Route{Pattern: pattern, Kind: KindAsset}
	}
}
