package consent

import (
	"context"
	"crypto/subtle"
	"fmt"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/scope"
	"github.com/connectd/connectd/internal/vault"
)

// The release decision (issue 23, DESIGN "one decision"): for an
// authenticated client and user and one connection, whether the client may
// receive the credential whole, a token narrowed to what it was approved
// for, or nothing, and why. The token read, the narrowed token, the
// listing, unlink, the per-client webhook payloads and the account page all
// ask Decide; none derives the answer itself.

// Release is what a client may receive of a connection.
type Release int

// Releases.
const (
	// Nothing: the client receives no credential (consent_required).
	Nothing Release = iota
	// Whole: the credential as it is; the approval covers all of it.
	Whole
	// Narrowed: an access token limited to Decision.Scopes, at a provider
	// that narrows tokens on refresh.
	Narrowed
)

// Held is what a connection holds, as far as the decision needs: its
// granted scopes and its provider account (AccountHash). It never holds a
// secret.
type Held struct {
	Scopes  []string
	Account []byte // vault.AccountHash of the connection's provider account
}

// HeldBy is what cred holds.
func HeldBy(cred *vault.Credential) Held {
	return Held{Scopes: cred.Scopes, Account: vault.AccountHash(cred.AccountID)}
}

// Decision is the answer for one client and connection.
type Decision struct {
	Release Release
	// Scopes are what the client receives (Whole: every scope held;
	// Narrowed: those held that it was approved for), and so all that
	// anything said to that client about the connection may name. Empty
	// for Nothing.
	Scopes []string
	// NotApproved: the user never approved this client for the provider.
	NotApproved bool
	// AccountChanged: the approval was for another provider account (or
	// predates accounts).
	AccountChanged bool
	// Unapproved are the scopes held that the approval does not list.
	Unapproved []string
}

// Decide answers for a client whose approval is a (nil: none) of a
// connection holding h, at a provider that narrows tokens when narrows.
func Decide(h Held, a *Approval, narrows bool) Decision {
	if a == nil {
		return Decision{NotApproved: true, Unapproved: nonNilScopes(h.Scopes)}
	}
	d := Decision{Unapproved: nonNilScopes(scope.Missing(h.Scopes, a.Scopes))}
	if a.Account == nil || h.Account == nil || subtle.ConstantTimeCompare(a.Account, h.Account) != 1 {
		d.AccountChanged = true
		return d
	}
	switch set := scope.Intersect(a.Scopes, h.Scopes); {
	case len(d.Unapproved) == 0:
		d.Release, d.Scopes = Whole, nonNilScopes(scope.Union(nil, h.Scopes))
	case narrows && len(set) > 0:
		d.Release, d.Scopes = Narrowed, set
	}
	return d
}

// Visible is what anything said to the client about the connection may
// name: what it receives, or, when it receives nothing now, the scopes it
// was approved for that the same account still holds.
func (d Decision) Visible(h Held, a *Approval) []string {
	if d.Release != Nothing {
		return d.Scopes
	}
	if a == nil || d.AccountChanged {
		return []string{}
	}
	return nonNilScopes(scope.Intersect(a.Scopes, h.Scopes))
}

func nonNilScopes(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

const selectHolderApprovals = `SELECT client_id, scopes, account_hash, connection_id FROM consents
	WHERE issuer = $1 AND subject = $2 AND provider = $3 AND connection_id = $4 ORDER BY client_id`

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
