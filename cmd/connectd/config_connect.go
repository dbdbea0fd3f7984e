package main

import "time"

// ConnectConfig configures the connect flow and the /v1 API.
type ConnectConfig struct {
	ElicitationTTL  time.Duration // CONNECTD_ELICITATION_TTL: how long a connect URL stays usable.
	RequestStateTTL time.Duration // CONNECTD_REQUEST_STATE_TTL: how long a request_state can be resolved.
}

// loadConnect reads the connect-flow variables (see docs/configuration.md).
func (c *Config) loadConnect(e *env) {
	c.Connect = ConnectConfig{
		ElicitationTTL:  e.duration("CONNECTD_ELICITATION_TTL", 15*time.Minute, time.Minute, 24*time.Hour),
		RequestStateTTL: e.duration("CONNECTD_REQUEST_STATE_TTL", time.Hour, time.Minute, 7*24*time.Hour),
	}
	if c.Connect.RequestStateTTL < c.Connect.ElicitationTTL {
		e.fail("CONNECTD_REQUEST_STATE_TTL", "must not be shorter than CONNECTD_ELICITATION_TTL")
	}
}
