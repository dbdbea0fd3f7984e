package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/problem"
)

// KeyPrefix starts every admin API key, so a leaked one is recognisable (secret
// scanners) and never mistaken for a client key (cks_) or a token.
const KeyPrefix = "cka_"

// keyBytes is an admin key's entropy: 256 bits.
const keyBytes = 32

// keyLastUsedEvery bounds how often last_used_at is written per key.
const keyLastUsedEvery = time.Minute

// ErrInvalidKey: the admin API key is missing, malformed, unknown, revoked or
// expired. Which one is not told to the caller.
var ErrInvalidKey = errors.New("admin: invalid admin key")

// Key describes an admin API key; the key itself is shown once, at creation.
type Key struct {
	ID         string
	Name       string
	CreatedBy  string
	CreatedAt  time.Time
	ExpiresAt  time.Time // zero: never
	RevokedAt  time.Time // zero: not revoked
	LastUsedAt time.Time // to the minute; zero: never
	// Org is the organization the key acts for, with Role; "" for an
	// operator key, which acts on every organization.
	Org  string
	Role Role
}

// Active reports whether the key is usable at now.
func (k Key) Active(now time.Time) bool {
	return k.RevokedAt.IsZero() && (k.ExpiresAt.IsZero() || now.Before(k.ExpiresAt))
}

// Keys is the admin_keys table: API keys of the admin JSON API, stored only as
// SHA-256 hashes.
type Keys struct {
	pool   *pgxpool.Pool
	now    func() time.Time
	logger *slog.Logger

	touched *cache.Every // when this process last wrote a key's last_used_at
}

// NewKeys returns the admin key store over pool; now and logger may be nil.
func NewKeys(pool *pgxpool.Pool, now func() time.Time, logger *slog.Logger) *Keys {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Keys{pool: pool, now: now, logger: logger, touched: cache.NewEvery(keyLastUsedEvery)}
}

const (
	keyColumns      = `id, name, created_by, created_at, expires_at, revoked_at, last_used_at, coalesce(org_id, ''), coalesce(role, '')`
	insertKey       = `INSERT INTO admin_keys (id, name, key_hash, created_by, created_at, expires_at, org_id, role) VALUES ($1, $2, $3, $4, $5, $6, nullif($7, ''), nullif($8, ''))`
	listKeys        = `SELECT ` + keyColumns + ` FROM admin_keys ORDER BY created_at, id`
	revokeKey       = `UPDATE admin_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL RETURNING name, coalesce(org_id, '')`
	selectKeyByHash = `SELECT key_hash, ` + keyColumns + ` FROM admin_keys WHERE key_hash = $1`
	touchKey        = `UPDATE admin_keys SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at <= $3)`
)

func scanKey(r pgx.Row, hash *[]byte) (Key, error) {
	var k Key
	var expires, revoked, used *time.Time
	dest := []any{&k.ID, &k.Name, &k.CreatedBy, &k.CreatedAt, &expires, &revoked, &used, &k.Org, &k.Role}
	if hash != nil {
		dest = append([]any{hash}, dest...)
	}
	if err := r.Scan(dest...); err != nil {
		return Key{}, err
	}
	for _, p := range []struct {
		src *time.Time
		dst *time.Time
	}{{expires, &k.ExpiresAt}, {revoked, &k.RevokedAt}, {used, &k.LastUsedAt}} {
		if p.src != nil {
			*p.dst = *p.src
		}
	}
	return k, nil
}

// Create makes an operator key (every organization) named name, valid for
// ttl (0: until revoked), and returns it with the secret key — shown only
// now; the database keeps its SHA-256. The creation is audited in the same
// transaction.
func (ks *Keys) Create(ctx context.Context, name string, ttl time.Duration, by Actor) (Key, string, error) {
	return ks.CreateInOrg(ctx, name, ttl, "", "", by)
}

