package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// (k) Postgres killed (pg_ctl stop -m immediate: every server process is
// SIGQUIT at once, no checkpoint) for 5.5 s, then started (crash recovery),
// under 200 token reads a second of cached credentials and nothing else.
// The replicas start afresh first, so each fills its client key's cache
// entry (10 s TTL) while priming, and the kill comes 5 s after priming:
// that entry expires in the middle of the outage on both replicas, which is
// the case of issue 35 (before stale-if-error, every read from then on
// failed). The row's notes give the stale answers each replica counted.
func (s *study) pgKilledCachedReads(ctx context.Context) error {
	const outage = 5500 * time.Millisecond
	if err := s.startReplicas(ctx); err != nil {
		return err
	}
	primed := time.Now()
	before := s.staleAnswers(ctx)
	var down time.Duration
	l := load{c: s.c, reps: s.reps, readEvery: 5 * time.Millisecond}
	run, t0, err := s.during(ctx, l, 5*time.Second, 6*time.Second, func() error {
		if err := s.pg.kill(ctx); err != nil {
			return err
		}
		killed := time.Now()
		sleep(ctx, outage)
		err := s.pg.start(ctx)
		down = time.Since(killed)
		return err
	})
	if err != nil {
		return err
	}
	after := s.staleAnswers(ctx)
	var stale []string
	for i, r := range s.reps {
		stale = append(stale, fmt.Sprintf("%s %d client key, %d credential, %d consent", r.name,
			after[i]["client_key"]-before[i]["client_key"], after[i]["credential"]-before[i]["credential"],
			after[i]["consent"]-before[i]["consent"]))
	}
	notes := fmt.Sprintf("Postgres down %.1f s (killed %.1f s after the caches were primed, %.1f s wait, started); "+
		"stale answers: %s; /readyz: %s", down.Seconds(), t0.Sub(primed).Seconds(), outage.Seconds(),
		strings.Join(stale, "; "), run.readyText())
	fault := "(k) Postgres killed 5.5 s"
	s.addRow(fault, "cached token reads", run.reads, "—", window(run.reads, t0)+"; "+notes)
	if run.reads.max > 10*time.Second {
		s.problems = append(s.problems, fmt.Sprintf("%s: an answer took %s", fault, run.reads.max.Round(time.Millisecond)))
	}
	return nil
}

// kill stops the server at once, as a crash would (pg_ctl stop -m
// immediate): no shutdown checkpoint, recovery at the next start.
func (p *postgres) kill(ctx context.Context) error {
	return p.pgctl(ctx, "-m", "immediate", "-w", "-t", "60", "stop")
}

// staleAnswers reads each replica's connectd_cache_stale_answers_total by
// cache from its operators' listener (zero where it cannot).
func (s *study) staleAnswers(ctx context.Context) []map[string]int {
	out := make([]map[string]int, len(s.reps))
	for i, r := range s.reps {
		out[i] = map[string]int{}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.internal+"/metrics", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), `connectd_cache_stale_answers_total{cache="`)
			if !ok {
				continue
			}
			name, value, ok := strings.Cut(line, `"} `)
			if n, err := strconv.ParseFloat(value, 64); ok && err == nil {
				out[i][name] = int(n)
			}
		}
		resp.Body.Close()
	}
	return out
}
