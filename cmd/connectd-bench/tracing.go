package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"time"
)

// The token lookup with tracing on (issue 28 §1): replicas exporting to the
// harness's OTLP sink, sampling 1 % and 100 % of traces, measured in
// alternation with tracing-off replicas at each level, and reported as
// ratios to the tracing-off figures of the same rounds. The tracing-off
// replicas are started with the others, not step 2's: replicas of one age
// and history, so that only tracing differs (step 2's replica, which had
// served the whole token scenario, measured slower than fresh ones).
const (
	scenarioTraceOff = "token lookup, tracing off (alternating)"
	scenarioTrace1   = "token lookup, tracing on, 1 % sampled"
	scenarioTrace100 = "token lookup, tracing on, 100 % sampled"
	// scenarioTraceBase is the token lookup on -baseline-connectd (a binary
	// built before a change, tracing off as it must be there): that tracing
	// off costs nothing is this row's req/s against tracing off's.
	scenarioTraceBase = "token lookup, baseline binary"
)

// traced reports whether scenario is one of the tracing comparison's.
func traced(scenario string) bool {
	return scenario == scenarioTraceOff || scenario == scenarioTrace1 || scenario == scenarioTrace100 || scenario == scenarioTraceBase
}

// otlpSink is the collector of the tracing scenarios: it accepts every OTLP/HTTP
// export (POST /v1/traces) and answers an empty ExportTraceServiceResponse
// (zero protobuf bytes), counting exports and bytes, as a collector's
// receiver would before its pipeline. It decodes nothing: its CPU is the
// harness's, not connectd's.
type otlpSink struct {
	srv            *http.Server
	url            string
	exports, bytes atomic.Int64
}

func startSink() (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{url: "http://" + ln.Addr().String() + "/v1/traces"}
	s.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		n, _ := io.Copy(io.Discard, r.Body)
		s.exports.Add(1)
		s.bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})}
	go func() {
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			fmt.Println("bench: OTLP sink:", err)
		}
	}()
	return s, nil
}

func (s *otlpSink) close() { s.srv.Close() }

// tracingEnv is what a replica needs to export to the sink, sampling ratio
// of new traces (the load sends no traceparent: every trace is a root).
func tracingEnv(sinkURL, ratio string) []string {
	return []string{"CONNECTD_TRACING=otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + sinkURL,
		"OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG=" + ratio}
}

// measureTracing runs the comparison at every level: -tracing-rounds passes
// over the variants, each measurement on primed replicas.
func measureTracing(ctx context.Context, o *options, env []string, clientKey string, tokens []string,
	res *results, logf func(string, ...any)) error {
	sink, err := startSink()
	if err != nil {
		return err
	}
	defer sink.close()
	sets := map[string][]*process{}
	variants := []struct{ scenario, ratio, binary string }{{scenarioTraceOff, "", o.binary}, {scenarioTrace1, "0.01", o.binary},
		{scenarioTrace100, "1", o.binary}}
	pass := []string{scenarioTraceOff, scenarioTrace1, scenarioTrace100}
	if o.baseline != "" {
		variants = append(variants, struct{ scenario, ratio, binary string }{scenarioTraceBase, "", o.baseline})
		pass = append([]string{scenarioTraceBase}, pass...)
	}
	// Passes alternate in direction (off, 1 %, 100 %, then 100 %, 1 %,
	// off, …), so that a drift of the machine weighs on every variant alike.
	var order []string
	for i := range max(o.tracingRounds, 1) {
		p := slices.Clone(pass)
		if i%2 == 1 {
			slices.Reverse(p)
		}
		order = append(order, p...)
	}
	for _, v := range variants {
		set := make([]*process, o.replicas)
		for i := range set {
			if set[i], err = newProcess(); err != nil {
				return err
			}
		}
		e := append([]string{}, env...)
		if v.ratio != "" {
			e = append(e, tracingEnv(sink.url, v.ratio)...)
		}
		if err := startSet(ctx, v.binary, e, set); err != nil {
			return err
		}
		defer stopSet(set)
		sets[v.scenario] = set
	}
	for _, c := range o.levels {
		for _, scenario := range order {
			lg := newLoad(clientKey, tokens, sets[scenario])
			if err := lg.prime(ctx); err != nil {
				return err
			}
			res.add(measure(ctx, scenario, c, o.duration, sets[scenario], lg.token))
		}
	}
	logf("tracing done: %d OTLP exports, %.1f MB received", sink.exports.Load(), float64(sink.bytes.Load())/1e6)
	return nil
}

