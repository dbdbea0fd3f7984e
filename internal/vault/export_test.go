package vault

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Querier is what a handle's statements run on.
type Querier = querier

// Scoped is the handle's querier (rls.go): every statement with
// connectd.org set to the handle's organization.
func (s *Store) Scoped() Querier { return s.db() }

// Begin is the handle's transaction (rls.go), scoped the same way.
func (s *Store) Begin(ctx context.Context, fn func(pgx.Tx) error) error { return s.begin(ctx, fn) }
