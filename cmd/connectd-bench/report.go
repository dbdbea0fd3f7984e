package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// results is one whole run.
type results struct {
	Date     string   `json:"date"`
	Machine  string   `json:"machine"`
	Replicas int      `json:"replicas"`
	Users    int      `json:"users"`
	Duration string   `json:"duration_per_measurement"`
	Elapsed  string   `json:"elapsed"`
	Results  []result `json:"results"`
}

func (r *results) add(x result) { r.Results = append(r.Results, x) }

// ratios relates every connectd scenario to the baselines measured at the
// same concurrency in this run.
func (r *results) ratios() {
	base := map[string]map[int]float64{}
	for _, x := range r.Results {
		if strings.HasPrefix(x.Scenario, "trivial") || strings.HasPrefix(x.Scenario, "pgbench") {
			k := strings.Fields(x.Scenario)[0]
			if base[k] == nil {
				base[k] = map[int]float64{}
			}
			base[k][x.Concurrency] = x.RPS
		}
	}
	for i := range r.Results {
		x := &r.Results[i]
		if strings.HasPrefix(x.Scenario, "trivial") || strings.HasPrefix(x.Scenario, "pgbench") || x.Concurrency == 0 {
			continue
		}
		if t := base["trivial"][x.Concurrency]; t > 0 {
			x.VsTrivial = x.RPS / t
		}
		if p := base["pgbench"][x.Concurrency]; p > 0 {
			x.VsPgbench = x.RPS / p
		}
	}
}

func (r *results) table(w io.Writer, md bool) {
	header := []string{"scenario", "conc.", "req/s", "p50 ms", "p99 ms", "p99.9 ms", "CPU s/1k", "peak RSS MB", "vs trivial", "vs pgbench -S", "errors"}
	row := func(cells []string) {
		if md {
			fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
		} else {
			fmt.Fprintln(w, strings.Join(cells, "\t"))
		}
	}
	row(header)
	if md {
		seps := make([]string, len(header))
		for i := range seps {
			seps[i] = "---"
		}
		row(seps)
	}
	pct := func(f float64) string {
		if f == 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f %%", f*100)
	}
	num := func(f float64, format string) string {
		if f == 0 {
			return "—"
		}
		return fmt.Sprintf(format, f)
	}
	for _, x := range r.Results {
		conc := fmt.Sprint(x.Concurrency)
		if x.Offered > 0 {
			conc = fmt.Sprintf("open %d/s", x.Offered)
		}
		errs := fmt.Sprint(x.Errors)
		if x.FirstError != "" && x.RPS == 0 {
			errs = x.FirstError
		}
		row([]string{x.Scenario, conc, fmt.Sprintf("%.0f", x.RPS), num(x.P50ms, "%.2f"), num(x.P99ms, "%.2f"),
			num(x.P999ms, "%.2f"), num(x.CPUPer1k, "%.3f"), num(x.PeakRSSMB, "%.0f"), pct(x.VsTrivial), pct(x.VsPgbench), errs})
	}
}

func (r *results) print(w io.Writer) {
	fmt.Fprintf(w, "\nconnectd bench — %s\n%s; %d replica(s), %d users, %s per measurement\n\n", r.Date, r.Machine,
		r.Replicas, r.Users, r.Duration)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	r.table(tw, false)
	tw.Flush()
}

func (r *results) write(jsonPath, docPath string) error {
	if jsonPath != "" {
		if err := os.MkdirAll(filepath.Dir(jsonPath), 0o755); err != nil {
			return err
		}
		b, _ := json.MarshalIndent(r, "", "  ")
		if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if docPath == "" {
		return nil
	}
	var b strings.Builder
	b.WriteString(performanceIntro)
	fmt.Fprintf(&b, "\n## Latest run\n\n%s — %s; %d replica(s), %d seeded users, %s per measurement, whole run %s.\n\n",
		r.Date, r.Machine, r.Replicas, r.Users, r.Duration, r.Elapsed)
	r.table(&b, true)
	b.WriteString(performanceNotes)
	return os.WriteFile(docPath, []byte(b.String()), 0o644)
}

const performanceIntro = `# Performance

` + "`make bench`" + ` (REPLICAS=N for several replicas) starts the private Postgres, N connectd
replicas in dev mode, a trusted issuer (the dev IdP served by the harness), seeds
10,000 users with a connection and consent, and drives closed-loop load at 16, 64 and
256 concurrent callers, plus an open-loop (Poisson) run of the token lookup. In the same
run it measures the baselines every figure is judged against: ` + "`pgbench -S -M prepared`" + `
at the same concurrency on the same cluster, and a trivial Go HTTP handler returning 1 KB
of JSON. Ratios, not absolute numbers, are what carry over between machines.

Columns: req/s (completed), latency percentiles (closed loop: per request; open loop:
from the scheduled send time), CPU seconds of the server processes per 1,000 requests,
the peak resident set of the largest server process, and the ratio of req/s to each
baseline at the same concurrency.

This file is rewritten by every ` + "`make bench`" + ` run; the JSON is in test-output/bench.json.
`

const performanceNotes = `
## Reading the figures

- The load generator runs on the same two cores as connectd and Postgres, as the targets
  in the performance issue assume; every ratio is measured under that same contention.
- The token lookup is the hot path: client key, ES256 user-token verification, one row,
  one AES-GCM open, JSON. Mint writes one row and seals a request_state; status reads one
  row.
`
