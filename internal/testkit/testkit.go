// Package testkit is the one home of the small fakes every package's tests
// need: a settable clock and a log buffer safe for concurrent writers. The
// scripted browser is internal/flowtest; fake third parties are
// internal/provider/providertest and internal/devidp.
//
// It is test support: production code never imports it (cmd/connectd's
// TestNoTestCodeLinked checks the binary's dependencies).
package testkit

import (
	"bytes"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"
)

// Clock is a settable clock; its Now is the seam (a func() time.Time) that
// stores and servers take. The zero Clock reads the zero time.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// LogBuffer collects log output written from several goroutines.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// FreePorts returns n TCP ports free on 127.0.0.1 right now (each was bound,
// then released, so another process may still take one before the caller).
// They are picked below the kernel's ephemeral range (ip_local_port_range,
// 32768 and up by default), where the source ports of outgoing connections
// come from: a port from :0 was often taken, between release and use, by one
// of the many connections a parallel test run opens, and the later bind
// failed with "address already in use". Only if no port there can be bound
// does it fall back to :0.
func FreePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for len(ports) < n {
		ln, err := listenBelowEphemeral()
		if err != nil {
			if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				return nil, err
			}
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// listenBelowEphemeral binds a random free port of 20000-32767.
func listenBelowEphemeral() (net.Listener, error) {
	const lo, hi = 20000, 32768
	var err error
	for range 64 {
		var ln net.Listener
		port := lo + rand.IntN(hi-lo)
		if ln, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			return ln, nil
		}
	}
	return nil, err
}
