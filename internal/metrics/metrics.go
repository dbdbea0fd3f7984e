// Package metrics defines connectd's Prometheus metrics and what feeds them:
// HTTP middleware (requests by route pattern and status), counters the other
// packages reach through function values wired in cmd/connectd (flows,
// refreshes), an instrumented transport for provider calls, and collectors
// that read the caches' counters and the database pool's statistics when
// scraped. Everything is registered on a registry the caller owns and serves
// on the operators' listener; nothing uses the global default registry.
//
// It must never put a secret, a user id or any other unbounded value into a
// label: labels are route patterns, status codes, outcomes, provider names
// and hosts from configuration, and cache names.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/db"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/connectd/connectd/internal/cache"
)

// Metrics holds connectd's metrics. A nil *Metrics is valid and records
// nothing.
type Metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.HistogramVec
	flows     *prometheus.CounterVec
	refreshes *prometheus.CounterVec
	webhooks  *prometheus.CounterVec
	provider  *prometheus.HistogramVec
	proxy     *prometheus.HistogramVec

	mu       sync.RWMutex
	observer map[routeCode]prometheus.Observer // requests, resolved once per (route, code)
	caches   *cacheCollector
	audit    auditCounters // audit.go
	budgets  rateBudgets   // ratebudget.go

	receiptsDropped prometheus.Counter // receipts.go
}

type routeCode struct {
	route string
	code  int
}

// New registers connectd's metrics, and the Go runtime and process
// collectors, on reg.
func New(reg *prometheus.Registry) *Metrics {
	m := &Metrics{
		reg: reg,
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "connectd_http_request_duration_seconds",
			Help: "Requests to the public listener by route pattern and status code; _count is the request count.",
			// Long-polls wait up to 60 s.
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route", "code"}),
		flows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "connectd_flows_total",
			Help: "Elicitations that reached a final status on this replica, by outcome (completed, declined, failed, expired).",
		}, []string{"outcome"}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "connectd_refreshes_total",
			Help: "Token refreshes sent to a provider, by provider and outcome (ok, reauthorization_required, unavailable, error).",
		}, []string{"provider", "outcome"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "connectd_webhook_attempts_total",
			Help: "Webhook delivery attempts made by this replica, by outcome (delivered, failed: will be retried, gave_up: out of attempts).",
		}, []string{"outcome"}),
		provider: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "connectd_provider_request_duration_seconds",
			Help:    "Back-channel calls to third-party providers (token, refresh, revocation, discovery, key checks) by host and outcome (2xx, 4xx, 5xx, error).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"host", "outcome"}),
		proxy: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "connectd_proxy_request_duration_seconds",
			Help:    "Calls proxied to providers' APIs (/v1/proxy), by provider and the provider's status class (2xx, 3xx, 4xx, 5xx; none: no answer).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"provider", "class"}),
		observer: map[routeCode]prometheus.Observer{},
		caches:   &cacheCollector{},
	}
	m.audit = newAuditCounters(reg)
	m.receiptsDropped = newReceiptsDropped(reg)
	reg.MustRegister(m.requests, m.flows, m.refreshes, m.webhooks, m.provider, m.proxy, m.caches,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry's metrics (GET /metrics on the operators'
// listener).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Flow counts an elicitation that reached a final status.
func (m *Metrics) Flow(outcome string) {
	if m != nil {
		m.flows.WithLabelValues(outcome).Inc()
	}
}

// Webhook counts a webhook delivery attempt.
func (m *Metrics) Webhook(outcome string) {
	if m != nil {
		m.webhooks.WithLabelValues(outcome).Inc()
	}
}

// Proxy observes a proxied call to provider: the provider's status (0:
// none) and how long it took (the count is the histogram's).
func (m *Metrics) Proxy(provider string, status int, took time.Duration) {
	if m == nil {
		return
	}
	class := "none"
	if status >= 100 && status < 600 {
		class = strconv.Itoa(status/100) + "xx"
	}
	m.proxy.WithLabelValues(provider, class).Observe(took.Seconds())
}

// Refresh counts a refresh sent to provider.
func (m *Metrics) Refresh(provider, outcome string) {
	if m != nil {
		m.refreshes.WithLabelValues(provider, outcome).Inc()
	}
}

// Cache reports a cache's hit and miss counters and its size when scraped,
// as connectd_cache_{hits,misses}_total and connectd_cache_entries with the
// label cache=name. The hit ratio is hits / (hits + misses).
func (m *Metrics) Cache(name string, stats func() cache.Stats) {
	if m != nil {
		m.caches.add(name, stats)
	}
}

// Pool reports the database pool's statistics when scraped.
func (m *Metrics) Pool(pool *pgxpool.Pool) {
	if m != nil {
		m.reg.MustRegister(&poolCollector{stat: pool.Stat, waiting: func() int64 { return db.Waiting(pool) },
			shed: func() uint64 { return db.Shed(pool) }})
	}
}

// observe records one request, resolving its series once.
func (m *Metrics) observe(route string, code int, d time.Duration) {
	k := routeCode{route, code}
	m.mu.RLock()
	o, ok := m.observer[k]
	m.mu.RUnlock()
	if !ok {
		o = m.requests.WithLabelValues(route, strconv.Itoa(code))
		m.mu.Lock()
		m.observer[k] = o
		m.mu.Unlock()
	}
	o.Observe(d.Seconds())
}
