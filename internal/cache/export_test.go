package cache

import (
	"context"
	"time"
)

// FirstBackoff is the listener's wait after a connection that worked.
const FirstBackoff = firstBackoff

// SetSleep replaces h's wait between connection attempts.
func SetSleep(h *Hub, sleep func(ctx context.Context, d time.Duration) bool) { h.sleep = sleep }
