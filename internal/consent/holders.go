package consent

import (
	"context"
	"fmt"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/identity"
)

const selectHolderApprovals = `SELECT c.client_id, c.scopes, c.account_hash, c.connection_id FROM ` + inOrg + `
	WHERE c.issuer = $1 AND c.subject = $2 AND c.provider = $3 AND c.connection_id = $4 ORDER BY c.client_id`

// HolderApprovals returns, read with q (the caller's transaction, to see its
// own writes), every client's approval of the user's connection connID at
// provider:
// those a change of the connection concerns, each to be told only what its
// Decision lets it see.
func HolderApprovals(ctx context.Context, q audit.Querier, u identity.User, provider, connID string) (map[string]Approval, error) {
	rows, err := q.Query(ctx, selectHolderApprovals, u.Issuer, u.Subject, provider, connID)
	if err != nil {
		return nil, fmt.Errorf("consent: holders: %w", err)
	}
	defer rows.Close()
	out := map[string]Approval{}
	for rows.Next() {
		var id string
		var a Approval
		if err := rows.Scan(&id, &a.Scopes, &a.Account, &a.ConnectionID); err != nil {
			return nil, fmt.Errorf("consent: holders: %w", err)
		}
		out[id] = a
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("consent: holders: %w", err)
	}
	return out, nil
}
