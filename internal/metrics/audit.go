package metrics

import "github.com/prometheus/client_golang/prometheus"

// auditCounters count the audit rows connectd could not write when it meant
// to: the sampled rows (token reads, refused /v1 calls) that package connect
// writes off the request path.
type auditCounters struct {
	writeErrors prometheus.Counter
	lost        *prometheus.CounterVec
}

func newAuditCounters(reg *prometheus.Registry) auditCounters {
	a := auditCounters{
		writeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "connectd_audit_write_errors_total",
			Help: "Writes of sampled audit rows that failed; their rows are kept and written by a later round.",
		}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "connectd_audit_events_lost_total",
			Help: "Audit rows given up on, by kind: sampled rows that could not be written before the replica stopped.",
		}, []string{"kind"}),
	}
	reg.MustRegister(a.writeErrors, a.lost)
	return a
}

// AuditWriteError counts a failed write of sampled audit rows that will be
// retried.
func (m *Metrics) AuditWriteError() {
	if m != nil {
		m.audit.writeErrors.Inc()
	}
}

// AuditLost counts rows audit rows of kind that were given up on.
func (m *Metrics) AuditLost(kind string, rows int) {
	if m != nil {
		m.audit.lost.WithLabelValues(kind).Add(float64(rows))
	}
}
