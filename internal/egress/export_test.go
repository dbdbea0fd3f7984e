package egress

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"syscall"
)

// ErrTripwire: the guard let a non-loopback address through in a test.
var ErrTripwire = errors.New("egress test tripwire: the guard allowed a non-loopback address; not dialed")

// InstallTripwire adds a check after the guard on every dial of c (made by
// New): an address that is not loopback is refused. The guard still decides
// first and tests assert its error, so a broken guard fails the tests
// instead of sending packets off this machine.
func InstallTripwire(c *http.Client) {
	d := c.Transport.(*transport).dialer
	for _, nd := range []*net.Dialer{d.public, d.loopback} {
		guard := nd.Control
		nd.Control = func(network, address string, rc syscall.RawConn) error {
			if err := guard(network, address, rc); err != nil {
				return err
			}
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !ap.Addr().Unmap().IsLoopback() {
				return ErrTripwire
			}
			return nil
		}
	}
}

// ErrorKind is the error.type of an outbound span.
var ErrorKind = errorKind
