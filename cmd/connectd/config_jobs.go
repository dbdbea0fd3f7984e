package main

import (
	"strings"
	"time"

	"github.com/connectd/connectd/internal/server"
)

// loadJobs reads the background jobs' variables (docs/webhooks.md): webhook
// delivery and retention, and when a job of a replica that died is taken
// over.
func (c *Config) loadJobs(e *env) {
	c.Jobs = server.JobsConfig{
		WebhookRetention: e.duration("CONNECTD_WEBHOOK_RETENTION", 30*24*time.Hour, time.Hour, 365*24*time.Hour),
		RescueAfter:      e.duration("CONNECTD_JOBS_RESCUE_AFTER", 5*time.Minute, time.Second, 24*time.Hour),
		Workers:          int(e.int32("CONNECTD_WEBHOOK_WORKERS", 8, 1, 256)),
		HealthInterval:   e.duration("CONNECTD_HEALTH_INTERVAL", time.Hour, time.Second, 7*24*time.Hour),
	}
	if v := e.str("CONNECTD_WEBHOOK_BACKOFF", ""); v != "" {
		var total time.Duration
		for _, part := range strings.Split(v, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(part))
			if err != nil || d < 100*time.Millisecond || d > 24*time.Hour {
				e.fail("CONNECTD_WEBHOOK_BACKOFF", "must be a comma-separated list of durations between 100ms and 24h (e.g. 30s,2m,10m)")
				return
			}
			total += d
			c.Jobs.WebhookBackoff = append(c.Jobs.WebhookBackoff, d)
		}
		if len(c.Jobs.WebhookBackoff) > 50 || total > 7*24*time.Hour {
			e.fail("CONNECTD_WEBHOOK_BACKOFF", "may hold at most 50 retries over at most 7 days")
		}
	}
}
