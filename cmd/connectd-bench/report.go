package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
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
	OpenRate int      `json:"open_loop_rate"`
	MemLimit string   `json:"gomemlimit,omitempty"`
	Elapsed  string   `json:"elapsed"`
	Results  []result `json:"results"`
	// Profile is where replica 0 spent its CPU during the token lookup at
	// the profiled concurrency.
	Profile      []profileLine `json:"token_profile,omitempty"`
	ProfileLevel int           `json:"token_profile_concurrency,omitempty"`
	// ProxyProfile is the same for the 1 KB GET through the proxy.
	ProxyProfile []profileLine `json:"proxy_profile,omitempty"`
	// The orgs scenario's organizations, users per organization and seeding
	// time (zero, "": not measured).
	Orgs     int    `json:"orgs,omitempty"`
	OrgUsers int    `json:"users_per_org,omitempty"`
	OrgSeed  string `json:"org_seed,omitempty"`
}

func (r *results) add(x result) { r.Results = append(r.Results, x) }

func (r *results) memLimitNote() string {
	if r.MemLimit == "" {
		return " (no GOMEMLIMIT)"
	}
	return " (GOMEMLIMIT=" + r.MemLimit + ")"
}

// baseline reports whether scenario measures something other than
// connectd: the trivial handler, pgbench, or the provider's API called
// directly (its CPU and RSS are the upstream server's) or through the bare
// reverse proxy (its CPU and RSS are that proxy's).
func baseline(scenario string) bool {
	return strings.HasPrefix(scenario, "trivial") || strings.HasPrefix(scenario, "pgbench") || scenario == scenarioDirect ||
		scenario == scenarioBare
}

