package proxy

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Budget is a call's share of the provider's rate limits, kept across
// replicas by package ratebudget: Take spends one call of it before the
// provider is called, Spent records what the provider's own answer said.
// A Call without one (nil) is not budgeted.
type Budget interface {
	// Take spends one call; a non-zero until means the budget is spent
	// until then and the provider must not be called.
	Take(ctx context.Context) (until time.Time, err error)
	// Spent records that the provider said the budget is spent until
	// until (its Retry-After, X-RateLimit-Remaining: 0 with
	// X-RateLimit-Reset, or a RateLimit header of the IETF draft).
	Spent(until time.Time)
	// Remaining records the provider's own count of what is left (-1 when
	// its answer gave none), for the metrics.
	Remaining(n int)
}

// maxSpent bounds how long a provider's answer can hold a budget (a
// GitHub reset is at most an hour away).
const maxSpent = time.Hour

// admit spends one call of c's budget, or answers the *HeldError of a
// spent one (Forward's hook, before the provider is called).
func (f *Forwarder) admit(ctx context.Context, c *Call) error {
	if c.Budget == nil {
		return nil
	}
	until, err := c.Budget.Take(ctx)
	if err != nil {
		return err
	}
	if until.IsZero() {
		return nil
	}
	left := until.Sub(f.cfg.Now())
	if left < time.Second {
		left = time.Second
	}
	return &HeldError{Until: until, Left: left}
}

// observe reads the provider's rate-limit headers of resp into c's budget
// (Forward's hook, on every answer).
func (f *Forwarder) observe(c *Call, status int, h http.Header) {
	if c.Budget == nil {
		return
	}
	now := f.cfg.Now()
	remaining, until, ok := SpentUntil(status, h, now)
	c.Budget.Remaining(remaining)
	if ok {
		c.Budget.Spent(until)
	}
}

// SpentUntil reads a provider's answer: what it says is left (-1: it does
// not say) and, when nothing is, until when (ok). It reads, in this order:
// Retry-After on a 429 or 503 (seconds or an HTTP date);
// X-RateLimit-Remaining with X-RateLimit-Reset (GitHub's: the reset as
// Unix seconds; a value below 10⁹ is taken as seconds from now, the shape
// some providers use); RateLimit-Remaining with RateLimit-Reset (the IETF
// draft's -03…-06 headers: seconds from now); and the draft's RateLimit
// field, either "limit=…, remaining=…, reset=…" (-07) or
// "name";r=…;t=… (-08 and later, RateLimit-Policy naming the quota).
// A 429 that says nothing of when holds for a second. Each end is at most
// an hour away (maxSpent).
func SpentUntil(status int, h http.Header, now time.Time) (remaining int, until time.Time, ok bool) {
	remaining = -1
	clamp := func(t time.Time) (time.Time, bool) {
		if !t.After(now) {
			return time.Time{}, false
		}
		if t.After(now.Add(maxSpent)) {
			t = now.Add(maxSpent)
		}
		return t, true
	}
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		if t, ok := retryAfter(h.Get("Retry-After"), now); ok {
			if t, ok := clamp(t); ok {
				return 0, t, true
			}
		}
	}
	var reset string
	switch {
	case h.Get("X-Ratelimit-Remaining") != "":
		remaining, reset = atoi(h.Get("X-Ratelimit-Remaining")), h.Get("X-Ratelimit-Reset")
	case h.Get("Ratelimit-Remaining") != "":
		remaining, reset = atoi(h.Get("Ratelimit-Remaining")), h.Get("Ratelimit-Reset")
	case h.Get("Ratelimit") != "":
		remaining, reset = draftField(h.Get("Ratelimit"))
	}
	n, err := strconv.ParseInt(strings.TrimSpace(reset), 10, 64)
	if remaining != 0 || err != nil || n <= 0 {
		// A 429 with no word of when: a second's hold, so that a caller
		// that retries at once does not spend the app's standing.
		if status == http.StatusTooManyRequests {
			t, _ := clamp(now.Add(time.Second))
			return 0, t, true
		}
		return remaining, time.Time{}, false
	}
	t := now.Add(time.Duration(n) * time.Second)
	if n >= 1_000_000_000 {
		t = time.Unix(n, 0)
	}
	t, ok = clamp(t)
	return 0, t, ok
}

// retryAfter reads a Retry-After value: seconds or an HTTP date.
func retryAfter(v string, now time.Time) (time.Time, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, false
	}
	if s, err := strconv.Atoi(v); err == nil {
		return now.Add(time.Duration(s) * time.Second), s > 0
	}
	t, err := http.ParseTime(v)
	return t, err == nil
}

func atoi(v string) int {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// draftField reads the IETF draft's RateLimit field: remaining and reset
// of its first quota ("limit=…, remaining=…, reset=…", or
// "name";r=…;t=…). remaining is -1 when it names none.
func draftField(v string) (remaining int, reset string) {
	remaining = -1
	first, _, _ := strings.Cut(v, ",")
	if strings.Contains(v, "remaining=") { // draft -07: one item per parameter
		for _, item := range strings.Split(v, ",") {
			k, val, _ := strings.Cut(strings.TrimSpace(item), "=")
			switch k {
			case "remaining":
				remaining = atoi(val)
			case "reset":
				reset = val
			}
		}
		return remaining, reset
	}
	for _, p := range strings.Split(first, ";")[1:] { // -08: "name";r=…;t=…
		k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
		switch k {
		case "r":
			remaining = atoi(val)
		case "t":
			reset = val
		}
	}
	return remaining, reset
}
