package consent

import (
	"context"
	"fmt"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/vault"
)

// selectHolderApprovals reads the holders of a connection that may be gone
// already (a deletion's hook reads them in the deleting transaction): the
// client's organization is the connection's when it is still there, and
// $5 when the caller names it (” : it does not; HolderApprovalsIn).
const selectHolderApprovals = `SELECT c.client_id, c.scopes, c.account_hash, c.connection_id FROM consents c
	JOIN clients cl ON cl.id = c.client_id
	LEFT JOIN connections cn ON cn.id = c.connection_id
	WHERE c.issuer = $1 AND c.subject = $2 AND c.provider = $3 AND c.connection_id = $4
	AND (cn.id IS NULL OR cn.org_id = cl.org_id) AND ($5 = '' OR cl.org_id = $5)
	ORDER BY c.client_id`

// HolderApprovals returns, read with q (the caller's transaction, to see its
// own writes), every client's approval of the user's connection connID at
// provider:
// those a change of the connection concerns, each to be told only what its
// Decision lets it see.
//
// An approval whose client is of another organization than the connection
// is left out while the connection is there; once it is gone (a deletion's
// hook), only HolderApprovalsIn can tell: callers that know the
// connection's organization use it.
func HolderApprovals(ctx context.Context, q audit.Querier, u identity.User, provider, connID string) (map[string]Approval, error) {
	return holderApprovals(ctx, q, "", u, provider, connID)
}

// HolderApprovalsIn is HolderApprovals for a connection of organization
// org (vault.Connection.Org; "" is the default one): the approvals of
// org's clients alone, whether the connection is still there or not.
func HolderApprovalsIn(ctx context.Context, q audit.Querier, org string, u identity.User, provider, connID string) (map[string]Approval, error) {
	if org == "" {
		org = vault.DefaultOrg
	}
	return holderApprovals(ctx, q, org, u, provider, connID)
}

func holderApprovals(ctx context.Context, q audit.Querier, org string, u identity.User, provider, connID string) (map[string]Approval, error) {
	rows, err := q.Query(ctx, selectHolderApprovals, u.Issuer, u.Subject, provider, connID, org)
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
