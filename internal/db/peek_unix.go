//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package db

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// endedByServer reports whether the idle connection c has something to read
// — the server's last words, or its close — or is broken; false when that
// cannot be told (a connection that is not a socket).
func endedByServer(c net.Conn) bool {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn() // a TLS record waiting is as telling as a byte
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	var perr error
	// Control, not Read: pgconn's background reader may be blocked in a
	// read of this connection (started by a slow write, it reads until
	// something comes), holding the descriptor's read lock. A peek that
	// does not wait needs no lock, and sees what arrives after that reader
	// took what it reads: the close.
	if err := rc.Control(func(fd uintptr) {
		var b [1]byte
		_, _, perr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}); err != nil {
		return true
	}
	if perr != nil {
		return !errors.Is(perr, syscall.EAGAIN) && !errors.Is(perr, syscall.EWOULDBLOCK) && !errors.Is(perr, syscall.EINTR)
	}
	return true // n > 0: unsolicited bytes; n == 0: the server closed it
}
