package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/connectd/connectd/internal/provider/providertest"
)

// Each fault below runs for tens of seconds and leaves the cluster as it
// found it: Postgres running, both replicas ready with the study's
// environment, every provider answering normally.

// standardLoad is the load of the database faults, an open loop: 200 token
// reads and 20 mints a second, spread over the replicas — a steady stream
// two shared cores carry without saturating, so that latencies are the
// service's own.
func (s *study) standardLoad() load {
	return load{c: s.c, reps: s.reps, readEvery: 5 * time.Millisecond, mintEvery: 50 * time.Millisecond}
}

// during runs l for before, then fault, then l for after more; it returns
// what the load recorded and when the fault began.
func (s *study) during(ctx context.Context, l load, before, after time.Duration, fault func() error) (*loadRun, time.Time, error) {
	lctx, stop := context.WithCancel(ctx)
	done := make(chan *loadRun, 1)
	go func() { done <- l.run(lctx) }()
	sleep(ctx, before)
	t0 := time.Now()
	err := fault()
	sleep(ctx, after)
	stop()
	return <-done, t0, err
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// window says when the requests answered other than 2xx were sent,
// relative to the fault's start.
func window(t *tally, t0 time.Time) string {
	if t.firstBad.IsZero() {
		return "none failed"
	}
	return fmt.Sprintf("failures among requests sent from %+.1f s to %+.1f s", t.firstBad.Sub(t0).Seconds(), t.lastBad.Sub(t0).Seconds())
}

// slowText says how many answers took a second or more ("" for none).
func slowText(t *tally) string {
	if t.slow == 0 {
		return ""
	}
	return fmt.Sprintf("; %d of %d answered after a second or more", t.slow, t.n)
}

// dbRows adds the rows of a database fault: token reads and mints.
func (s *study) dbRows(fault string, run *loadRun, t0 time.Time, notes string) {
	s.addRow(fault, "token reads", run.reads, "—", window(run.reads, t0)+slowText(run.reads))
	s.addRow(fault, "mints", run.mints, "—", window(run.mints, t0)+"; "+notes+"; /readyz: "+run.readyText())
	for _, t := range []*tally{run.reads, run.mints} {
		if t.max > 10*time.Second {
			s.problems = append(s.problems, fmt.Sprintf("%s: an answer took %s", fault, t.max.Round(time.Millisecond)))
		}
	}
}

// (a) pg_ctl restart -m fast under the standard load.
func (s *study) pgRestart(ctx context.Context) error {
	var took time.Duration
	run, t0, err := s.during(ctx, s.standardLoad(), 3*time.Second, 9*time.Second, func() error {
		start := time.Now()
		err := s.pg.restart(ctx)
		took = time.Since(start)
		return err
	})
	if err != nil {
		return err
	}
	s.dbRows("(a) Postgres restart", run, t0, fmt.Sprintf("pg_ctl restart took %.1f s", took.Seconds()))
	return nil
}

// (b) Postgres stopped for 5.5 s, then started, under the standard load.
func (s *study) pgOutage(ctx context.Context) error {
	const outage = 5500 * time.Millisecond
	var down time.Duration
	run, t0, err := s.during(ctx, s.standardLoad(), 3*time.Second, 6*time.Second, func() error {
		if err := s.pg.stop(ctx); err != nil {
			return err
		}
		stopped := time.Now()
		sleep(ctx, outage)
		err := s.pg.start(ctx)
		down = time.Since(stopped)
		return err
	})
	if err != nil {
		return err
	}
	s.dbRows("(b) Postgres outage", run, t0, fmt.Sprintf("Postgres down %.1f s (stopped, %.1f s wait, started)", down.Seconds(), outage.Seconds()))
	return nil
}

// (c) Postgres frozen (SIGSTOP of the postmaster and its backends) for
// 20 s, then continued, under the standard load; the replicas' resident
// sets are sampled throughout.
func (s *study) pgFrozen(ctx context.Context) error {
	const frozen = 20 * time.Second
	type sample struct {
		at  time.Time
		rss []float64
	}
	var (
		mu      sync.Mutex
		samples []sample
	)
	sctx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for sctx.Err() == nil {
			x := sample{at: time.Now()}
			for _, r := range s.reps {
				x.rss = append(x.rss, r.rssMB())
			}
			mu.Lock()
			samples = append(samples, x)
			mu.Unlock()
			sleep(sctx, 250*time.Millisecond)
		}
	})
	var thawed time.Time
	run, t0, err := s.during(ctx, s.standardLoad(), 3*time.Second, 6*time.Second, func() error {
		if err := s.pg.freeze(); err != nil {
			return err
		}
		sleep(ctx, frozen)
		thawed = time.Now()
		return s.pg.thaw()
	})
	stopSampling()
	wg.Wait()
	if err != nil {
		return err
	}
	var rss []string
	for i, r := range s.reps {
		var before, during float64
		for _, x := range samples {
			switch {
			case x.at.Before(t0):
				before = max(before, x.rss[i])
			case x.at.Before(thawed):
				during = max(during, x.rss[i])
			}
		}
		rss = append(rss, fmt.Sprintf("%s %.0f → %.0f MB", r.name, before, during))
	}
	s.dbRows("(c) Postgres frozen 20 s", run, t0, "largest RSS before → while frozen: "+strings.Join(rss, ", "))
	return nil
}

