package vault

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/connectd/connectd/internal/keyring"
	"github.com/jackc/pgx/v5"
)

// KeyCount is the number of connections sealed under one key version in one
// status, one way.
type KeyCount struct {
	KeyVersion uint32
	Status     Status
	Rows       int64
	// Primary: sealed as new credentials are, under the credential key of the
	// keyring's primary version. Rewrap re-seals every row that is not.
	Primary bool
	// Legacy: sealed directly under the configured key of this version, as
	// connectd did before per-purpose keys. Such rows still open; rewrap
	// moves them to the credential key.
	Legacy    bool
	InKeyring bool // false: these rows cannot be opened with the configured keys
}

// The format byte starts the ciphertext (see Keyring.Seal).
const countByKey = `SELECT key_version, status, substr(ciphertext, 1, 1) <> $1, count(*) FROM connections
	GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`

// KeyStatus counts connections per key version, status and sealing.
func (s *Store) KeyStatus(ctx context.Context) ([]KeyCount, error) {
	rows, err := s.pool.Query(ctx, countByKey, sealedFormat)
	if err != nil {
		return nil, fmt.Errorf("vault: key status: %w", err)
	}
	defer rows.Close()
	var out []KeyCount
	for rows.Next() {
		var (
			v      int32
			status string
			legacy bool
			n      int64
		)
		if err := rows.Scan(&v, &status, &legacy, &n); err != nil {
			return nil, fmt.Errorf("vault: key status: %w", err)
		}
		kv := uint32(v)
		out = append(out, KeyCount{KeyVersion: kv, Status: Status(status), Rows: n, Legacy: legacy,
			Primary: kv == s.keys.Primary() && !legacy, InKeyring: s.keys.Has(kv)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("vault: key status: %w", err)
	}
	return out, nil
}

// ErrRewrapIncomplete: rewrap finished its passes but some rows are still not
// under the primary key (they failed to open, or stayed locked or were written
// under an older primary, or under the configured key itself, by a replica
// still running an older configuration or release). Run it again.
var ErrRewrapIncomplete = errors.New("vault: rewrap incomplete")

// RewrapResult summarises a rewrap.
type RewrapResult struct {
	Rewrapped int      // rows re-encrypted under the primary version's credential key
	Failed    []string // ids of rows that did not open (left as they are)
	Remaining int64    // rows still under another key at the end, failed ones included
}

// RewrapOptions tunes Rewrap.
type RewrapOptions struct {
	Batch int // rows per transaction; default 100
	// Wait is how long to keep retrying rows locked by concurrent writers
	// before giving up with ErrRewrapIncomplete. Default 10s.
	Wait time.Duration
	// Progress, when set, is called after each committed batch.
	Progress func(RewrapResult)
}

const (
	// Keyset pagination over the primary key: each batch starts after the
	// last id seen, so a pass over a large table reads it once. Rows locked
	// by a concurrent refresh or Put are skipped and picked up by the next
	// pass (that writer itself seals under the primary key, on a replica
	// configured as the rotation procedure says).
	//
	// A row needs rewrapping when it is under another key version, or under
	// the primary version's configured key itself rather than its credential
	// key (sealed before per-purpose keys): the format byte that starts the
	// ciphertext ($5) tells. (The filter reads each row's first byte; a
	// rewrap pass reads every row anyway.)
	//
	// Rewrap, KeyStatus and BackfillAccounts are the operator's passes over
	// the deployment's keyring: they cover every organization's rows, on
	// any handle, and change no connection's organization.
	selectRewrapBatch = `SELECT id, issuer, subject, provider, ciphertext, org_id FROM connections
		WHERE id > $2 AND (key_version <> $1 OR substr(ciphertext, 1, 1) <> $5) AND NOT (id = ANY($3))
		ORDER BY id LIMIT $4
		FOR UPDATE SKIP LOCKED`
	// updated_at is left alone: the credential did not change, only its sealing.
	updateRewrapped          = `UPDATE connections SET key_version = $2, ciphertext = $3 WHERE id = $1`
	deleteNarrowedNotPrimary = `DELETE FROM narrowed_tokens WHERE key_version <> $1`
	countNotPrimary          = `SELECT count(*) FROM connections WHERE key_version <> $1 OR substr(ciphertext, 1, 1) <> $2`
)

// sealedFormat is the format byte of what the store seals, as a query argument.
var sealedFormat = []byte{keyring.PurposeFormat}

// Rewrap re-encrypts every connection not sealed under the primary key — the
// credential key derived from the primary version (Keyring.Purpose); rows
// sealed under a configured key directly, as before per-purpose keys, count as
// not under it whatever their version — in batches of one short transaction each. It is safe while the service serves:
// a batch locks only its rows and skips rows other transactions hold, and it
// is resumable: every committed batch stays done, and a new run selects only
// rows still under an old key. When a pass leaves only rows locked by other
// writers, it waits up to opts.Wait for them before reporting
// ErrRewrapIncomplete. Rows that do not open (their key is missing) are
// reported in RewrapResult.Failed and left as they are.
func (s *Store) Rewrap(ctx context.Context, opts RewrapOptions) (RewrapResult, error) {
	if opts.Batch <= 0 {
		opts.Batch = 100
	}
	if opts.Wait <= 0 {
		opts.Wait = 10 * time.Second
	}
	primary := int32(s.keys.Primary())
	res := RewrapResult{Failed: []string{}}
	// Narrowed tokens are not re-encrypted but dropped: they are short-lived
	// copies, fetched again on the next request, so none is left under a key
	// the operator is about to remove.
	if _, err := s.pool.Exec(ctx, deleteNarrowedNotPrimary, primary); err != nil {
		return res, fmt.Errorf("vault: rewrap: drop narrowed tokens: %w", err)
	}
	var (
		after        string    // keyset cursor
		waitingSince time.Time // when only locked rows were left
	)
	for {
		n, last, examined, err := s.rewrapBatch(ctx, primary, after, opts.Batch, &res.Failed)
		res.Rewrapped += n
		if err != nil {
			return res, err
		}
		if examined > 0 {
			after = last
			waitingSince = time.Time{}
			if opts.Progress != nil {
				opts.Progress(res)
			}
			continue
		}
		// End of a pass. Done when nothing is left but rows that do not
		// open; otherwise start another pass, after a pause if this one
		// found nothing to do (only locked rows remain).
		if err := s.pool.QueryRow(ctx, countNotPrimary, primary, sealedFormat).Scan(&res.Remaining); err != nil {
			return res, fmt.Errorf("vault: rewrap: %w", err)
		}
		if res.Remaining <= int64(len(res.Failed)) {
			break
		}
		if after == "" {
			if waitingSince.IsZero() {
				waitingSince = time.Now()
			} else if time.Since(waitingSince) > opts.Wait {
				break
			}
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		after = ""
	}
	if res.Remaining > 0 {
		return res, fmt.Errorf("%w: %d rows not under key version %d (%d did not open)",
			ErrRewrapIncomplete, res.Remaining, primary, len(res.Failed))
	}
	return res, nil
}

// rewrapBatch re-encrypts up to n unlocked rows after the cursor in one
// transaction. It returns how many it re-encrypted, the last id and how many
// it examined (rows that do not open are added to failed and excluded from
// later batches).
func (s *Store) rewrapBatch(ctx context.Context, primary int32, after string, n int, failed *[]string) (done int, last string, examined int, err error) {
	var newFailed []string
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		done, examined, newFailed = 0, 0, nil
		rows, err := tx.Query(ctx, selectRewrapBatch, primary, after, *failed, n, sealedFormat)
		if err != nil {
			return fmt.Errorf("vault: rewrap select: %w", err)
		}
		var items []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.ID, &r.User.Issuer, &r.User.Subject, &r.Provider, &r.ciphertext, &r.Org); err != nil {
				rows.Close()
				return fmt.Errorf("vault: rewrap select: %w", err)
			}
			items = append(items, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("vault: rewrap select: %w", err)
		}
		examined = len(items)
		if examined > 0 {
			last = items[examined-1].ID
		}
		var changed []string // cache invalidations, sent with the batch
		for _, r := range items {
			aad := binding(r.ID, r.User, r.Provider)
			pt, err := s.keys.Open(r.ciphertext, aad)
			if err != nil {
				s.logger.WarnContext(ctx, "vault: rewrap: connection does not open; left as it is",
					slog.String("connection_id", r.ID), slog.Any("error", err))
				newFailed = append(newFailed, r.ID)
				continue
			}
			ct, err := s.keys.Seal(pt, aad)
			clear(pt)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, updateRewrapped, r.ID, primary, ct); err != nil {
				return fmt.Errorf("vault: rewrap update: %w", err)
			}
			changed = append(changed, connKey(r.Org, r.User, r.Provider, r.ID).Payload())
			done++
		}
		if len(changed) > 0 {
			if _, err := tx.Exec(ctx, notifyManySQL, InvalidationChannel, changed); err != nil {
				return fmt.Errorf("vault: rewrap notify: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, "", 0, err
	}
	*failed = append(*failed, newFailed...)
	return done, last, examined, nil
}

const (
	selectUnread = `SELECT ` + connCols + ` FROM connections WHERE display_name IS NULL
		ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`
	// setRead keeps what the credential says of its account: the display
	// name, and the account hash of a row from before hashes were kept
	// unless the user has a connection for that account already (a
	// credential that did not open when it was connected).
	setRead = `WITH changed AS (UPDATE connections c SET display_name = $2,
		account_hash = CASE WHEN c.account_hash IS NULL AND $3::bytea IS NOT NULL AND NOT EXISTS (
			SELECT 1 FROM connections o WHERE o.org_id = c.org_id AND o.issuer = c.issuer AND o.subject = c.subject
			AND o.provider = c.provider AND o.account_hash = $3) THEN $3 ELSE c.account_hash END
		WHERE id = $1 RETURNING 1)
		` + notifyChangedSQL + `$4) FROM changed`
)

// BackfillAccounts reads, for at most limit connections stored before
// connections were per provider account (display_name NULL, migration
// 00018) or before their display name fell back to the provider's account
// id (00025 set it NULL again where it was empty), what their sealed
// credential says of the account — its display name
// (Credential.DisplayName) and, for rows from before 00017, its account
// hash — so listings and
// the account page name every account without opening credentials. A row
// whose credential does not open gets an empty name (it is not tried
// again). It reports how many rows it read; run it until it reports 0. It
// is safe while the service serves (rows other transactions hold are
// skipped).
func (s *Store) BackfillAccounts(ctx context.Context, limit int) (int64, error) {
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, selectUnread, limit)
		if err != nil {
			return err
		}
		todo, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*row, error) { return scanRow(r) })
		if err != nil {
			return err
		}
		for _, r := range todo {
			name, hash := "", []byte(nil)
			if c, err := s.open(r); err == nil {
				name, hash = c.DisplayName(), AccountHash(c.AccountID)
			}
			if _, err := tx.Exec(ctx, setRead, r.ID, name, hash, connKey(r.Org, r.User, r.Provider, r.ID).Payload()); err != nil {
				return err
			}
			s.forgetIn(r.Org, r.User, r.Provider, r.ID)
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("vault: backfill accounts: %w", err)
	}
	return n, nil
}