// CreateInOrg is Create for a key that acts for org alone, with role (org
// "": an operator key, role ""). ErrNotFound when org does not exist.
func (ks *Keys) CreateInOrg(ctx context.Context, name string, ttl time.Duration, org string, role Role, by Actor) (Key, string, error) {
	switch {
	case org == "" && role != "":
		return Key{}, "", problem.Detail(ErrInvalid, "an operator key (no organization) has no role")
	case org != "" && !names.ValidOrg(org):
		return Key{}, "", problem.Detail(ErrInvalid, "org must be an organization id such as acme")
	case org != "" && !role.Valid():
		return Key{}, "", problem.Detail(ErrInvalid, "role must be one of owner, admin, security, viewer")
	case !by.actsFor(org) || org == "" && by.Org != "":
		return Key{}, "", errNoOrg(org)
	}
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 200 || strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return Key{}, "", problem.Detail(ErrInvalid, "a key name of 1-200 characters is required")
	}
	if ttl < 0 {
		return Key{}, "", problem.Detail(ErrInvalid, "negative lifetime")
	}
	now := ks.now().UTC().Truncate(time.Microsecond)
	k := Key{ID: newKeyID(), Name: name, CreatedBy: by.Name, CreatedAt: now, Org: org, Role: role}
	var expires any
	if ttl > 0 {
		k.ExpiresAt = now.Add(ttl)
		expires = k.ExpiresAt
	}
	secret, hash := newSecret()
	err := pgx.BeginFunc(ctx, ks.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, insertKey, k.ID, k.Name, hash[:], k.CreatedBy, k.CreatedAt, expires, org, string(role))
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23503" { // foreign_key_violation: no such organization
			return errNoOrg(org)
		}
		if err != nil {
			return err
		}
		detail := map[string]any{"name": k.Name, "expires_at": expires}
		if org != "" {
			detail["key_role"] = string(role)
		}
		return writeAudit(ctx, tx, Event{Kind: "admin.key_created", Org: org, Target: k.ID, Detail: detail}, by)
	})
	if errors.Is(err, ErrNotFound) {
		return Key{}, "", err
	}
	if err != nil {
		return Key{}, "", fmt.Errorf("admin: create key: %w", err)
	}
	return k, secret, nil
}

// List returns every key, oldest first, revoked and expired ones included.
func (ks *Keys) List(ctx context.Context) ([]Key, error) {
	rows, err := ks.pool.Query(ctx, listKeys)
	if err != nil {
		return nil, fmt.Errorf("admin: list keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Key, error) { return scanKey(r, nil) })
	if err != nil {
		return nil, fmt.Errorf("admin: list keys: %w", err)
	}
	return out, nil
}

// Revoke stops the key id at once; the revocation is audited in the same
// transaction. ErrNotFound when there is no such active key.
func (ks *Keys) Revoke(ctx context.Context, id string, by Actor) error {
	err := pgx.BeginFunc(ctx, ks.pool, func(tx pgx.Tx) error {
		var name, org string
		err := tx.QueryRow(ctx, revokeKey, id, ks.now().UTC()).Scan(&name, &org)
		if errors.Is(err, pgx.ErrNoRows) {
			return problem.Detail(ErrNotFound, "no active admin key %q", id)
		}
		if err != nil {
			return err
		}
		return writeAudit(ctx, tx, Event{Kind: "admin.key_revoked", Org: org, Target: id, Detail: map[string]any{"name": name}}, by)
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("admin: revoke key: %w", err)
	}
	return err
}

// Authenticate returns the active key secret belongs to, or ErrInvalidKey. The
// lookup is by SHA-256 and the hash is compared again in constant time.
func (ks *Keys) Authenticate(ctx context.Context, secret string) (Key, error) {
	if !wellFormedSecret(secret) {
		return Key{}, ErrInvalidKey
	}
	want := sha256.Sum256([]byte(secret))
	var got []byte
	k, err := scanKey(ks.pool.QueryRow(ctx, selectKeyByHash, want[:]), &got)
	if errors.Is(err, pgx.ErrNoRows) {
		return Key{}, ErrInvalidKey
	}
	if err != nil {
		return Key{}, fmt.Errorf("admin: authenticate key: %w", err)
	}
	now := ks.now().UTC()
	if subtle.ConstantTimeCompare(got, want[:]) != 1 || !k.Active(now) {
		return Key{}, ErrInvalidKey
	}
	ks.touch(ctx, k.ID, now)
	return k, nil
}

// touch records use at most once a minute per key (and process).
func (ks *Keys) touch(ctx context.Context, id string, now time.Time) {
	if !ks.touched.Due(id, now) {
		return
	}
	if _, err := ks.pool.Exec(ctx, touchKey, id, now, now.Add(-keyLastUsedEvery)); err != nil {
		ks.logger.WarnContext(ctx, "record admin key use", slog.String("key_id", id), slog.Any("error", err))
	}
}

func newSecret() (string, [32]byte) {
	var b [keyBytes]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms.
	s := KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return s, sha256.Sum256([]byte(s))
}

func wellFormedSecret(s string) bool {
	rest, ok := strings.CutPrefix(s, KeyPrefix)
	if !ok || len(rest) != base64.RawURLEncoding.EncodedLen(keyBytes) {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(rest)
	return err == nil
}

// newKeyID returns "akey_" and 80 random bits; ids are not secret.
func newKeyID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "akey_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}
