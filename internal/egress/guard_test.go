package egress

import (
	"errors"
	"testing"
)

// TestPublicAddressesPass checks the production guard's verdict on public
// addresses by calling the dialer's Control directly: proving the positive
// case over a socket would mean sending traffic off this machine.
func TestPublicAddressesPass(t *testing.T) {
	t.Parallel()
	guard := newNetDialer(Config{}, publicGuard()).Control
	for _, tt := range []struct {
		network, addr string
		ok            bool
	}{
		{"tcp4", "93.184.215.14:443", true},
		{"tcp4", "8.8.8.8:8443", true},
		{"tcp6", "[2606:4700:4700::1111]:443", true},
		{"tcp4", "127.0.0.1:443", false},
		{"tcp4", "169.254.169.254:80", false},
		{"tcp6", "[::1]:443", false},
		{"udp4", "8.8.8.8:443", false},
	} {
		err := guard(tt.network, tt.addr, nil)
		if ok := err == nil; ok != tt.ok {
			t.Errorf("%s %s: allowed=%v, want %v (%v)", tt.network, tt.addr, ok, tt.ok, err)
		}
		if err != nil && !errors.Is(err, ErrBlockedAddress) {
			t.Errorf("%s %s: %v is not ErrBlockedAddress", tt.network, tt.addr, err)
		}
	}
}
