package vault

import (
	"context"

	"github.com/connectd/connectd/internal/identity"
	"github.com/jackc/pgx/v5"
)

// DeleteHook runs inside DeleteWith's transaction after the connection c is
// deleted: consents withdrawn and audit rows written with tx commit or roll
// back together with the deletion. Returning an error aborts the deletion.
type DeleteHook func(ctx context.Context, tx pgx.Tx, c Connection) error

// Account is the provider account a connection is linked to: the only part of
// a sealed credential that may be shown to anyone (admin views).
type Account struct {
	ID    string // the provider's id for the account; "" when unknown
	Label string // login, workspace or team name; "" when unknown
}

// Account opens the user's connection id at provider and returns only its
// account id and label, so admin views can name the account without holding a
// token. Errors are those of Get (ErrNotConnected, ErrDecrypt, ErrInvalid).
func (s *Store) Account(ctx context.Context, user identity.User, provider, id string) (Account, error) {
	_, c, err := s.Get(ctx, user, provider, id)
	if err != nil {
		return Account{}, err
	}
	return Account{ID: c.AccountID, Label: c.AccountLabel}, nil
}
