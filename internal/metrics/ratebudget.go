package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// rateBudgets are the gauges of RateBudget, registered on first use.
type rateBudgets struct {
	once  sync.Once
	gauge *prometheus.GaugeVec
}

// RateBudget reports what is left of a provider app's rate budget, as
// connectd_proxy_rate_budget_remaining{provider, app, source}: source
// "provider" is the provider's own count in its last answer (for a
// per-user limit, the last caller's), "connectd" the tightest per-app
// window of the template's limits as this replica last claimed it (package
// ratebudget). app is the provider app's id, "shared" for the
// deployment's: one series per provider app, never per user.
func (m *Metrics) RateBudget(provider, app, source string, remaining int) {
	if m == nil {
		return
	}
	rb := &m.budgets
	rb.once.Do(func() {
		rb.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "connectd_proxy_rate_budget_remaining",
			Help: "Calls left of a provider app's rate budget (source provider: the provider's last answer; connectd: the template's per-app window).",
		}, []string{"provider", "app", "source"})
		m.reg.MustRegister(rb.gauge)
	})
	if app == "" {
		app = "shared"
	}
	rb.gauge.WithLabelValues(provider, app, source).Set(float64(remaining))
}
