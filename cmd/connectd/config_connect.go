package main

import (
	"time"

	"github.com/connectd/connectd/internal/server"
)

// loadConnect reads the connect-flow variables (see docs/configuration.md).
func (c *Config) loadConnect(e *env) {
	c.Connect = server.ConnectConfig{
		ElicitationTTL:  e.duration("CONNECTD_ELICITATION_TTL", 15*time.Minute, time.Minute, 24*time.Hour),
		RequestStateTTL: e.duration("CONNECTD_REQUEST_STATE_TTL", time.Hour, time.Minute, 7*24*time.Hour),
	}
	if c.Connect.RequestStateTTL < c.Connect.ElicitationTTL {
		e.fail("CONNECTD_REQUEST_STATE_TTL", "must not be shorter than CONNECTD_ELICITATION_TTL")
	}
}
