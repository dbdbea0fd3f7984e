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

// App secrets are sealed under the vault keyring's app-secret purpose key,
// so a key rotation must move them too: `connectd vault status` counts them
// (SecretKeyStatus) and `connectd vault rewrap` re-seals them
// (RewrapSecrets), next to the connections and webhook secrets.

const countSecretsByKey = `SELECT key_version, count(*) FROM provider_apps WHERE secret IS NOT NULL GROUP BY 1 ORDER BY 1`

// SecretKeyStatus counts app secrets per key version.
func SecretKeyStatus(ctx context.Context, pool *pgxpool.Pool, root *keyring.Keyring) ([]keyring.VersionCount, error) {
	keys := root.Purpose(secretPurpose)
	rows, err := pool.Query(ctx, countSecretsByKey)
	if err != nil {
		return nil, fmt.Errorf("org: secret key status: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (keyring.VersionCount, error) {
		var v int32
		var n int64
		err := r.Scan(&v, &n)
		return keys.Counted(uint32(v), n), err
	})
	if err != nil {
		return nil, fmt.Errorf("org: secret key status: %w", err)
	}
	return out, nil
}

const (
	selectSecretsNotPrimary = `SELECT id, org_id, provider, client_id, secret FROM provider_apps
		WHERE secret IS NOT NULL AND key_version <> $1 ORDER BY id FOR UPDATE SKIP LOCKED`
	updateSealedSQL = `UPDATE provider_apps SET key_version = $2, secret = $3 WHERE id = $1`
)

// RewrapSecrets re-seals every app secret not under the primary key, in one
// transaction (apps are few), and returns how many it moved and the ids of
// those that did not open (their key is missing), left as they are. Every
// replica's resolve cache is flushed (it holds sealed copies).
func RewrapSecrets(ctx context.Context, pool *pgxpool.Pool, root *keyring.Keyring) (int, []string, error) {
	keys := root.Purpose(secretPurpose)
	done, failed := 0, []string{}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, selectSecretsNotPrimary, int32(keys.Primary()))
		if err != nil {
			return err
		}
		type sealed struct {
			id, org, prov, clientID string
			ct                      []byte
		}
		list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (sealed, error) {
			var x sealed
			err := r.Scan(&x.id, &x.org, &x.prov, &x.clientID, &x.ct)
			return x, err
		})
		if err != nil {
			return err
		}
		for _, x := range list {
			ct, err := keys.Reseal(x.ct, secretAAD(x.id, x.org, x.prov, x.clientID))
			if errors.Is(err, keyring.ErrDecrypt) {
				failed = append(failed, x.id)
				continue
			}
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, updateSealedSQL, x.id, int32(keys.Primary()), ct); err != nil {
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
		return 0, failed, fmt.Errorf("org: rewrap secrets: %w", err)
	}
	return done, failed, nil
}
