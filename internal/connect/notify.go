package connect

import (
	"sync"

	"github.com/connectd/connectd/internal/cache"
)

// notifyChannel carries the id of every elicitation that left "pending".
const notifyChannel = "connectd_elicitation_done"

// wakeups wakes long-polls (GET /v1/elicitations/{id}?wait=) when an
// elicitation finishes on any replica. It is a cache.Subscriber of the
// process's notification hub (Config.Hub) on notifyChannel: a notification
// wakes the waiters of its id, and the feed going down or coming back wakes
// every waiter, so each re-reads the database (notifications sent while
// nobody listened are lost).
type wakeups struct {
	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
}

func newWakeups() *wakeups {
	return &wakeups{waiters: map[string]map[chan struct{}]struct{}{}}
}

// subscriber is what the hub calls.
func (w *wakeups) subscriber() cache.Subscriber {
	return cache.Subscriber{Channel: notifyChannel, Invalidate: w.wake, SetLive: func(bool) { w.wakeAll() }}
}

// subscribe returns a channel signalled when id may have changed, and a
// function to unsubscribe.
func (w *wakeups) subscribe(id string) (<-chan struct{}, func()) {
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

func (w *wakeups) wake(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.waiters[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (w *wakeups) wakeAll() {
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

// wakeKey wakes the waiters of id, or every waiter for cache.Flush.
func (w *wakeups) wakeKey(id string) {
	if id == cache.Flush {
		w.wakeAll()
		return
	}
	w.wake(id)
}
