package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/web"
)

// series returns the value of every sample of family name, keyed by its
// labels ("k=v,k=v"): the counter or gauge value, or a histogram's count.
func series(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out[strings.Join(labels, ",")] = value(m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

func TestRoutes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/connections/{provider}/token", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusNotFound)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	// A middleware that refuses before routing, and one that replaces the
	// request (as request-id middleware does): both must still be counted
	// by pattern.
	chain := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Refuse") != "" {
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), struct{}{}, 1)))
	})
	h := web.Chain(chain, web.RequestIDs, web.AccessLog(slog.New(slog.DiscardHandler), m.Observer(mux)))
	for _, c := range []struct {
		path   string
		refuse bool
	}{{"/v1/connections/github/token", false}, {"/v1/connections/slack/token", false}, {"/healthz", false},
		{"/v1/connections/github/token", true}, {"/nowhere", false}} {
		r := httptest.NewRequest(http.MethodGet, c.path, nil)
		if c.refuse {
			r.Header.Set("X-Refuse", "1")
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	got := series(t, reg, "connectd_http_request_duration_seconds")
	want := map[string]float64{
		"code=404,route=GET /v1/connections/{provider}/token": 2,
		"code=429,route=GET /v1/connections/{provider}/token": 1,
		"code=200,route=GET /healthz":                         1,
		"code=404,route=unmatched":                            1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
}

func TestCountersAndCollectors(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Flow("completed")
	m.Flow("completed")
	m.Refresh("github", "ok")
	m.Cache("credential", func() cache.Stats { return cache.Stats{Hits: 9, Misses: 1, Entries: 5} })
	m.Cache("consent", func() cache.Stats { return cache.Stats{Hits: 3} })
	pool, err := pgxpool.New(context.Background(), "postgres://u:p@127.0.0.1:1/db?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	m.Pool(pool)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
	}))
	defer provider.Close()
	client := &http.Client{Transport: m.Transport(nil)}
	resp, err := client.Get(provider.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	host := strings.TrimPrefix(provider.URL, "http://")

	for _, c := range []struct {
		name, labels string
		want         float64
	}{
		{"connectd_flows_total", "outcome=completed", 2},
		{"connectd_refreshes_total", "outcome=ok,provider=github", 1},
		{"connectd_cache_hits_total", "cache=credential", 9},
		{"connectd_cache_misses_total", "cache=credential", 1},
		{"connectd_cache_entries", "cache=credential", 5},
		{"connectd_cache_hits_total", "cache=consent", 3},
		{"connectd_db_pool_max_conns", "", float64(pool.Config().MaxConns)},
		{"connectd_provider_request_duration_seconds", "host=" + host + ",outcome=4xx", 1},
	} {
		if got := series(t, reg, c.name)[c.labels]; got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if len(series(t, reg, "go_goroutines")) == 0 || len(series(t, reg, "process_resident_memory_bytes")) == 0 {
		t.Error("runtime and process collectors are missing")
	}

	// The handler serves the text format.
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "connectd_flows_total") {
		t.Fatalf("/metrics: %d %.300s", rec.Code, rec.Body.String())
	}
}

func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.Flow("completed")
	m.Refresh("p", "ok")
	m.Cache("x", func() cache.Stats { return cache.Stats{} })
	if m.Observer(http.NewServeMux()) != nil || m.Transport(nil) != http.DefaultTransport {
		t.Fatal("nil Metrics must pass handlers and transports through")
	}
}
