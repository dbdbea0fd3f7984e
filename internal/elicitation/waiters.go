package elicitation

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/connectd/connectd/internal/web"
)

// defaultMaxWaiters is how many long-polls one client key may hold open at
// once on a replica. Each costs two goroutines and a subscription while it
// waits; a client with more pending flows than this polls some without wait.
const defaultMaxWaiters = 64

// Waiters counts the long-polls each client holds open, so one client key
// cannot pin an unbounded number of goroutines with wait=60s polls that the
// request rate limit alone would let through.
type Waiters struct {
	max int // ≤ 0: no cap
	mu  sync.Mutex
	n   map[string]int
}

// NewWaiters caps each client at max long-polls (0: the default; negative:
// no cap).
func NewWaiters(max int) *Waiters {
	if max == 0 {
		max = defaultMaxWaiters
	}
	return &Waiters{max: max, n: map[string]int{}}
}

// Acquire takes one of client's long-poll slots, or refuses with 429 and
// Retry-After when all are taken. Call release when the poll ends.
func (w *Waiters) Acquire(client string) (release func(), err error) {
	if w.max < 0 {
		return func() {}, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n[client] >= w.max {
		return nil, &web.Error{Status: http.StatusTooManyRequests, Code: "rate_limited",
			Description: fmt.Sprintf("this client already holds %d long-polls open; poll without wait or retry shortly", w.max),
			Header:      http.Header{"Retry-After": {"1"}}}
	}
	w.n[client]++
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.n[client]--; w.n[client] == 0 {
			delete(w.n, client)
		}
	}, nil
}
