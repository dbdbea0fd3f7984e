package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// profiler saves pprof profiles of one replica while a scenario runs, so each
// hot-path change can be judged on a profile taken under the same load as the
// table (see docs/performance.md).
type profiler struct {
	dir  string
	logf func(string, ...any)
}

// during runs f while capturing a CPU profile and the allocations of p over
// d (after a warm-up of d/4, as measure does), saved as NAME-cpu.pprof and
// NAME-allocs.pprof in the profiler's directory.
func (pr *profiler) during(ctx context.Context, name string, p *process, d time.Duration, f func()) {
	if pr == nil || p.internal == "" {
		f()
		return
	}
	if err := os.MkdirAll(pr.dir, 0o755); err != nil {
		pr.logf("profile: %v", err)
		f()
		return
	}
	secs := max(1, int(d.Seconds()))
	var wg sync.WaitGroup
	for _, kind := range []string{"profile", "allocs"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ctx.Done():
				return
			case <-time.After(d / 4): // measure's warm-up
			}
			file := filepath.Join(pr.dir, name+"-cpu.pprof")
			if kind == "allocs" {
				file = filepath.Join(pr.dir, name+"-allocs.pprof")
			}
			if err := fetch(ctx, fmt.Sprintf("%s/debug/pprof/%s?seconds=%d", p.internal, kind, secs), file); err != nil {
				pr.logf("profile %s: %v", kind, err)
			}
		}()
	}
	f()
	wg.Wait()
}

func fetch(ctx context.Context, u, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
