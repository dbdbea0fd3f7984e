package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// ErrBusy is the cause of a call refused because the provider already has
// as many calls in flight from this process as it may (Options.MaxConcurrent):
// a provider that hangs holds at most that many, and its other callers hear
// ErrUnavailable quickly instead of queuing behind them.
var ErrBusy = errors.New("too many calls in flight to this provider")

// DefaultMaxConcurrent is Options.MaxConcurrent's default.
const DefaultMaxConcurrent = 16

// bulkheadWait is how long a call waits for a slot before it gives up: long
// enough to absorb a burst at a healthy provider, short enough that the
// callers of a hanging one are answered fast.
const bulkheadWait = time.Second

// bulkhead caps one provider's concurrent outbound calls. A slot is held
// from the request until its response body is closed (or the call fails).
type bulkhead struct {
	base  http.RoundTripper
	slots chan struct{}
	name  string
}

// withBulkhead returns a copy of c whose calls share one bulkhead of max
// slots.
func withBulkhead(c *http.Client, name string, max int) *http.Client {
	if max <= 0 {
		max = DefaultMaxConcurrent
	}
	cc := *c
	base := cc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cc.Transport = &bulkhead{base: base, slots: make(chan struct{}, max), name: name}
	return &cc
}

func (b *bulkhead) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := b.acquire(req.Context()); err != nil {
		if req.Body != nil {
			req.Body.Close() // RoundTripper contract
		}
		return nil, err
	}
	resp, err := b.base.RoundTrip(req)
	if err != nil {
		b.release()
		return nil, err
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: b.release}
	return resp, nil
}

func (b *bulkhead) acquire(ctx context.Context) error {
	select {
	case b.slots <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(bulkheadWait)
	defer t.Stop()
	select {
	case b.slots <- struct{}{}:
		return nil
	case <-t.C:
		return fmt.Errorf("provider %s: %w (%d)", b.name, ErrBusy, cap(b.slots))
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *bulkhead) release() { <-b.slots }

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the pool.
func (b *bulkhead) CloseIdleConnections() {
	if c, ok := b.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// releasingBody gives the slot back once, when the body is closed.
type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (r *releasingBody) Close() error {
	err := r.ReadCloser.Close()
	r.once.Do(r.release)
	return err
}
