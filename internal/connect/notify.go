package connect

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/cache"
)

// notifyChannel carries the id of every elicitation that left "pending".
const notifyChannel = "connectd_elicitation_done"

// pingEvery is how long the listener waits in silence before it checks that
// its connection is still there: a connection that died without a word (a
// network partition) is noticed within about this long, and the caches stop
// trusting themselves.
const pingEvery = 5 * time.Second

// hub is the process's one Postgres listener. It wakes long-polls when an
// elicitation finishes on any replica, and hands cache invalidations to the
// packages that own the caches (vault's credentials, mcpauth's client keys,
// connect's consents, session's live browser sessions; see package cache): one dedicated connection LISTENs
// on every channel and dispatches by channel.
//
// When that connection drops, every waiter is woken so it re-reads the
// database, and every cache is emptied and stops caching (notifications sent
// while nobody listens are lost); once LISTEN works again the caches are
// emptied once more and resume. Nothing is missed: at worst a waiter looks
// once more and a cache misses.
type hub struct {
	conn   *pgx.ConnConfig // of the listener's own connection
	logger *slog.Logger
	subs   map[string]cache.Subscriber // by channel

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	ready   chan struct{} // closed once the first LISTEN succeeded
	once    sync.Once
}

func newHub(conn *pgx.ConnConfig, logger *slog.Logger, subs ...cache.Subscriber) *hub {
	h := &hub{conn: conn, logger: logger, subs: map[string]cache.Subscriber{},
		waiters: map[string]map[chan struct{}]struct{}{}, ready: make(chan struct{})}
	for _, s := range subs {
		h.subs[s.Channel] = s
	}
	return h
}

// runHub runs the hub with the session store's cache subscribed as well:
// the session store is the connect pages' (so its cache of live sessions is
// this process's to keep fresh) and a sign-out or an admin's "end sessions"
// on any replica must reach it within a second. Called once, from Run,
// before the hub starts reading subs.
func (s *Server) runHub(ctx context.Context) {
	sub := s.sessions.CacheSubscriber()
	s.hub.subs[sub.Channel] = sub
	s.hub.run(ctx)
}

// subscribe returns a channel signalled when id may have changed, and a
// function to unsubscribe.
func (h *hub) subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	set := h.waiters[id]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		h.waiters[id] = set
	}
	set[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(set, ch)
		if len(h.waiters[id]) == 0 {
			delete(h.waiters, id)
		}
		h.mu.Unlock()
	}
}

func (h *hub) wake(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.waiters[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (h *hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.waiters {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// setLive tells every cache whether the feed of invalidations is up.
func (h *hub) setLive(live bool) {
	for _, s := range h.subs {
		if s.SetLive != nil {
			s.SetLive(live)
		}
	}
}

// run listens until ctx ends, reconnecting with backoff.
func (h *hub) run(ctx context.Context) {
	defer h.setLive(false)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := h.listen(ctx)
		h.setLive(false) // first, before anything else can read a cache
		if ctx.Err() != nil {
			return
		}
		h.logger.WarnContext(ctx, "database notifications interrupted; caches flushed; reconnecting", slog.Any("error", err))
		h.wakeAll()
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
	}
}

// ListenerApplicationName is the application_name of the listener's
// connection, so operators (and tests) can tell it apart in pg_stat_activity.
const ListenerApplicationName = "connectd-listener"

func (h *hub) listen(ctx context.Context) error {
	cc := h.conn.Copy()
	cc.RuntimeParams["application_name"] = ListenerApplicationName
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return err
	}
	defer func() {
		// Bounded: the connection may be the one that died.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	channels := []string{notifyChannel}
	for ch := range h.subs {
		channels = append(channels, ch)
	}
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	// Listening: from here on every change is announced to us. Whatever was
	// cached before (or changed while we were not listening) is dropped.
	h.setLive(true)
	h.once.Do(func() { close(h.ready) })
	// Anything that finished while we were not listening is picked up by the
	// waiters' own re-read.
	h.wakeAll()
	for {
		wctx, cancel := context.WithTimeout(ctx, pingEvery)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if n != nil {
			h.dispatch(n.Channel, n.Payload)
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			// Quiet for a while: make sure the connection is still there.
			pctx, cancel := context.WithTimeout(ctx, pingEvery)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return err
			}
		default:
			return err
		}
	}
}

func (h *hub) dispatch(channel, payload string) {
	if channel == notifyChannel {
		h.wake(payload)
		return
	}
	if s, ok := h.subs[channel]; ok && s.Invalidate != nil {
		s.Invalidate(payload)
	}
}
