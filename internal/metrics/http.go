package metrics

import (
	"net/http"
	"time"
)

// Routes wraps next (the public listener's whole handler chain) so that every
// request is counted by the ServeMux pattern that serves it — "GET
// /v1/connections/{provider}/token", never the path — and by the status code
// it was answered with, including refusals made before routing (rate limits,
// cross-origin checks). Requests no pattern matches count as route
// "unmatched".
func (m *Metrics) Routes(mux *http.ServeMux, next http.Handler) http.Handler {
	if m == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		route := r.Pattern // set when r itself reached the mux
		if route == "" {
			_, route = mux.Handler(r)
		}
		if route == "" {
			route = "unmatched"
		}
		code := rec.code
		if code == 0 {
			code = http.StatusOK
		}
		m.observe(route, code, time.Since(start))
	})
}

// recorder remembers the status code written.
type recorder struct {
	http.ResponseWriter
	code int
}

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer (flushes,
// deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush keeps the recorder an http.Flusher for handlers that check.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Transport instruments outbound calls to third-party providers: latency by
// host and outcome. base nil means http.DefaultTransport.
func (m *Metrics) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if m == nil {
		return base
	}
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		start := time.Now()
		resp, err := base.RoundTrip(req)
		outcome := "error"
		if err == nil {
			outcome = statusClass(resp.StatusCode)
		}
		m.provider.WithLabelValues(req.URL.Host, outcome).Observe(time.Since(start).Seconds())
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func statusClass(code int) string {
	switch {
	case code >= 500:
		return "5xx"
	case code >= 400:
		return "4xx"
	case code >= 300:
		return "3xx"
	default:
		return "2xx"
	}
}
