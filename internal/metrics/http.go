package metrics

import (
	"net/http"
	"time"
)

// Observer counts every request of the public listener by the ServeMux
// pattern that served it — "GET /v1/connections/{provider}/token", never the
// path — and by its status, including refusals made before routing (rate
// limits, cross-origin checks), which are attributed to the pattern mux would
// have chosen; requests no pattern matches count as route "unmatched". Pass it
// as web.PublicConfig.Observe: the access log already measures each request,
// so the route table is matched again only for requests refused before it.
func (m *Metrics) Observer(mux interface {
	Handler(*http.Request) (http.Handler, string)
}) func(r *http.Request, status int, d time.Duration) {
	if m == nil {
		return nil
	}
	return func(r *http.Request, status int, d time.Duration) {
		route := r.Pattern
		if route == "" {
			_, route = mux.Handler(r)
		}
		if route == "" {
			route = "unmatched"
		}
		m.observe(route, status, d)
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