// (d) A pool of 2 connections and 64 callers back to back on replica A,
// half reading tokens, half minting. The credential cache is off for it,
// so that every read needs a pooled connection too (with the cache on,
// reads of cached credentials never touch the pool).
func (s *study) poolExhausted(ctx context.Context) error {
	if err := s.startReplicas(ctx, "CONNECTD_DB_MAX_CONNS=2", "CONNECTD_CREDENTIAL_CACHE=false"); err != nil {
		return err
	}
	lctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	t0 := time.Now()
	run := load{c: s.c, reps: s.reps[:1], readers: 32, minters: 32}.run(lctx)
	cancel()
	s.dbRows("(d) pool of 2, 64 callers", run, t0, "CONNECTD_DB_MAX_CONNS=2, credential cache off, 64 callers back to back on replica A for 8 s")
	return s.startReplicas(ctx)
}

// reads asks for the token of every connection in conns at once, spread
// over the replicas, and tallies the answers.
func (s *study) reads(ctx context.Context, provider string, conns []seeded, reps []*replica) *tally {
	t := newTally()
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() { t.add(s.c.token(ctx, reps[i%len(reps)], provider, c.user)) })
	}
	wg.Wait()
	return t
}

// summary is a tally in one line: its answers by class, and the longest.
func summary(t *tally) string {
	var parts []string
	for _, c := range []string{class2xx, class409, class500, class503DB, class503Prov} {
		if n := t.classes[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d × %s", n, c))
		}
	}
	if o := t.otherText(); o != "" {
		parts = append(parts, o)
	}
	return fmt.Sprintf("%s (longest %.1f s)", strings.Join(parts, ", "), t.max.Seconds())
}

// (e) A provider whose token endpoint does the work at once (rotating the
// refresh token) and answers late: beyond the provider timeout (30 s), with
// and without a reuse grace, and between the old egress timeout (10 s) and
// the provider timeout. Five connections needing a refresh each.
func (s *study) lateAnswers(ctx context.Context) error {
	cases := []struct {
		what     string
		provider string
		delay    time.Duration
	}{
		{"answers 35 s late, no reuse grace", rotatingProvider, 35 * time.Second},
		{"answers 35 s late, 30 min reuse grace", graceProvider, 35 * time.Second},
		{"answers 12 s late, no reuse grace", rotatingProvider, 12 * time.Second},
	}
	for _, k := range cases {
		conns, err := s.needingRefresh(ctx, k.provider, "late", 5)
		if err != nil {
			return err
		}
		p := s.providers[k.provider]
		p.SetQuirks(providertest.Quirks{AnswerDelay: k.delay})
		t := s.reads(ctx, k.provider, conns, s.reps)
		p.SetQuirks(providertest.Quirks{})
		after := s.reads(ctx, k.provider, conns, s.reps)
		n, err := s.lost(ctx, k.provider, conns)
		if err != nil {
			return err
		}
		s.addRow("(e) provider "+k.what, "5 reads needing a refresh", t, fmt.Sprintf("%d of 5", n),
			"then, the provider answering at once again: "+summary(after))
	}
	return nil
}

