package main

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// reserve takes a free port on 127.0.0.1 for a connectd replica and holds
// it, listening, until the replica starts (process.release): connectd needs
// its address in advance (its public URL, the issuer's registered login
// callbacks), and a port let go at once could be taken by anything in the
// minutes before the replica runs — the harness's own outbound connections
// above all (pgbench, the load), which draw their ports from the kernel's
// ephemeral range, as a :0 listener does. So the port is picked below that
// range where it is known (Linux): there the kernel never hands a port out
// by itself, and in the moment between the harness letting go and connectd
// binding, only a process asking for that very port could take it.
func reserve() (net.Listener, error) {
	if low := ephemeralLow(); low > minPort {
		for range 100 {
			port := minPort + rand.IntN(low-minPort)
			if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
				return ln, nil
			}
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

// minPort is the lowest port reserve picks, above those services are
// usually configured on (5432, 8080, 9090, ...); one in use is skipped.
const minPort = 10000

// ephemeralLow is the first port of the kernel's ephemeral range, or 0 when
// it is not known.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	low, _ := strconv.Atoi(f[0])
	return low
}