// tracingRatios sets VsTracingOff of every traced row: its req/s over the
// median req/s of the tracing-off rows at the same level.
func (r *results) tracingRatios() {
	off := map[int][]float64{}
	for _, x := range r.Results {
		if x.Scenario == scenarioTraceOff {
			off[x.Concurrency] = append(off[x.Concurrency], x.RPS)
		}
	}
	for i := range r.Results {
		x := &r.Results[i]
		if m := median(off[x.Concurrency]); traced(x.Scenario) && m > 0 {
			x.VsTracingOff = x.RPS / m
		}
	}
}

// median of v (the mean of the middle two for an even count; 0 for none).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// tracingTable writes the comparison, when measured: each variant's median
// req/s, p99 and connectd CPU per 1,000 lookups over its passes at each
// level, its req/s as a share of tracing off's, and its CPU per lookup as a
// multiple of tracing off's — the steadier figure on a shared machine, where
// req/s moves with whatever else runs on the cores.
func (r *results) tracingTable(w io.Writer) {
	type agg struct {
		rps, p99, cpu []float64
	}
	type figures struct{ rps, p99, cpu float64 }
	m := map[string]map[int]*agg{}
	var levels []int
	for _, x := range r.Results {
		if !traced(x.Scenario) {
			continue
		}
		if m[x.Scenario] == nil {
			m[x.Scenario] = map[int]*agg{}
		}
		a := m[x.Scenario][x.Concurrency]
		if a == nil {
			a = &agg{}
			m[x.Scenario][x.Concurrency] = a
			if x.Scenario == scenarioTraceOff {
				levels = append(levels, x.Concurrency)
			}
		}
		a.rps = append(a.rps, x.RPS)
		a.p99 = append(a.p99, x.P99ms)
		a.cpu = append(a.cpu, x.CPUPer1k)
	}
	if len(levels) == 0 {
		return
	}
	fmt.Fprint(w, "\n## Tracing\n\nThe token lookup with tracing off and on (`CONNECTD_TRACING=otlp`, exporting over OTLP/HTTP "+
		"to the harness's sink, `OTEL_TRACES_SAMPLER=parentbased_traceidratio` at 1 % and at 100 %), each on its own "+
		"replicas, measured in alternating passes at each level (off, 1 %, 100 %, then 100 %, 1 %, off, … "+
		"`-tracing-rounds` passes); each figure is the median of its passes, the shares are of tracing off's req/s and CPU per lookup in the same rounds. The sink runs in the "+
		"harness, on the same cores: the req/s of the 100 % rows pay for its reading too, the CPU column is connectd's alone. "+
		"With `-baseline-connectd BINARY` (a connectd built before a change) its token lookup is measured in the same "+
		"alternation, and tracing off is shown against it.\n\n")
	_, base := m[scenarioTraceBase]
	head, sep := "| callers | off req/s | 1 % req/s | 1 % / off | 100 % req/s | 100 % / off | p99 ms off / 1 % / 100 % | "+
		"CPU s/1k off / 1 % / 100 % | CPU 1 % / off | CPU 100 % / off |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
	if base {
		head, sep = head+" baseline req/s | off / baseline | CPU off / baseline |", sep+" --- | --- | --- |"
	}
	fmt.Fprint(w, head+"\n"+sep+"\n")
	get := func(s string, c int) (figures, bool) {
		a := m[s][c]
		if a == nil || len(a.rps) == 0 {
			return figures{}, false
		}
		return figures{median(a.rps), median(a.p99), median(a.cpu)}, true
	}
	for _, c := range levels {
		off, _ := get(scenarioTraceOff, c)
		one, ok1 := get(scenarioTrace1, c)
		all, ok100 := get(scenarioTrace100, c)
		share := func(ok bool, a figures) string {
			if !ok || off.rps == 0 {
				return "—"
			}
			return percentDown(a.rps / off.rps)
		}
		cpu := func(ok bool, a figures) string {
			if !ok || off.cpu == 0 {
				return "—"
			}
			return fmt.Sprintf("%.2f", a.cpu/off.cpu)
		}
		fmt.Fprintf(w, "| %d | %.0f | %.0f | %s | %.0f | %s | %.2f / %.2f / %.2f | %.3f / %.3f / %.3f | %s | %s |", c,
			off.rps, one.rps, share(ok1, one), all.rps, share(ok100, all), off.p99, one.p99, all.p99,
			off.cpu, one.cpu, all.cpu, cpu(ok1, one), cpu(ok100, all))
		if base {
			if b, ok := get(scenarioTraceBase, c); ok && b.rps > 0 && b.cpu > 0 {
				fmt.Fprintf(w, " %.0f | %s | %.2f |", b.rps, percentDown(off.rps/b.rps), off.cpu/b.cpu)
			} else {
				fmt.Fprint(w, " — | — | — |")
			}
		}
		fmt.Fprintln(w)
	}
}
