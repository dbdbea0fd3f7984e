package metrics

import "github.com/prometheus/client_golang/prometheus"

// newReceiptsDropped is connectd_receipts_dropped_total: the access
// receipts (package receipt) given up on — a full buffer, the database down
// longer than the buffer holds, a row it refused, what the last flush at
// shutdown could not write. Counted in uses, not rows.
func newReceiptsDropped(reg *prometheus.Registry) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "connectd_receipts_dropped_total",
		Help: "Uses of users' connections (proxied calls, token reads, approvals) whose access receipt was dropped: buffer full, database unavailable too long, or refused.",
	})
	reg.MustRegister(c)
	return c
}

// ReceiptsDropped counts n uses whose receipt was dropped.
func (m *Metrics) ReceiptsDropped(n int) {
	if m != nil {
		m.receiptsDropped.Add(float64(n))
	}
}
