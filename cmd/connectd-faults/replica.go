package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// replica is one connectd serve process. Its addresses are chosen once and
// kept across restarts; its output goes to a log file of its own, which the
// study reads for the lines a fault left.
type replica struct {
	name     string
	addr     string // public listener, 127.0.0.1:port
	base     string // http://addr, also its public URL
	internal string // operators' listener
	logPath  string

	cmd    *exec.Cmd
	exited chan struct{}
}

func newReplica(name, dir string) (*replica, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	iaddr, err := freePort()
	if err != nil {
		return nil, err
	}
	return &replica{name: name, addr: addr, base: "http://" + addr, internal: iaddr,
		logPath: dir + "/replica-" + name + ".log"}, nil
}

// freePort picks a free port of 127.0.0.1 below the kernel's ephemeral
// range where it is known, so that none of the study's own outbound
// connections takes it while the replica is down (a restart keeps it).
func freePort() (string, error) {
	low := 0
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			low, _ = strconv.Atoi(f[0])
		}
	}
	const minPort = 10000
	for range 100 {
		if low <= minPort {
			break
		}
		port := minPort + rand.IntN(low-minPort)
		if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			ln.Close()
			return ln.Addr().String(), nil
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// start runs connectd serve with env and waits until it is ready.
func (r *replica) start(ctx context.Context, binary string, env []string) error {
	logf, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(binary, "serve")
	cmd.Env = append(append(os.Environ(), env...),
		"CONNECTD_ADDR="+r.addr, "CONNECTD_INTERNAL_ADDR="+r.internal, "CONNECTD_PUBLIC_URL="+r.base)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	r.cmd, r.exited = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(r.exited)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(r.base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			r.stop()
			return ctx.Err()
		case <-r.exited:
			r.cmd = nil
			return fmt.Errorf("replica %s exited before it was ready (see %s)", r.name, r.logPath)
		case <-time.After(50 * time.Millisecond):
		}
	}
	r.stop()
	return fmt.Errorf("replica %s not ready after 30s (see %s)", r.name, r.logPath)
}

// stop ends the replica as an orchestrator would (SIGTERM, then SIGKILL
// after 10 s).
func (r *replica) stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
	r.cmd = nil
}

// kill ends the replica with SIGKILL: no shutdown of any kind.
func (r *replica) kill() error {
	if r.cmd == nil {
		return errors.New("replica " + r.name + " is not running")
	}
	if err := r.cmd.Process.Kill(); err != nil {
		return err
	}
	<-r.exited
	r.cmd = nil
	return nil
}

// rssMB is the replica's resident set now (VmRSS), 0 when it is not running.
func (r *replica) rssMB() float64 {
	if r.cmd == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
			return kb / 1024
		}
	}
	return 0
}

// logSize is where the replica's log ends now: lines a fault leaves are
// read from there (newLines).
func (r *replica) logSize() int64 {
	fi, err := os.Stat(r.logPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// newLines returns the log lines written since offset.
func (r *replica) newLines(offset int64) []string {
	b, err := os.ReadFile(r.logPath)
	if err != nil || int64(len(b)) < offset {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(b[offset:])), "\n")
}
