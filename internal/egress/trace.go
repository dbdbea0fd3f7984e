package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// traceScope is the instrumentation scope of the outbound spans.
const traceScope = "github.com/connectd/connectd/internal/egress"

// Trace returns rt making a client span for each call whose context holds a
// recording span (a traced request or job), from that span's own provider:
// the clients New makes already do; the caller of a client New did not make
// (a test's) wraps its transport once, where that client replaces New's.
// It is idempotent: a transport that already traces is returned as it is.
//
// The span is named by the method alone and carries the method, the host and
// port, the scheme and the answer's status — never the path (the proxy's
// paths are the caller's), the query, a header or a body; an error by its
// kind only (net/http's messages quote the URL). No trace context is sent
// out: providers are third parties, and the span tree is connectd's. The
// span ends when the answer's headers arrive.
func Trace(rt http.RoundTripper) http.RoundTripper {
	if _, ok := rt.(tracing); ok {
		return rt
	}
	return &traced{base: rt}
}

// tracing marks a transport that makes its own spans.
type tracing interface{ tracesCalls() }

type traced struct{ base http.RoundTripper }

func (*traced) tracesCalls()    {}
func (*transport) tracesCalls() {}

func (t *traced) RoundTrip(req *http.Request) (*http.Response, error) {
	return roundTripTraced(req, t.base.RoundTrip)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the pool.
func (t *traced) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func roundTripTraced(req *http.Request, rt func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	parent := trace.SpanFromContext(req.Context())
	if !parent.IsRecording() {
		return rt(req)
	}
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", req.Method),
		attribute.String("server.address", req.URL.Hostname()),
		attribute.String("url.scheme", req.URL.Scheme),
	}
	if p := req.URL.Port(); p != "" {
		if n, err := strconv.Atoi(p); err == nil {
			attrs = append(attrs, attribute.Int("server.port", n))
		}
	}
	ctx, span := parent.TracerProvider().Tracer(traceScope).Start(req.Context(), req.Method,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	defer span.End()
	resp, err := rt(req.WithContext(ctx))
	if err != nil {
		span.SetAttributes(attribute.String("error.type", errorKind(err)))
		span.SetStatus(codes.Error, "")
		return nil, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetAttributes(attribute.String("error.type", strconv.Itoa(resp.StatusCode)))
		span.SetStatus(codes.Error, "")
	}
	return resp, nil
}

// errorKind names an outbound error without its text.
func errorKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, ErrBlockedAddress):
		return "blocked_address"
	case errors.Is(err, ErrInsecureScheme):
		return "insecure_scheme"
	case errors.Is(err, ErrRedirect):
		return "redirect"
	case errors.Is(err, ErrTooLarge):
		return "too_large"
	case errors.Is(err, ErrProxy): // before timeouts: a proxy's, not the target's
		return "egress_proxy"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "error"
}