// (f) Replica A killed (SIGKILL) while its refreshes of five connections
// are at the provider, which completes them (rotating the refresh tokens)
// and answers into the void; then the same five are read on replica B.
// Without and with a reuse grace.
func (s *study) killedMidRefresh(ctx context.Context) error {
	a, b := s.reps[0], s.reps[1]
	for _, k := range []struct{ what, provider string }{
		{"no reuse grace", rotatingProvider}, {"30 min reuse grace", graceProvider},
	} {
		conns, err := s.needingRefresh(ctx, k.provider, "kill", 5)
		if err != nil {
			return err
		}
		p := s.providers[k.provider]
		p.SetQuirks(providertest.Quirks{AnswerDelay: 3 * time.Second})
		base := p.Counts().Refresh
		onA := make(chan *tally, 1)
		go func() { onA <- s.reads(ctx, k.provider, conns, []*replica{a}) }()
		// The provider has rotated every refresh token once it counted the
		// five requests (it counts and rotates under one lock).
		deadline := time.Now().Add(10 * time.Second)
		for p.Counts().Refresh < base+len(conns) && time.Now().Before(deadline) {
			sleep(ctx, 20*time.Millisecond)
		}
		if err := a.kill(); err != nil {
			return err
		}
		killedA := <-onA
		p.SetQuirks(providertest.Quirks{})
		t := s.reads(ctx, k.provider, conns, []*replica{b})
		n, err := s.lost(ctx, k.provider, conns)
		if err != nil {
			return err
		}
		s.addRow("(f) replica killed mid-refresh, "+k.what, "5 reads on B after A died", t, fmt.Sprintf("%d of 5", n),
			"the 5 reads in flight on A: "+summary(killedA))
		if err := a.start(ctx, s.o.binary, s.env); err != nil {
			return err
		}
	}
	return nil
}

// (g) The four garbage answers to a refresh the provider did perform (it
// rotated the refresh token): not JSON, {}, 5 MB, a redirect. Two
// connections at a rotating provider and two at one with a reuse grace,
// each.
func (s *study) garbageAnswers(ctx context.Context) error {
	for _, kind := range []string{"garbage", "empty", "huge", "redirect"} {
		t, after := newTally(), newTally()
		var lost []string
		for _, prov := range []string{rotatingProvider, graceProvider} {
			conns, err := s.needingRefresh(ctx, prov, "garbage", 2)
			if err != nil {
				return err
			}
			p := s.providers[prov]
			p.SetQuirks(providertest.Quirks{RefreshAnswer: kind})
			for _, c := range conns {
				t.add(s.c.token(ctx, s.reps[0], prov, c.user))
			}
			p.SetQuirks(providertest.Quirks{})
			for _, c := range conns {
				after.add(s.c.token(ctx, s.reps[1], prov, c.user))
			}
			n, err := s.lost(ctx, prov, conns)
			if err != nil {
				return err
			}
			lost = append(lost, fmt.Sprintf("%s %d of 2", prov, n))
		}
		s.addRow(fmt.Sprintf("(g) refresh answered %q", kind), "4 reads needing a refresh", t, strings.Join(lost, ", "),
			"then, answering normally: "+summary(after))
	}
	return nil
}

// addRow records one row of the table, and as a problem anything that is
// neither an answer a caller can act on nor a 503 with its code: a 500, an
// unclassified answer, no answer at all.
func (s *study) addRow(fault, what string, t *tally, lost, notes string) {
	retry := "—"
	switch {
	case t.all503 == 0:
	case t.with503 == t.all503:
		retry = fmt.Sprintf("all %d", t.all503)
	default:
		retry = fmt.Sprintf("%d of %d", t.with503, t.all503)
	}
	r := row{Fault: fault, What: what, Sent: t.n, Classes: t.classes, Other: t.otherText(),
		MaxMs: float64(t.max.Microseconds()) / 1000, Lost: lost, RetryAfter: retry, Notes: notes}
	s.rows = append(s.rows, r)
	if n := t.classes[class500]; n > 0 {
		s.problems = append(s.problems, fmt.Sprintf("%s, %s: %d × 500 internal_error", fault, what, n))
	}
	if r.Other != "" {
		s.problems = append(s.problems, fmt.Sprintf("%s, %s: %s", fault, what, r.Other))
	}
	if s.o.verbose {
		s.logf("%s, %s: %d sent, %s; lost %s", fault, what, t.n, summary(t), lost)
	}
}
