package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// pingEvery is how long the listener waits in silence before it checks that
// its connection is still there, and how long that check may take: a
// connection that died without a word (a network partition, an idle LISTEN
// cut by a NAT) is noticed within about twice this, and the caches stop
// caching. It is short because, while the listener is up, sign-out,
// revocation and consent withdrawal must reach every replica within about a
// second (DESIGN invariant 12); a ping is one round trip on the listener's
// own connection.
const pingEvery = 500 * time.Millisecond

// ListenerApplicationName is the application_name of the Hub's connection,
// so operators (and tests) can tell it apart in pg_stat_activity.
const ListenerApplicationName = "connectd-listener"

// Hub is the process's one Postgres listener: one dedicated connection
// LISTENs on the channel of every Subscriber and hands each notification to
// the subscriber of its channel. The process (internal/server) owns it and
// runs it; the packages that own caches, or wait for changes (connect's
// long-polls), only add their Subscribers.
//
// When that connection drops, every subscriber is told the feed is down
// (SetLive(false)), because notifications sent while nobody listens are
// lost: caches cache nothing new but serve what they hold until its TTL
// (SubscribeStrict ones empty themselves), and waiters wake and re-read the
// database. The Hub reconnects, its backoff starting again from firstBackoff
// after any connection that got as far as LISTEN. Once LISTEN works again
// every subscriber is told it is live (SetLive(true)): caches end the TTL of
// everything they hold and resume, waiters re-read. So a change made
// elsewhere reaches every cache within about a second while the Hub
// listens, and within an entry's TTL while it does not (plus the
// stale-if-error time while the database cannot be read, SetStaleIfError);
// nothing cached before a gap is a hit after the reconnection.
type Hub struct {
	conn   *pgx.ConnConfig // of the listener's own connection
	logger *slog.Logger
	// sleep waits d before the next connection attempt, false if ctx ended
	// first; a seam so tests see the backoff without timing it.
	sleep func(ctx context.Context, d time.Duration) bool

	stale *staleness // the stale-if-error policy of every subscriber's Caches

	mu      sync.Mutex
	subs    map[string]Subscriber // by channel
	running bool
}

// NewHub returns a Hub that listens on its own connection made from conn
// (not a pool's: LISTEN needs a session of its own, and a pooler in
// transaction mode would not give one).
func NewHub(conn *pgx.ConnConfig, logger *slog.Logger) *Hub {
	h := &Hub{conn: conn, logger: logger, sleep: sleepOrDone, subs: map[string]Subscriber{},
		stale: &staleness{logger: logger}}
	h.SetStaleIfError(DefaultStaleIfError)
	return h
}

// The listener's reconnection backoff: firstBackoff after a connection that
// worked, doubling while connecting fails, up to maxBackoff.
const (
	firstBackoff = 100 * time.Millisecond
	maxBackoff   = 5 * time.Second
)

// sleepOrDone is Hub.sleep outside tests.
func sleepOrDone(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Add subscribes s to its channel. It must be called before Run: the
// channels are LISTENed to when the connection is made. A channel has one
// subscriber; adding a second is a wiring mistake and panics.
func (h *Hub) Add(subs ...Subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running {
		panic("cache: Hub.Add after Run")
	}
	for _, s := range subs {
		if _, dup := h.subs[s.Channel]; dup {
			panic(fmt.Sprintf("cache: two subscribers for channel %q", s.Channel))
		}
		h.subs[s.Channel] = s
		for _, c := range s.Caches {
			c.attach(h.stale)
		}
	}
}

// setLive tells every subscriber whether the feed of notifications is up.
func (h *Hub) setLive(live bool) {
	for _, s := range h.subs {
		if s.SetLive != nil {
			s.SetLive(live)
		}
	}
}

// Run listens until ctx ends, reconnecting with backoff. It is called once.
func (h *Hub) Run(ctx context.Context) {
	h.mu.Lock()
	h.running = true
	h.mu.Unlock()
	defer h.setLive(false)
	backoff := firstBackoff
	for ctx.Err() == nil {
		listened, err := h.listen(ctx)
		h.setLive(false) // at once: nothing read from now on may be cached
		if ctx.Err() != nil {
			return
		}
		if listened {
			// This connection worked: a new outage, not more of the last one.
			backoff = firstBackoff
		}
		h.logger.WarnContext(ctx, "database notifications interrupted; caching paused until the listener reconnects",
			slog.Any("error", err), slog.Duration("retry_in", backoff))
		if !h.sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// listen connects, LISTENs on every channel and hands out notifications
// until the connection fails or ctx ends. listened reports whether it got as
// far as LISTENing.
func (h *Hub) listen(ctx context.Context) (listened bool, err error) {
	cc := h.conn.Copy()
	cc.RuntimeParams["application_name"] = ListenerApplicationName
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return false, err
	}
	defer func() {
		// Bounded: the connection may be the one that died.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	for ch := range h.subs {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return false, err
		}
	}
	// Listening: from here on every change is announced to us. Whatever was
	// cached before (or changed while we were not listening) is read again
	// before it answers, and whoever waits re-reads.
	h.setLive(true)
	h.stale.resynced(ctx)
	for {
		wctx, cancel := context.WithTimeout(ctx, pingEvery)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if n != nil {
			if s, ok := h.subs[n.Channel]; ok && s.Invalidate != nil {
				s.Invalidate(n.Payload)
			}
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return true, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			// Quiet for a while: make sure the connection is still there.
			pctx, cancel := context.WithTimeout(ctx, pingEvery)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return true, err
			}
		default:
			return true, err
		}
	}
}

