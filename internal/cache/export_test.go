package cache

import (
	"context"
	"log/slog"
	"time"
)

// FirstBackoff is the listener's wait after a connection that worked.
const FirstBackoff = firstBackoff

// SetSleep replaces h's wait between connection attempts.
func SetSleep(h *Hub, sleep func(ctx context.Context, d time.Duration) bool) { h.sleep = sleep }

// WithStaleIfError gives m a stale-if-error policy of d, as a Hub would.
func WithStaleIfError(m Held, d time.Duration) {
	p := &staleness{logger: slog.New(slog.DiscardHandler)}
	p.d.Store(int64(d))
	m.attach(p)
}

// WithStaleIfError2 gives a and b one stale-if-error policy of d, as a Hub
// would to two subscribers' caches.
func WithStaleIfError2(a, b Held, d time.Duration) {
	p := &staleness{logger: slog.New(slog.DiscardHandler)}
	p.d.Store(int64(d))
	a.attach(p)
	b.attach(p)
}
