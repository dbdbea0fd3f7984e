// Package notice owns what a user is told on their account page about
// something done to their connections by someone else — an administrator
// revoked one, or cut off a client that may have been compromised and
// revoked the connections it had read, or an application ended one (table
// user_notices). A notice outlives the
// connection it is about: it keeps its own copy of the provider, the
// connection id and the account's name.
//
// Every read and every dismissal is by the (issuer, subject) of the signed-in
// user: a notice id alone shows or removes nothing. It must never hold a
// credential, and never import the packages that write or show notices.
package notice

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/connectd/connectd/internal/identity"
)

// The kinds of notices: every end of a user's connection by someone else
// explains itself (issue 38 item 3).
const (
	// KindClientCutOff: an administrator cut off ClientID (it may have
	// been compromised) and revoked this connection, whose credential it
	// had read.
	KindClientCutOff = "client_cut_off"
	// KindAdminRevoked: an administrator revoked this connection.
	KindAdminRevoked = "admin_revoked"
	// KindClientUnlinked: the application ClientID ended this connection
	// (DELETE /v1/connections/{provider}).
	KindClientUnlinked = "client_unlinked"
)

// Notice is one thing to tell a user. It never holds a secret.
type Notice struct {
	ID           int64
	User         identity.User
	Kind         string
	Provider     string
	ConnectionID string
	Account      string // the account's name at the provider and the user's label, "" when unknown
	ClientID     string
	ClientName   string
	At           time.Time
}

// Queryer is what a pool and a transaction both offer.
type Queryer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

const (
	insertNotice = `INSERT INTO user_notices (issuer, subject, kind, provider, connection_id, account, client_id, client_name)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`
	selectNotices = `SELECT id, kind, provider, connection_id, account, client_id, client_name, created_at
		FROM user_notices WHERE issuer = $1 AND subject = $2 ORDER BY created_at DESC, id DESC LIMIT 50`
	deleteNotice = `DELETE FROM user_notices WHERE id = $1 AND issuer = $2 AND subject = $3`
)

// Add records n for n.User with q: inside the transaction of the change it
// tells of, it commits or rolls back with it.
func Add(ctx context.Context, q Queryer, n Notice) error {
	if _, err := q.Exec(ctx, insertNotice, n.User.Issuer, n.User.Subject, n.Kind, n.Provider, n.ConnectionID,
		n.Account, n.ClientID, n.ClientName); err != nil {
		return fmt.Errorf("notice: add: %w", err)
	}
	return nil
}

// List returns u's notices, newest first (the latest 50).
func List(ctx context.Context, q Queryer, u identity.User) ([]Notice, error) {
	rows, err := q.Query(ctx, selectNotices, u.Issuer, u.Subject)
	if err != nil {
		return nil, fmt.Errorf("notice: list: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Notice, error) {
		n := Notice{User: u}
		err := r.Scan(&n.ID, &n.Kind, &n.Provider, &n.ConnectionID, &n.Account, &n.ClientID, &n.ClientName, &n.At)
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("notice: list: %w", err)
	}
	return out, nil
}

// Dismiss deletes u's notice id and reports whether there was one: another
// user's notice is not u's to dismiss, and is answered as a missing one.
func Dismiss(ctx context.Context, q Queryer, u identity.User, id int64) (bool, error) {
	tag, err := q.Exec(ctx, deleteNotice, id, u.Issuer, u.Subject)
	if err != nil {
		return false, fmt.Errorf("notice: dismiss: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// ParseID reads a notice id as a form posts it; false for anything that
// names no notice.
func ParseID(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 19 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}
