package main

import (
	"net"
	"testing"
)

// TestReserve: a reserved port is held until released, and on Linux lies
// below the ephemeral range, where no outbound connection can land on it.
func TestReserve(t *testing.T) {
	t.Parallel()
	ln, err := reserve()
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if other, err := net.Listen("tcp", addr); err == nil {
		other.Close()
		t.Fatalf("%s was free while reserved", addr)
	}
	if low := ephemeralLow(); low > minPort {
		if port := ln.Addr().(*net.TCPAddr).Port; port < minPort || port >= low {
			t.Fatalf("reserved port %d, want one in [%d, %d)", port, minPort, low)
		}
	}
	ln.Close()
	again, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("%s not free once released: %v", addr, err)
	}
	again.Close()
}