// ratios relates every connectd scenario to the baselines measured at the
// same concurrency in this run, and the 1 KB GET through the proxy to the
// direct one.
func (r *results) ratios() {
	base := map[string]map[int]float64{}
	direct, bare := map[int]result{}, map[int]result{}
	for _, x := range r.Results {
		if x.Scenario == scenarioDirect {
			direct[x.Concurrency] = x
		}
		if x.Scenario == scenarioBare {
			bare[x.Concurrency] = x
		}
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
		if baseline(x.Scenario) || x.Concurrency == 0 {
			continue
		}
		if d, ok := direct[x.Concurrency]; ok && x.Scenario == scenarioProxy && d.RPS > 0 && x.RPS > 0 {
			added := x.P50ms - d.P50ms
			x.VsDirect, x.P50AddedMs = x.RPS/d.RPS, &added
		}
		if b, ok := bare[x.Concurrency]; ok && x.Scenario == scenarioProxy && b.RPS > 0 && x.RPS > 0 {
			added := x.P50ms - b.P50ms
			x.VsBare, x.P50AddedBareMs = x.RPS/b.RPS, &added
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
	fmt.Fprintf(w, "\nconnectd bench — %s\n%s; %d replica(s)%s, %d users, %s per measurement\n\n", r.Date, r.Machine,
		r.Replicas, r.memLimitNote(), r.Users, r.Duration)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	r.table(tw, false)
	tw.Flush()
	var b strings.Builder
	r.orgsTable(&b)
	r.proxyTable(&b)
	r.tracingTable(&b)
	fmt.Fprint(w, b.String())
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
	fmt.Fprintf(&b, "\n## Latest run\n\n%s — %s; %d replica(s)%s, %d seeded users, %s per measurement, whole run %s.\n\n",
		r.Date, r.Machine, r.Replicas, r.memLimitNote(), r.Users, r.Duration, r.Elapsed)
	r.table(&b, true)
	b.WriteString("\n## Targets\n\nFrom the performance issue, judged on this run's table.\n\n")
	b.WriteString("| target | measured | met |\n| --- | --- | --- |\n")
	for _, t := range r.targets() {
		met := "no"
		if t.Met {
			met = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", t.What, t.Got, met)
	}
	r.orgsTable(&b)
	r.proxyTable(&b)
	r.tracingTable(&b)
	if len(r.Profile) > 0 {
		fmt.Fprintf(&b, "\n## Where the time goes\n\nCPU profile of replica 0 during the token lookup at %d callers "+
			"(inclusive share of that process's CPU time; nested rows are part of the rows above them).\n\n", r.ProfileLevel)
		b.WriteString("| frame | what | share |\n| --- | --- | --- |\n")
		for _, l := range r.Profile {
			fmt.Fprintf(&b, "| `%s` | %s | %.1f %% |\n", l.Frame, l.What, l.Cum)
		}
	}
	if len(r.ProxyProfile) > 0 {
		if len(r.Profile) == 0 {
			b.WriteString("\n## Where the time goes\n")
		}
		fmt.Fprintf(&b, "\nCPU profile of replica 0 during the 1 KB GET through the proxy at %d callers (the same shares).\n\n",
			r.ProfileLevel)
		b.WriteString("| frame | what | share |\n| --- | --- | --- |\n")
		for _, l := range r.ProxyProfile {
			fmt.Fprintf(&b, "| `%s` | %s | %.1f %% |\n", l.Frame, l.What, l.Cum)
		}
	}
	b.WriteString(performanceNotes)
	return os.WriteFile(docPath, []byte(b.String()), 0o644)
}

// target is one goal of the performance issue, judged on a run.
type target struct {
	What string
	Got  string
	Met  bool
}

// find returns the result of scenario at concurrency c (0: the best
// req/s over all levels).
func (r *results) find(scenario string, c int) (result, bool) {
	var best result
	found := false
	for _, x := range r.Results {
		if x.Scenario != scenario {
			continue
		}
		if c != 0 && x.Concurrency == c {
			return x, true
		}
		if c == 0 && (!found || x.RPS > best.RPS) {
			best, found = x, true
		}
	}
	return best, found && c == 0
}

// percentDown shows a ratio as a percentage rounded down to one decimal, so
// that a target just missed never reads as met ("24.9 %", not "25 %").
func percentDown(f float64) string {
	return fmt.Sprintf("%.1f %%", math.Floor(f*1000)/10)
}

func (r *results) targets() []target {
	var out []target
	add := func(what string, x result, ok bool, got func(result) (string, bool)) {
		if !ok {
			out = append(out, target{What: what, Got: "not measured"})
			return
		}
		g, met := got(x)
		out = append(out, target{What: what, Got: g, Met: met})
	}
	tok, ok := r.find(scenarioToken, 64)
	add("token lookup ≥ 50 % of the trivial handler's req/s at 64 callers", tok, ok, func(x result) (string, bool) {
		return fmt.Sprintf("%s (%.0f req/s)", percentDown(x.VsTrivial), x.RPS), x.VsTrivial >= 0.5
	})
	add("token lookup p99 ≤ 10 ms at 64 callers", tok, ok, func(x result) (string, bool) {
		return fmt.Sprintf("%.2f ms", x.P99ms), x.P99ms <= 10
	})
	nc, ok := r.find(scenarioNoCache, 64)
	add("credential cache off: ≥ 25 % of pgbench -S at 64 callers", nc, ok, func(x result) (string, bool) {
		return fmt.Sprintf("%s (%.0f req/s)", percentDown(x.VsPgbench), x.RPS), x.VsPgbench >= 0.25
	})
	open, ok := r.find(scenarioOpen, 0)
	trivOpen, trivOK := r.find(scenarioTrivialOpen, 0)
	add(fmt.Sprintf("open loop p99 ≤ 3 ms at %d req/s offered", r.OpenRate), open, ok, func(x result) (string, bool) {
		g := fmt.Sprintf("%.2f ms (%.0f req/s done; generator sent late by %.2f ms at p99, priority %s)",
			x.P99ms, x.RPS, x.SendLateP99ms, x.Priority)
		if trivOK {
			g += fmt.Sprintf("; the trivial handler under the same load: %.2f ms", trivOpen.P99ms)
		}
		return g, x.P99ms <= 3 && r.OpenRate >= 5000
	})
	mint, ok := r.find(scenarioMint, 0)
	add("mint ≥ 5,000/s", mint, ok, func(x result) (string, bool) {
		return fmt.Sprintf("%.0f/s at %d callers", x.RPS, x.Concurrency), x.RPS >= 5000
	})
	flow, ok := r.find(scenarioFlow, 0)
	add("browser flow ≥ 300 flows/s", flow, ok, func(x result) (string, bool) {
		return fmt.Sprintf("%.0f/s at %d callers", x.RPS, x.Concurrency), x.RPS >= 300
	})
	// The proxy against its in-run bound, the bare reverse proxy (issue 35):
	// the "50 % of direct" of issue 25 is out of reach on two shared cores
	// even for the bare proxy; what is connectd's own is the gap to it.
	px, ok := r.find(scenarioProxy, 64)
	add("provider GET 1 KB through the proxy ≥ 60 % of the bare reverse proxy's req/s at 64 callers", px, ok && px.VsBare > 0,
		func(x result) (string, bool) {
			return fmt.Sprintf("%s (%.0f against %.0f req/s; %s of the direct GET)", percentDown(x.VsBare), x.RPS, x.RPS/x.VsBare,
				percentDown(x.VsDirect)), x.VsBare >= 0.6
		})
	px16, ok16 := r.find(scenarioProxy, 16)
	add("provider GET 1 KB through the proxy adds ≤ 1 ms to the bare reverse proxy's p50 at 16 callers", px16,
		ok16 && px16.P50AddedBareMs != nil, func(x result) (string, bool) {
			return fmt.Sprintf("%+.2f ms (p50 %.2f against %.2f ms)", *x.P50AddedBareMs, x.P50ms, x.P50ms-*x.P50AddedBareMs),
				*x.P50AddedBareMs <= 1
		})
	b64, bok := r.find(scenarioBare, 64)
	t64, tok64 := r.find(scenarioToken, 64)
	add("connectd's CPU per proxied 1 KB GET ≤ the token lookup's + the bare reverse proxy's + 0.05 ms at 64 callers", px,
		ok && bok && tok64 && px.CPUPer1k > 0 && b64.CPUPer1k > 0 && t64.CPUPer1k > 0, func(x result) (string, bool) {
			bound := t64.CPUPer1k + b64.CPUPer1k
			return fmt.Sprintf("%.3f ms (token lookup %.3f + bare proxy %.3f = %.3f, %+.3f ms)", x.CPUPer1k, t64.CPUPer1k,
				b64.CPUPer1k, bound, x.CPUPer1k-bound), x.CPUPer1k <= bound+0.05
		})
	large, ok := r.find(scenarioProxyLarge, 64)
	add("provider GET 256 KB through the proxy at 64 callers: connectd RSS ≤ 64 MB (streamed, not buffered)", large, ok,
		func(x result) (string, bool) {
			return fmt.Sprintf("%.0f MB peak%s, %.0f req/s (%.0f MB/s)", x.PeakRSSMB, r.memLimitNote(), x.RPS, x.RPS*float64(apiLarge.size)/1e6),
				x.PeakRSSMB > 0 && x.PeakRSSMB <= 64 && x.Errors == 0
		})
	var rssMax, rssFlow float64
	for _, x := range r.Results {
		if baseline(x.Scenario) {
			continue
		}
		rssMax = max(rssMax, x.PeakRSSMB)
		if x.Scenario == scenarioFlow {
			rssFlow = max(rssFlow, x.PeakRSSMB)
		}
	}
	out = append(out, target{What: "connectd RSS ≤ 64 MB under the browser-flow load",
		Got: fmt.Sprintf("%.0f MB", rssFlow), Met: rssFlow > 0 && rssFlow <= 64})
	out = append(out, target{What: "connectd RSS ≤ 64 MB in every scenario",
		Got: fmt.Sprintf("%.0f MB at most", rssMax), Met: rssMax > 0 && rssMax <= 64})
	return out
}

// proxyTable writes the proxy's figures at each level, when measured: the
// 1 KB GET through the proxy against the same GET straight to the
// provider's API, and the 256 KB GET's peak RSS against the budget.
func (r *results) proxyTable(b *strings.Builder) {
	var levels []int
	for _, x := range r.Results {
		if (x.Scenario == scenarioProxy || x.Scenario == scenarioProxyLarge) && !slices.Contains(levels, x.Concurrency) {
			levels = append(levels, x.Concurrency)
		}
	}
	if len(levels) == 0 {
		return
	}
	b.WriteString("\n## Provider API proxy\n\nThe rows `provider GET …` above, side by side: the 1 KB GET through connectd's proxy " +
		"against the same GET made straight to the provider's API with the access token in hand and against the same GET " +
		"through a bare reverse proxy (the standard library's httputil.ReverseProxy checking a static key in constant time " +
		"and injecting the bearer header: the in-run bound), with CPU per call (connectd's; the bare proxy's own), and the " +
		"256 KB GET through the proxy with connectd's peak RSS against its 64 MB budget" + r.memLimitNote() + ".\n\n")
	b.WriteString("| callers | direct req/s | bare proxy req/s | proxy req/s | proxy / direct | proxy / bare | direct p50 ms | " +
		"bare p50 ms | proxy p50 ms | p50 added to bare ms | CPU ms bare / proxy | " +
		"256 KB req/s | 256 KB MB/s | 256 KB peak RSS MB (budget 64) |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	dash := func(ok bool, format string, v float64) string {
		if !ok {
			return "—"
		}
		return fmt.Sprintf(format, v)
	}
	for _, c := range levels {
		d, dok := r.find(scenarioDirect, c)
		bp, bok := r.find(scenarioBare, c)
		p, pok := r.find(scenarioProxy, c)
		l, lok := r.find(scenarioProxyLarge, c)
		ratio, vsBare, added := "—", "—", "—"
		if pok && p.VsDirect > 0 {
			ratio = percentDown(p.VsDirect)
		}
		if pok && p.VsBare > 0 {
			vsBare = percentDown(p.VsBare)
		}
		if pok && p.P50AddedBareMs != nil {
			added = fmt.Sprintf("%+.2f", *p.P50AddedBareMs)
		}
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s | %s | %s |\n", c,
			dash(dok, "%.0f", d.RPS), dash(bok, "%.0f", bp.RPS), dash(pok, "%.0f", p.RPS), ratio, vsBare,
			dash(dok, "%.2f", d.P50ms), dash(bok, "%.2f", bp.P50ms), dash(pok, "%.2f", p.P50ms), added,
			dash(bok && bp.CPUPer1k > 0, "%.3f", bp.CPUPer1k), dash(pok && p.CPUPer1k > 0, "%.3f", p.CPUPer1k),
			dash(lok, "%.0f", l.RPS), dash(lok, "%.0f", l.RPS*float64(apiLarge.size)/1e6), dash(lok, "%.0f", l.PeakRSSMB))
	}
}
