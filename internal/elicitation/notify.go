package elicitation

import (
	"sync"

	"github.com/connectd/connectd/internal/cache"
)

// notifyChannel carries the id of every elicitation that left "pending".
const notifyChannel = "connectd_elicitation_done"

// Wakeups wakes long-polls (GET /v1/elicitations/{id}?wait=) when an
// elicitation finishes on any replica. It is a cache.Subscriber of the
// process's notification hub (Config.Hub) on notifyChannel: a notification
// wakes the waiters of its id, and the feed going down or coming back wakes
// every waiter, so each re-reads the database (notifications sent while
// nobody listened are lost).
type Wakeups struct {
	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
}

// NewWakeups returns wake-ups with no waiter: the Store's, and the API's by
// client id.
func NewWakeups() *Wakeups {
	return &Wakeups{waiters: map[string]map[chan struct{}]struct{}{}}
}

// subscriber is what the hub calls.
func (w *Wakeups) subscriber() cache.Subscriber {
	return cache.Subscriber{Channel: notifyChannel, Invalidate: w.wake, SetLive: func(bool) { w.wakeAll() }}
}

// Subscribe returns a channel signalled when id may have changed, and a
// function to unsubscribe.
func (w *Wakeups) Subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	set := w.waiters[id]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		w.waiters[id] = set
	}
	set[ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		delete(set, ch)
		if len(w.waiters[id]) == 0 {
			delete(w.waiters, id)
		}
		w.mu.Unlock()
	}
}

func (w *Wakeups) wake(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.waiters[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (w *Wakeups) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, set := range w.waiters {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// WakeKey wakes the waiters of id, or every waiter for cache.Flush.
func (w *Wakeups) WakeKey(id string) {
	if id == cache.Flush {
		w.wakeAll()
		return
	}
	w.wake(id)
}
