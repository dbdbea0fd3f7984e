package vault

import (
	"context"
	"errors"
	"fmt"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
)

// Held is what a connection holds as its row stores it, as far as a
// release decision needs (package release): its id, granted scopes, the
// hash of its provider account and its organization. It never holds a
// secret, and reading it opens no credential.
type Held struct {
	ID      string
	Scopes  []string
	Account []byte // AccountHash of the provider account; nil: the row names none
	Org     string // the connection's organization; "" is the default one
	AppID   string // the provider app it was obtained with (Connection.AppID): "" is the deployment's
}

// Held is what c holds, from its row.
func (c Connection) Held() Held {
	return Held{ID: c.ID, Scopes: c.Scopes, Account: c.AccountHash, Org: orgOr(c.Org), AppID: c.AppID}
}

// HeldOf is what connection c holds: from its row, or — for a row from
// before account hashes were kept, which the account backfill
// (BackfillAccounts) has not reached yet — from its sealed credential. A
// credential that does not open (or is gone) names no account, which no
// approval covers. A connection of another organization than the handle's
// is ErrNotConnected.
func (s *Store) HeldOf(ctx context.Context, u identity.User, c Connection) (Held, error) {
	if orgOr(c.Org) != s.org {
		return Held{}, fmt.Errorf("%w to %s", ErrNotConnected, c.Provider)
	}
	if c.AccountHash != nil {
		return c.Held(), nil
	}
	_, cred, err := s.Get(ctx, u, c.Provider, c.ID)
	switch {
	case err == nil:
		return Held{ID: c.ID, Scopes: cred.Scopes, Account: AccountHash(cred.AccountID), Org: s.org, AppID: c.AppID}, nil
	case errors.Is(err, keyring.ErrDecrypt), errors.Is(err, ErrNotConnected):
		return Held{ID: c.ID, Scopes: c.Scopes, Org: s.org, AppID: c.AppID}, nil
	}
	return Held{}, err // the database: the caller answers 503, not a false refusal
}

// Decider is a release decision on what a connection holds, asked by
// TokenFor before any credential is opened or refreshed: a non-nil error
// refuses the read and is returned as it is.
type Decider func(Held) error
