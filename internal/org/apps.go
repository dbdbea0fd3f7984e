package org

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/provider"
)

// App is an organization's own OAuth app at a provider. It never carries
// the secret: HasSecret says whether one is stored.
type App struct {
	ID        string    `json:"id"` // "app_…"; a new one whenever the client id changes
	Org       string    `json:"org"`
	Provider  string    `json:"provider"`
	ClientID  string    `json:"client_id"`
	HasSecret bool      `json:"has_secret"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Limits of what an app's credentials may be.
const (
	MaxClientID = 255
	MaxSecret   = 8 << 10
)

// checkCredentials: a client id of 1–MaxClientID printable characters
// without spaces, a secret of 1–MaxSecret bytes without control
// characters. Neither is repeated in a message.
func checkCredentials(clientID string, secret provider.Secret) error {
	switch {
	case clientID == "" || len(clientID) > MaxClientID ||
		strings.ContainsFunc(clientID, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }):
		return problem.Detail(ErrInvalid, "client id must be 1-%d characters without spaces", MaxClientID)
	case secret == "" || len(secret) > MaxSecret:
		return problem.Detail(ErrInvalid, "client secret must be 1-%d bytes", MaxSecret)
	case strings.ContainsFunc(secret.Reveal(), unicode.IsControl):
		return problem.Detail(ErrInvalid, "client secret must be one line without control characters")
	}
	return nil
}

// checkProvider refuses a provider an organization cannot have an app at:
// one the catalog lacks, or of the api_key kind.
func (s *Store) checkProvider(name string) error {
	if !names.ValidProvider(name) {
		return problem.Detail(ErrUnknownProvider, "provider must be a provider name such as github")
	}
	if s.catalog == nil {
		return problem.Detail(ErrUnknownProvider, "there is no provider catalog here (CONNECTD_PROVIDERS_FILE)")
	}
	p, err := s.catalog.Get(name)
	if err != nil {
		return problem.Detail(ErrUnknownProvider, "provider %s is not in the catalog (known: %s)", name,
			strings.Join(s.catalog.Names(), ", "))
	}
	if p.Info().Kind != provider.KindOAuth2 {
		return problem.Detail(ErrAPIKeyProvider, "provider %s is of the api_key kind: users type their own keys, "+
			"there is no OAuth app to set", name)
	}
	return nil
}

// secretAAD binds a sealed secret to its row: the app's id, organization,
// provider and client id. Copied onto another row (another app, another
// organization's), it does not open.
func secretAAD(id, org, prov, clientID string) []byte {
	return keyring.Binding(secretPurpose, id, org, prov, clientID)
}

const (
	appColumns   = `id, org_id, provider, client_id, secret IS NOT NULL, created_at, updated_at`
	lockAppSQL   = `SELECT id, client_id FROM provider_apps WHERE org_id = $1 AND provider = $2 FOR UPDATE`
	insertAppSQL = `INSERT INTO provider_apps (id, org_id, provider, client_id, key_version, secret, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7) RETURNING ` + appColumns
	// The same app, its secret rotated.
	updateSecretSQL = `UPDATE provider_apps SET key_version = $2, secret = $3, updated_at = $4 WHERE id = $1
		RETURNING ` + appColumns
	deleteAppByIDSQL = `DELETE FROM provider_apps WHERE id = $1`
	getAppSQL        = `SELECT ` + appColumns + ` FROM provider_apps WHERE org_id = $1 AND provider = $2`
	listAppsSQL      = `SELECT ` + appColumns + ` FROM provider_apps WHERE org_id = $1 ORDER BY provider`
)

func scanApp(row pgx.Row) (App, error) {
	var a App
	err := row.Scan(&a.ID, &a.Org, &a.Provider, &a.ClientID, &a.HasSecret, &a.CreatedAt, &a.UpdatedAt)
	return a, err
}

// SetApp gives organization org its own app at provider prov: clientID and
// secret, as the provider issued them. The secret is sealed (bound to the
// row) and never shown again. A new client id is a new app, with a new id:
// connections made through the old one name its id and can no longer be
// refreshed (ByID answers ErrAppNotFound), since refresh tokens are the
// old app's. The same client id keeps the app's id and rotates its secret.
// replaced is the id of the app the new one replaced ("" when none did or
// only the secret changed). Audited (org.app_set, by actor: the client id,
// never the secret); every replica's resolve cache forgets org.
func (s *Store) SetApp(ctx context.Context, org, prov, clientID string, secret provider.Secret, actor string) (app App, replaced string, err error) {
	if err := checkID(org); err != nil {
		return App{}, "", err
	}
	if err := s.checkProvider(prov); err != nil {
		return App{}, "", err
	}
	if err := checkCredentials(clientID, secret); err != nil {
		return App{}, "", err
	}
	if s.keys == nil {
		return App{}, "", errors.New("org: set app: no vault keyring (CONNECTD_VAULT_KEYS): app secrets are sealed with it")
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var curID, curClient string
		err := tx.QueryRow(ctx, lockAppSQL, org, prov).Scan(&curID, &curClient)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		id := curID
		if id == "" || curClient != clientID {
			id = newAppID()
		}
		sealed, err := s.keys.Seal([]byte(secret.Reveal()), secretAAD(id, org, prov, clientID))
		if err != nil {
			return err
		}
		version := int32(s.keys.Primary())
		if id == curID {
			app, err = scanApp(tx.QueryRow(ctx, updateSecretSQL, id, version, sealed, now))
		} else {
			if curID != "" {
				if _, err := tx.Exec(ctx, deleteAppByIDSQL, curID); err != nil {
					return err
				}
				replaced = curID
			}
			app, err = scanApp(tx.QueryRow(ctx, insertAppSQL, id, org, prov, clientID, version, sealed, now))
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, notifySQL, org); err != nil {
			return err
		}
		detail := map[string]any{"org": org, "app": id, "client_id": clientID, "secret_rotated": id == curID}
		if replaced != "" {
			detail["replaced"] = replaced
		}
		return audit.Write(ctx, tx, audit.Event{Kind: "org.app_set", Actor: actor, Provider: prov, Target: id, Detail: detail,
			OrgID: org})
	})
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "23503":
		return App{}, "", problem.Detail(ErrNotFound, "no organization %s", org)
	case errors.As(err, &pe) && pe.Code == "23505":
		// Two first Sets raced (neither found a row to lock): the other won.
		return App{}, "", problem.Detail(problem.ErrConflict, "the app of %s at %s was set concurrently; run it again", org, prov)
	case err != nil:
		return App{}, "", fmt.Errorf("org: set app of %s at %s: %w", org, prov, err)
	}
	s.forget(org)
	s.logger.InfoContext(ctx, "provider app set", slog.String("org", org), slog.String("provider", prov),
		slog.String("app", app.ID), slog.String("client_id", clientID), slog.String("replaced", replaced))
	return app, replaced, nil
}

// App returns organization org's app at provider prov; ErrAppNotFound when
// it has none.
func (s *Store) App(ctx context.Context, org, prov string) (App, error) {
	if err := checkID(org); err != nil {
		return App{}, err
	}
	a, err := scanApp(s.pool.QueryRow(ctx, getAppSQL, org, prov))
	if errors.Is(err, pgx.ErrNoRows) {
		return App{}, problem.Detail(ErrAppNotFound, "organization %s has no app at %s", org, prov)
	}
	if err != nil {
		return App{}, fmt.Errorf("org: get app: %w", err)
	}
	return a, nil
}

// Apps lists organization org's apps, by provider.
func (s *Store) Apps(ctx context.Context, org string) ([]App, error) {
	if err := checkID(org); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, listAppsSQL, org)
	if err != nil {
		return nil, fmt.Errorf("org: list apps: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (App, error) { return scanApp(r) })
	if err != nil {
		return nil, fmt.Errorf("org: list apps: %w", err)
	}
	return out, nil
}

// RemoveApp deletes organization org's app at provider prov, audited
// (org.app_removed). Its connections can no longer be refreshed (ByID:
// ErrAppNotFound); new ones fall back as Resolve says. ErrAppNotFound when
// there is none.
func (s *Store) RemoveApp(ctx context.Context, org, prov, actor string) (App, error) {
	if err := checkID(org); err != nil {
		return App{}, err
	}
	var removed App
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		a, err := scanApp(tx.QueryRow(ctx, getAppSQL+` FOR UPDATE`, org, prov))
		if errors.Is(err, pgx.ErrNoRows) {
			return problem.Detail(ErrAppNotFound, "organization %s has no app at %s", org, prov)
		}
		if err != nil {
			return err
		}
		removed = a
		if _, err := tx.Exec(ctx, deleteAppByIDSQL, a.ID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, notifySQL, org); err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Event{Kind: "org.app_removed", Actor: actor, Provider: prov, Target: a.ID, OrgID: org,
			Detail: map[string]any{"org": org, "app": a.ID, "client_id": a.ClientID}})
	})
	if err != nil {
		if errors.Is(err, ErrAppNotFound) {
			return App{}, err
		}
		return App{}, fmt.Errorf("org: remove app: %w", err)
	}
	s.forget(org)
	return removed, nil
}

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newAppID returns "app_" and 80 random bits; ids are not secret.
func newAppID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "app_" + strings.ToLower(idEncoding.EncodeToString(b[:]))
}
