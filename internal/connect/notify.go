package connect

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// notifyChannel carries the id of every elicitation that left "pending".
const notifyChannel = "connectd_elicitation_done"

// hub wakes long-polls when an elicitation finishes on any replica: one
// dedicated connection LISTENs and fans notifications out to local waiters.
// When that connection drops, every waiter is woken so it re-reads the
// database; nothing is missed, at worst a waiter looks once more.
type hub struct {
	pool   *pgxpool.Pool
	logger *slog.Logger

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	ready   chan struct{} // closed once the first LISTEN succeeded
	once    sync.Once
}

func newHub(pool *pgxpool.Pool, logger *slog.Logger) *hub {
	return &hub{pool: pool, logger: logger, waiters: map[string]map[chan struct{}]struct{}{}, ready: make(chan struct{})}
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

// run listens until ctx ends, reconnecting with backoff.
func (h *hub) run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := h.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		h.logger.WarnContext(ctx, "elicitation notifications interrupted; reconnecting", slog.Any("error", err))
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

func (h *hub) listen(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, h.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	h.once.Do(func() { close(h.ready) })
	// Anything that finished while we were not listening is picked up by the
	// waiters' own re-read.
	h.wakeAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		h.wake(n.Payload)
	}
}
