package connect

import (
	"context"
	"fmt"
	"time"
)

const (
	sweepOAuthStates = `DELETE FROM oauth_states WHERE expires_at < $1`
	sweepStateUses   = `DELETE FROM request_state_uses WHERE expires_at < $1`
)

// Sweep is what a replica's background work does over time, at once: it
// writes the sampled audit rows that are due (the counts whose period has
// passed, and the rows queued for Run's writer: a caller need not wait for
// it) and sweeps the database (SweepDatabase). Tests call it; in service the
// database part runs on the job queue, once for all replicas.
func (s *Server) Sweep(ctx context.Context) error {
	s.flushSamples(ctx)
	_, err := s.SweepDatabase(ctx)
	return err
}

// SweepDatabase marks pending elicitations past their expiry as expired and
// deletes expired states, used request_state ids, old finished elicitations
// and expired browser sessions; it returns how many elicitations expired. It
// is safe to run on every replica at once; internal/server runs it as a
// periodic job on River, so one replica does each run.
func (s *Server) SweepDatabase(ctx context.Context) (int64, error) {
	now := s.now()
	expired, err := s.elicitations.Sweep(ctx)
	if err != nil {
		return 0, err
	}
	for _, q := range []string{sweepOAuthStates, sweepStateUses} {
		if _, err := s.pool.Exec(ctx, q, now); err != nil {
			return expired, fmt.Errorf("connect: sweep: %w", err)
		}
	}
	// browser_sessions is the session package's (end users' and admins'
	// sessions alike); its rows past their lifetime go with the rest.
	if _, err := s.sessions.Sweep(ctx); err != nil {
		return expired, err
	}
	// client_assertions is mcpauth's: the spent jtis of expired client
	// assertions.
	if _, err := s.clients.SweepAssertions(ctx); err != nil {
		return expired, err
	}
	return expired, nil
}

// Run serves this replica's background work until ctx ends: the counts of
// the samplers written as their periods pass, the writer of the sampled
// audit rows (sampled.go), and at the end the last write of what the
// samplers hold. The database sweep runs on the job queue (SweepDatabase). (Long-polls are woken by the
// process's notification hub, Config.Hub, which internal/server runs.)
func (s *Server) Run(ctx context.Context) {
	defer s.doneOnce.Do(func() { close(s.done) })
	writer := make(chan struct{})
	go func() { defer close(writer); s.runWriter(ctx) }()
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// Once the writer has stopped (no sweep runs either: it is this
			// loop's), write what the samplers still hold, on a context that
			// outlives ctx: nothing else takes rows from them any more, so
			// what this cannot write is known to be lost.
			<-writer
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			s.writeAll(fctx)
			cancel()
			return
		case <-t.C:
			// This replica's counts; the database is swept by the job queue
			// (SweepDatabase), once for all replicas.
			s.flushSamples(ctx)
		}
	}
}