// DefaultStaleIfError is how long past its TTL a cached entry may answer a
// lookup whose database read failed because the database is unreachable
// (CONNECTD_CACHE_STALE_IF_ERROR).
const DefaultStaleIfError = 60 * time.Second

// staleness is a Hub's stale-if-error policy, shared by the Maps its
// subscribers list (Subscriber.Caches): the time, and the outage's log
// line.
type staleness struct {
	d      atomic.Int64 // the stale-if-error time; ≤ 0: off
	logger *slog.Logger
	last   atomic.Int64  // Unix nanoseconds of the latest stale answer; 0: none since the feed came back
	count  atomic.Uint64 // stale answers since the feed came back

	// down is the Unix nanoseconds at which a read last found the database
	// unreachable, 0 once the database answered since (Map.Lookup answers
	// stale entries at once while it is not 0); probed is when Lookup last
	// let a read through to find out whether it is back, or when a read
	// last failed, whichever is later.
	down, probed atomic.Int64
}

// probeEvery is how often, while the database is known unreachable, a
// lookup that could be answered stale at once reads the database instead:
// a probeEvery after the last read that failed or the last probe begun.
const probeEvery = time.Second

// unreachable records that a read found the database unreachable at now:
// the next probe is a probeEvery later.
func (p *staleness) unreachable(now time.Time) {
	if p.down.Load() == 0 {
		p.down.Store(now.UnixNano())
	}
	p.probed.Store(now.UnixNano())
}

// answered records that the database answered a read.
func (p *staleness) answered() {
	if p != nil && p.down.Load() != 0 {
		p.down.Store(0)
	}
}

// probe reports whether the lookup at now is the one a second that reads
// the database rather than answer stale at once.
func (p *staleness) probe(now time.Time) bool {
	last := p.probed.Load()
	return now.UnixNano()-last >= int64(probeEvery) && p.probed.CompareAndSwap(last, now.UnixNano())
}

// window is the stale-if-error time; 0 for a nil policy.
func (p *staleness) window() time.Duration {
	if p == nil {
		return 0
	}
	return time.Duration(p.d.Load())
}

// served records one stale answer, and logs the first of an outage: the
// first since the feed came back, or since a whole stale-if-error time
// without one.
func (p *staleness) served(ctx context.Context, now time.Time) {
	p.count.Add(1)
	t := now.UnixNano()
	if prev := p.last.Swap(t); prev == 0 || t-prev > p.d.Load() {
		p.logger.WarnContext(ctx, "database unreachable; cached entries answer past their TTL",
			slog.Duration("stale_if_error", p.window()))
	}
}

// resynced is told the feed is back: every cache's entries are read again
// before they answer, and the next stale answer is a new outage's.
func (p *staleness) resynced(ctx context.Context) {
	p.last.Store(0)
	p.answered()
	if n := p.count.Swap(0); n > 0 {
		p.logger.InfoContext(ctx, "database notifications back; cached entries are read again before they answer",
			slog.Uint64("stale_answers", n))
	}
}

// SetStaleIfError sets how long past its TTL an entry of a subscriber's
// caches may answer while the database is unreachable (default
// DefaultStaleIfError; 0 or less: never). Entries put before keep the time
// they were put with.
func (h *Hub) SetStaleIfError(d time.Duration) { h.stale.d.Store(int64(d)) }
