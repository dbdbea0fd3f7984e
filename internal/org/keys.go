package org

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/keyring"
)

// The package's sealed secrets — provider apps' client secrets and the
// issuers' login client secrets — are sealed under purpose keys of the
// vault keyring, so a key rotation must move them too: `connectd vault
// status` counts them (SecretKeyStatus, IssuerSecretKeyStatus) and
// `connectd vault rewrap` re-seals them (RewrapSecrets,
// RewrapIssuerSecrets), next to the connections and webhook secrets. One
// sealedColumn per table says where they are; status and rewrap are the
// same for both.

// sealedColumn is one table's sealed secrets: its purpose key, and the
// statements that count them by key version, select those not under the
// primary key (id, org_id, the AAD's third field, client_id, the sealed
// value) and store one re-sealed.
type sealedColumn struct {
	what             string
	purpose          string
	count            string
	selectNotPrimary string
	update           string
	aad              func(id, org, third, clientID string) []byte
}

var (
	appSecrets = sealedColumn{what: "secret", purpose: secretPurpose,
		count: `SELECT key_version, count(*) FROM provider_apps WHERE secret IS NOT NULL GROUP BY 1 ORDER BY 1`,
		selectNotPrimary: `SELECT id, org_id, provider, client_id, secret FROM provider_apps
			WHERE secret IS NOT NULL AND key_version <> $1 ORDER BY id FOR UPDATE SKIP LOCKED`,
		update: `UPDATE provider_apps SET key_version = $2, secret = $3 WHERE id = $1`,
		aad:    secretAAD}
	issuerSecrets = sealedColumn{what: "issuer secret", purpose: issuerSecretPurpose,
		count: `SELECT key_version, count(*) FROM org_issuers WHERE client_secret IS NOT NULL GROUP BY 1 ORDER BY 1`,
		selectNotPrimary: `SELECT id, org_id, url, client_id, client_secret FROM org_issuers
			WHERE client_secret IS NOT NULL AND key_version <> $1 ORDER BY id FOR UPDATE SKIP LOCKED`,
		update: `UPDATE org_issuers SET key_version = $2, client_secret = $3 WHERE id = $1`,
		aad:    issuerAAD}
)

// SecretKeyStatus counts app secrets per key version.
func SecretKeyStatus(ctx context.Context, pool *pgxpool.Pool, root *keyring.Keyring) ([]keyring.VersionCount, error) {
	return appSecrets.status(ctx, pool, root)
}

// RewrapSecrets re-seals every app secret not under the primary key, in one
// transaction (apps are few), and returns how many it moved and the ids of
// those that did not open (their key is missing), left as they are. Every
// replica's resolve cache is flushed (it holds sealed copies).
func RewrapSecrets(ctx context.Context, pool *pgxpool.Pool, root *keyring.Keyring) (int, []string, error) {
	return appSecrets.rewrap(ctx, pool, root)
}

// IssuerSecretKeyStatus counts the issuers' login client secrets per key
// version.
func IssuerSecretKeyStatus(ctx context.Context, pool *pgxpool.Pool, root *keyring.Keyring) ([]keyring.VersionCount, error) {
	return issuerSecrets.status(ctx, pool, root)
}

// RewrapIssuerSecrets re-seals every issuer login secret not under the
// primary key, as RewrapSecrets does the apps'; every replica's trust cache
// is flushed.
func RewrapIssuerSecrets(ctx context.Context, pool *pgxpool.Pool, root *keyring.Keyring) (int, []string, error) {
	return issuerSecrets.rewrap(ctx, pool, root)
}

func (t sealedColumn) status(ctx context.Context, pool *pgxpool.Pool, root *keyring.Keyring) ([]keyring.VersionCount, error) {
	keys := root.Purpose(t.purpose)
	rows, err := pool.Query(ctx, t.count)
	if err != nil {
		return nil, fmt.Errorf("org: %s key status: %w", t.what, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (keyring.VersionCount, error) {
		var v int32
		var n int64
		err := r.Scan(&v, &n)
		return keys.Counted(uint32(v), n), err
	})
	if err != nil {
		return nil, fmt.Errorf("org: %s key status: %w", t.what, err)
	}
	return out, nil
}

func (t sealedColumn) rewrap(ctx context.Context, pool *pgxpool.Pool, root *keyring.Keyring) (int, []string, error) {
	keys := root.Purpose(t.purpose)
	done, failed := 0, []string{}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, t.selectNotPrimary, int32(keys.Primary()))
		if err != nil {
			return err
		}
		type sealed struct {
			id, org, third, clientID string
			ct                       []byte
		}
		list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (sealed, error) {
			var x sealed
			err := r.Scan(&x.id, &x.org, &x.third, &x.clientID, &x.ct)
			return x, err
		})
		if err != nil {
			return err
		}
		for _, x := range list {
			ct, err := keys.Reseal(x.ct, t.aad(x.id, x.org, x.third, x.clientID))
			if errors.Is(err, keyring.ErrDecrypt) {
				failed = append(failed, x.id)
				continue
			}
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, t.update, x.id, int32(keys.Primary()), ct); err != nil {
				return err
			}
			done++
		}
		if done > 0 {
			_, err = tx.Exec(ctx, notifySQL, cache.Flush)
		}
		return err
	})
	if err != nil {
		return 0, failed, fmt.Errorf("org: rewrap %ss: %w", t.what, err)
	}
	return done, failed, nil
}
