package elicitation

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// finishedRetention is how long finished elicitations are kept for status
// reads and audits before the sweep deletes them.
const finishedRetention = 7 * 24 * time.Hour

// Sweep marks pending elicitations past their expiry as expired (each
// batch with its clients' webhook events) and deletes old finished ones; it
// returns how many expired. It is safe to run on every replica at once;
// internal/server runs it in the database sweep job on River, so one
// replica does each run.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	now := s.now()
	expired, err := s.expire(ctx, now)
	if err != nil {
		return 0, err
	}
	if _, err := s.pool.Exec(ctx, deleteOldElicitations, now.Add(-finishedRetention)); err != nil {
		return expired, fmt.Errorf("connect: sweep old elicitations: %w", err)
	}
	if expired > 0 {
		s.logger.InfoContext(ctx, "elicitations expired", slog.Int64("count", expired))
		for range expired {
			s.onFlow(StatusExpired)
		}
	}
	return expired, nil
}

// expire marks the pending elicitations past their expiry expired, a batch
// at a time, each batch in one transaction with its clients' webhook events.
// Replicas sweeping at once skip each other's rows.
func (s *Store) expire(ctx context.Context, now time.Time) (int64, error) {
	var total int64
	for {
		n := 0
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, expireElicitations, now)
			if err != nil {
				return err
			}
			gone, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Elicitation, error) {
				var e Elicitation
				err := r.Scan(&e.ID, &e.ClientID, &e.Issuer, &e.Subject, &e.Provider, &e.Scopes)
				return e, err
			})
			if err != nil {
				return err
			}
			for i := range gone {
				if err := s.EmitEnded(ctx, tx, &gone[i], StatusExpired, ""); err != nil {
					return err
				}
			}
			n = len(gone)
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("connect: sweep elicitations: %w", err)
		}
		total += int64(n)
		if n < 1000 {
			return total, nil
		}
	}
}
