package cache

import (
	"sync"
	"time"
)

// Every lets an action for a key through at most once per period in this
// process: a "last used at" column is written on the first use of a minute,
// not on every request. The zero period lets every call through.
type Every struct {
	period time.Duration
	mu     sync.Mutex
	last   map[string]time.Time
}

// NewEvery returns an Every for period.
func NewEvery(period time.Duration) *Every {
	return &Every{period: period, last: map[string]time.Time{}}
}

// Due reports whether key's action should run at now, and if so records now
// as its last run.
func (e *Every) Due(key string, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if last, seen := e.last[key]; seen && now.Sub(last) < e.period {
		return false
	}
	e.last[key] = now
	return true
}
