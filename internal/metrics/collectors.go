package metrics

import (
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/connectd/connectd/internal/cache"
)

var (
	cacheHits    = prometheus.NewDesc("connectd_cache_hits_total", "Lookups answered from an in-memory cache.", []string{"cache"}, nil)
	cacheMisses  = prometheus.NewDesc("connectd_cache_misses_total", "Lookups an in-memory cache could not answer.", []string{"cache"}, nil)
	cacheEntries = prometheus.NewDesc("connectd_cache_entries", "Entries an in-memory cache holds.", []string{"cache"}, nil)
	cacheStale   = prometheus.NewDesc("connectd_cache_stale_answers_total",
		"Lookups answered past their entry's TTL because the database was unreachable (CONNECTD_CACHE_STALE_IF_ERROR).", []string{"cache"}, nil)
)

// cacheCollector reads the caches' counters at scrape time.
type cacheCollector struct {
	mu     sync.Mutex
	caches []namedCache
}

type namedCache struct {
	name  string
	stats func() cache.Stats
}

func (c *cacheCollector) add(name string, stats func() cache.Stats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.caches = append(c.caches, namedCache{name, stats})
}

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cacheHits
	ch <- cacheMisses
	ch <- cacheEntries
	ch <- cacheStale
}

func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	caches := c.caches
	c.mu.Unlock()
	for _, nc := range caches {
		s := nc.stats()
		ch <- prometheus.MustNewConstMetric(cacheHits, prometheus.CounterValue, float64(s.Hits), nc.name)
		ch <- prometheus.MustNewConstMetric(cacheMisses, prometheus.CounterValue, float64(s.Misses), nc.name)
		ch <- prometheus.MustNewConstMetric(cacheEntries, prometheus.GaugeValue, float64(s.Entries), nc.name)
		ch <- prometheus.MustNewConstMetric(cacheStale, prometheus.CounterValue, float64(s.Stale), nc.name)
	}
}

// poolCollector reads pgxpool.Stat at scrape time.
type poolCollector struct {
	stat    func() *pgxpool.Stat
	waiting func() int64  // requests waiting for a connection (db.Waiting)
	shed    func() uint64 // acquires refused at once: their deadline could not be met, or CONNECTD_DB_MAX_WAITING (db.Shed)
}

func poolDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("connectd_db_pool_"+name, help, nil, nil)
}

var (
	poolAcquired        = poolDesc("acquired_conns", "Connections currently checked out of the pool.")
	poolIdle            = poolDesc("idle_conns", "Idle connections in the pool.")
	poolTotal           = poolDesc("total_conns", "Connections in the pool (acquired, idle and being opened).")
	poolMax             = poolDesc("max_conns", "The pool's connection limit (CONNECTD_DB_MAX_CONNS).")
	poolAcquires        = poolDesc("acquires_total", "Successful acquisitions of a connection.")
	poolAcquireSeconds  = poolDesc("acquire_duration_seconds_total", "Time spent acquiring connections.")
	poolEmptyAcquires   = poolDesc("empty_acquires_total", "Acquisitions that had to wait for a connection (the pool was empty).")
	poolCanceled        = poolDesc("canceled_acquires_total", "Acquisitions cancelled by their context.")
	poolNewConns        = poolDesc("new_conns_total", "Connections opened.")
	poolLifetimeDestroy = poolDesc("max_lifetime_destroys_total", "Connections closed for reaching CONNECTD_DB_MAX_CONN_LIFETIME.")
	poolIdleDestroy     = poolDesc("max_idle_destroys_total", "Connections closed for idling past CONNECTD_DB_MAX_CONN_IDLE_TIME.")
	poolWaiting         = poolDesc("waiting_requests", "Requests waiting for a pooled connection now (at most CONNECTD_DB_MAX_WAITING, by default the pool size × the acquire timeout ÷ 40 ms).")
	poolShed            = poolDesc("shed_acquires_total", "Requests answered 503 at once because the pool could not serve them within their acquire deadline, or CONNECTD_DB_MAX_WAITING others were already waiting.")
)

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolAcquired, poolIdle, poolTotal, poolMax, poolAcquires, poolAcquireSeconds,
		poolEmptyAcquires, poolCanceled, poolNewConns, poolLifetimeDestroy, poolIdleDestroy, poolWaiting, poolShed} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stat()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(poolAcquired, float64(s.AcquiredConns()))
	gauge(poolIdle, float64(s.IdleConns()))
	gauge(poolTotal, float64(s.TotalConns()))
	gauge(poolMax, float64(s.MaxConns()))
	counter(poolAcquires, float64(s.AcquireCount()))
	counter(poolAcquireSeconds, s.AcquireDuration().Seconds())
	counter(poolEmptyAcquires, float64(s.EmptyAcquireCount()))
	counter(poolCanceled, float64(s.CanceledAcquireCount()))
	counter(poolNewConns, float64(s.NewConnsCount()))
	counter(poolLifetimeDestroy, float64(s.MaxLifetimeDestroyCount()))
	counter(poolIdleDestroy, float64(s.MaxIdleDestroyCount()))
	gauge(poolWaiting, float64(c.waiting()))
	counter(poolShed, float64(c.shed()))
}
