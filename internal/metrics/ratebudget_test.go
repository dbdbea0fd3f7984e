package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/connectd/connectd/internal/metrics"
)

// TestRateBudget: the remaining budget by provider and app (the shared
// app as "shared"), never by user.
func TestRateBudget(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.RateBudget("github", "", "provider", 4999)
	m.RateBudget("notion", "app-1", "connectd", 2)
	m.RateBudget("github", "", "provider", 4998)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "connectd_proxy_rate_budget_remaining" {
			continue
		}
		for _, mt := range f.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[strings.Join(labels, ",")] = mt.GetGauge().GetValue()
		}
	}
	want := map[string]float64{"app=app-1,provider=notion,source=connectd": 2, "app=shared,provider=github,source=provider": 4998}
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("series %v, want %v", got, want)
		}
	}
	var none *metrics.Metrics
	none.RateBudget("github", "", "provider", 1) // a nil *Metrics records nothing
}
