package api

import (
	"context"
	"fmt"
	"time"
)

const sweepStateUses = `DELETE FROM request_state_uses WHERE expires_at < $1`

// Sweep writes the sampled audit rows that are due (the counts whose period
// has passed, and the rows queued for Run's writer: a caller need not wait
// for it). Tests call it (through server.Server.Sweep); in service Run does.
func (s *Server) Sweep(ctx context.Context) { s.flushSamples(ctx) }

// SweepDatabase deletes the used request_state ids past their expiry and
// the spent jtis of expired client assertions. It is
// safe to run on every replica at once; internal/server runs it in the
// database sweep job on River, so one replica does each run.
func (s *Server) SweepDatabase(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, sweepStateUses, s.now()); err != nil {
		return fmt.Errorf("connect: sweep: %w", err)
	}
	// client_assertions is clientauth's: the spent jtis of expired client
	// assertions.
	_, err := s.clients.SweepAssertions(ctx)
	return err
}

// Run serves this replica's background work until ctx ends: the counts of
// the samplers written as their periods pass, the writer of the sampled
// audit rows (sampled.go), and at the end the last write of what the
// samplers hold. The database sweep runs on the job queue (SweepDatabase). (Long-polls are woken by the
// process's notification hub, which internal/server runs.)
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
