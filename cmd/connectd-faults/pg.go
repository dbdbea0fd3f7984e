package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// postgres is the cluster the study runs on — the one its superuser URL
// reaches, found from that connection and never by name, so that no other
// cluster on the machine (another engineer's tests) is touched.
type postgres struct {
	data string   // data directory
	bin  string   // directory of its postgres and pg_ctl
	log  string   // where pg_ctl sends the server's output when it starts it
	as   []string // "runuser -u OWNER --" when we are root and the cluster is not

	mu     sync.Mutex
	frozen []int // processes stopped by freeze
}

func findPostgres(ctx context.Context, adminURL string) (*postgres, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(context.Background())
	p := &postgres{}
	if err := conn.QueryRow(cctx, "SHOW data_directory").Scan(&p.data); err != nil {
		return nil, fmt.Errorf("postgres: data directory (a superuser URL is needed): %w", err)
	}
	pid, err := p.postmaster()
	if err != nil {
		return nil, err
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return nil, fmt.Errorf("postgres: its binary (the study controls a cluster on this machine): %w", err)
	}
	p.bin = filepath.Dir(exe)
	// scripts/pg keeps the server log beside the data directory, in a
	// directory the cluster's owner may write.
	p.log = filepath.Join(filepath.Dir(p.data), "server.log")
	fi, err := os.Stat(p.data)
	if err != nil {
		return nil, err
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; os.Geteuid() == 0 && uid != 0 {
		u, err := user.LookupId(strconv.Itoa(int(uid)))
		if err != nil {
			return nil, err
		}
		p.as = []string{"runuser", "-u", u.Username, "--"}
	}
	return p, nil
}

// postmaster is the running server's process id (postmaster.pid).
func (p *postgres) postmaster() (int, error) {
	b, err := os.ReadFile(filepath.Join(p.data, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("postgres: not running: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return 0, fmt.Errorf("postgres: postmaster.pid: %w", err)
	}
	return pid, nil
}

// pgctl runs pg_ctl on the cluster as its owner. The server it starts
// writes to p.log, so that no pipe of ours stays open in it.
func (p *postgres) pgctl(ctx context.Context, args ...string) error {
	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	argv := append(append(append([]string{}, p.as...), filepath.Join(p.bin, "pg_ctl"), "-D", p.data), args...)
	out, err := exec.CommandContext(cctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// restart is pg_ctl restart -m fast: every connection is cut, the server
// comes back with the options it ran with (postmaster.opts).
func (p *postgres) restart(ctx context.Context) error {
	return p.pgctl(ctx, "-m", "fast", "-w", "-t", "60", "-l", p.log, "restart")
}

func (p *postgres) stop(ctx context.Context) error {
	return p.pgctl(ctx, "-m", "fast", "-w", "-t", "60", "stop")
}

// start starts the stopped server again with the options it last ran with:
// pg_ctl restart reads them from postmaster.opts, and on a stopped server
// it only starts.
func (p *postgres) start(ctx context.Context) error {
	return p.pgctl(ctx, "-w", "-t", "60", "-l", p.log, "restart")
}

// freeze stops (SIGSTOP) the postmaster, then every process it started: the
// server still accepts TCP connections (the kernel does) but answers
// nothing, as a database host under a kernel stall or a hung disk.
func (p *postgres) freeze() error {
	pid, err := p.postmaster()
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("postgres: SIGSTOP %d: %w", pid, err)
	}
	p.frozen = append(p.frozen, pid)
	for _, c := range children(pid) {
		if syscall.Kill(c, syscall.SIGSTOP) == nil {
			p.frozen = append(p.frozen, c)
		}
	}
	return nil
}

// thaw continues every process freeze stopped. It is safe to call at any
// time, and is deferred by run so that no frozen cluster outlives the study.
func (p *postgres) thaw() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, pid := range p.frozen {
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, err)
		}
	}
	p.frozen = nil
	return errors.Join(errs...)
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // state, ppid, ...
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}
