package connect

import (
	"context"
	"fmt"
)

const sweepOAuthStates = `DELETE FROM oauth_states WHERE expires_at < $1`

// SweepDatabase deletes expired OAuth states and expired browser sessions. It is safe to run on every
// replica at once; internal/server runs it in the database sweep job on
// River, so one replica does each run.
func (s *Server) SweepDatabase(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, sweepOAuthStates, s.now()); err != nil {
		return fmt.Errorf("connect: sweep: %w", err)
	}
	// browser_sessions is the session package's (end users' and admins'
	// sessions alike); its rows past their lifetime go with the rest.
	_, err := s.sessions.Sweep(ctx)
	return err
}
