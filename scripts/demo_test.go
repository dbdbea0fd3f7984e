// Package scripts holds the tests of the shell scripts that make demo and
// make test run; the scripts themselves are next to this file.
package scripts

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/testkit"
)

// TestMakeDemoFromPrivateCheckout runs `make demo` the way a new user does,
// from a copy of the checkout in a folder only its owner may enter (as
// `mktemp -d` makes, like /root): it must serve /readyz, and Ctrl-C must leave
// nothing running. Run as root (as CI does), the cluster's server runs as the
// postgres user, which cannot enter that folder: this is the case that once
// failed at initdb. As another user it is the everyday case.
func TestMakeDemoFromPrivateCheckout(t *testing.T) {
	for _, tool := range []string{"make", "git", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not on PATH: run make test (README)", tool)
		}
	}
	private, err := os.MkdirTemp("", "demo-checkout-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(private) })
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	checkout := filepath.Join(private, "p")
	copyCheckout(t, "..", checkout)

	free, err := testkit.FreePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	var ports []string
	for _, p := range free {
		ports = append(ports, strconv.Itoa(p))
	}
	flags := "-port " + ports[0] + " -idp-port " + ports[1] + " -provider-port " + ports[2] +
		" -mcp-port " + ports[3] + " -internal-addr 127.0.0.1:" + ports[4] + " -mcp2-port " + ports[5]
	var out bytes.Buffer
	cmd := exec.Command("make", "demo", "DEMO_FLAGS="+flags)
	cmd.Dir = checkout
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches the whole group
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		clean := exec.Command("make", "clean")
		clean.Dir, clean.Env = checkout, cleanEnv()
		if b, err := clean.CombinedOutput(); err != nil {
			t.Errorf("make clean: %v\n%s", err, b)
		}
	})

	ready := "http://127.0.0.1:" + ports[0] + "/readyz"
	deadline := time.Now().Add(5 * time.Minute) // the first run builds connectd
	for {
		resp, err := http.Get(ready)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("make demo exited before serving: %v\n%s", err, tail(out.String()))
		case <-time.After(500 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("make demo did not serve %s within 5 minutes\n%s", ready, tail(out.String()))
		}
	}

	// Ctrl-C: SIGINT to the foreground process group.
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatalf("make demo still running a minute after Ctrl-C\n%s", tail(out.String()))
	}

	clusterDir := filepath.Join(checkout, ".cache", "demo-pg")
	if os.Geteuid() == 0 {
		loc, err := os.ReadFile(filepath.Join(clusterDir, "LOCATION"))
		if err != nil {
			t.Fatalf("as root in a private folder the cluster must live elsewhere: %v", err)
		}
		clusterDir = strings.TrimSpace(string(loc))
	}
	// Kept for the next run, and stopped.
	if _, err := os.Stat(filepath.Join(clusterDir, "data", "PG_VERSION")); err != nil {
		t.Errorf("the demo's database was not kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(clusterDir, "data", "postmaster.pid")); !os.IsNotExist(err) {
		t.Errorf("PostgreSQL still running after Ctrl-C (postmaster.pid: %v)", err)
	}
	for _, p := range ports {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+p, time.Second); err == nil {
			c.Close()
			t.Errorf("port %s still served after Ctrl-C", p)
		}
	}
	if b, err := exec.Command("pgrep", "-f", private).Output(); err == nil {
		t.Errorf("processes left running after Ctrl-C:\n%s", b)
	}
	if b, err := exec.Command("pgrep", "-f", clusterDir).Output(); err == nil {
		t.Errorf("processes left running after Ctrl-C:\n%s", b)
	}
}

// copyCheckout copies the files git knows (committed or not, ignored ones
// excepted) from repo to dst, as a fresh clone with the working changes.
func copyCheckout(t *testing.T, repo, dst string) {
	t.Helper()
	ls := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	ls.Dir = repo
	names, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(names), "\x00"), "\x00") {
		src := filepath.Join(repo, name)
		fi, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, data, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// cleanEnv is this process's environment without the database make test
// provides, so make demo starts its own cluster as it does for a user.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "CONNECTD_TEST_DATABASE_URL", "CONNECTD_DATABASE_URL", "DATABASE_URL", "CONNECTD_PG_DIR", "MAKEFLAGS", "MFLAGS", "MAKELEVEL":
			continue
		}
		env = append(env, kv)
	}
	return env
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// TestPGServe: scripts/pg serve (make pg) keeps a private cluster up for
// other tools, prints a URL that works, and Ctrl-C stops it.
func TestPGServe(t *testing.T) {
	cmd := exec.Command("./pg", "serve")
	cmd.Env = cleanEnv()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	lines := make(chan string, 64)
	go func() {
		b := make([]byte, 4096)
		var acc []byte
		for {
			n, err := out.Read(b)
			acc = append(acc, b[:n]...)
			for {
				i := bytes.IndexByte(acc, '\n')
				if i < 0 {
					break
				}
				lines <- string(acc[:i])
				acc = acc[i+1:]
			}
			if err != nil {
				close(lines)
				return
			}
		}
	}()
	var url string
	deadline := time.After(2 * time.Minute)
	for url == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("scripts/pg serve ended before printing its URL")
			}
			if u, found := strings.CutPrefix(strings.TrimSpace(l), "export CONNECTD_DATABASE_URL="); found {
				url = strings.Trim(u, "'")
			}
		case <-deadline:
			t.Fatal("scripts/pg serve printed no URL within 2 minutes")
		}
	}
	psqlBin := "psql"
	if _, err := exec.LookPath(psqlBin); err != nil {
		if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql"); len(m) > 0 {
			psqlBin = m[len(m)-1]
		}
	}
	psql := exec.Command(psqlBin, url, "-tAc", "SELECT 41 + 1")
	if b, err := psql.CombinedOutput(); err != nil || strings.TrimSpace(string(b)) != "42" {
		t.Fatalf("psql on the printed URL: %v %s", err, b)
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("scripts/pg serve still running a minute after Ctrl-C")
	}
	if b, err := exec.Command(psqlBin, url, "-tAc", "SELECT 1").CombinedOutput(); err == nil {
		t.Fatalf("the cluster still answers after Ctrl-C: %s", b)
	}
}
