package webhook

import (
	"context"
	"errors"
	"fmt"

	"github.com/connectd/connectd/internal/keyring"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Endpoint secrets are sealed under the vault keyring's webhook-secret
// purpose key, so a key rotation must move them too: `connectd vault status`
// counts them (SecretKeyStatus) and `connectd vault rewrap` re-seals them
// (RewrapSecrets), next to the connections.

const countSecretsByKey = `SELECT key_version, count(*) FROM webhook_endpoints GROUP BY 1 ORDER BY 1`

// SecretKeyStatus counts endpoint secrets per key version.
func SecretKeyStatus(ctx context.Context, pool *pgxpool.Pool, root *keyring.Keyring) ([]keyring.VersionCount, error) {
	keys := root.Purpose(secretPurpose)
	rows, err := pool.Query(ctx, countSecretsByKey)
	if err != nil {
		return nil, fmt.Errorf("webhook: secret key status: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (keyring.VersionCount, error) {
		var v int32
		var n int64
		err := r.Scan(&v, &n)
		return keys.Counted(uint32(v), n), err
	})
	if err != nil {
		return nil, fmt.Errorf("webhook: secret key status: %w", err)
	}
	return out, nil
}

const (
	selectSecretsNotPrimary = `SELECT id, secret FROM webhook_endpoints WHERE key_version <> $1 ORDER BY id FOR UPDATE SKIP LOCKED`
	updateSecret            = `UPDATE webhook_endpoints SET key_version = $2, secret = $3 WHERE id = $1`
)

// RewrapSecrets re-seals every endpoint secret not under the primary key, in
// one transaction (endpoints are few), and returns how many it moved and
// the ids of those that did not open (their key is missing), left as they
// are.
func RewrapSecrets(ctx context.Context, pool *pgxpool.Pool, root *keyring.Keyring) (int, []string, error) {
	keys := root.Purpose(secretPurpose)
	done, failed := 0, []string{}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, selectSecretsNotPrimary, int32(keys.Primary()))
		if err != nil {
			return err
		}
		type sealed struct {
			id string
			ct []byte
		}
		list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (sealed, error) {
			var x sealed
			err := r.Scan(&x.id, &x.ct)
			return x, err
		})
		if err != nil {
			return err
		}
		for _, x := range list {
			ct, err := keys.Reseal(x.ct, secretAAD(x.id))
			if errors.Is(err, keyring.ErrDecrypt) {
				failed = append(failed, x.id)
				continue
			}
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, updateSecret, x.id, int32(keys.Primary()), ct); err != nil {
				return err
			}
			done++
		}
		return nil
	})
	if err != nil {
		return 0, failed, fmt.Errorf("webhook: rewrap secrets: %w", err)
	}
	return done, failed, nil
}
