package vault

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/singleflight"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/scope"
)

// Errors of the connection store. Each is wrapped with context; test with
// errors.Is (and errors.As for *MissingScopesError).
var (
	// ErrNotConnected: the user has no usable connection to the provider.
	ErrNotConnected = errors.New("vault: not connected")
	// ErrReauthorizationRequired: the provider refused the stored grant
	// (invalid_grant) or the token expired with nothing to refresh it; the user
	// must connect again. The connection is marked reauthorization_required.
	ErrReauthorizationRequired = errors.New("vault: reauthorization required")
	// ErrProviderUnavailable: the provider failed in a way worth retrying (5xx,
	// timeout, network). The stored connection was left untouched.
	ErrProviderUnavailable = errors.New("vault: provider unavailable")
	// ErrRevocationNotSupported is what a RevokeFunc returns when the provider
	// has no revocation endpoint.
	ErrRevocationNotSupported = errors.New("vault: provider does not support revocation")
	// ErrInvalid: an argument is malformed (empty issuer, bad provider name,
	// empty access token).
	ErrInvalid = errors.New("vault: invalid argument")
	// ErrAccountRequired: the user has several connections at the provider
	// and the caller named none (an empty connection id).
	ErrAccountRequired = errors.New("vault: several connections at the provider; name one")
	// ErrTooManyAccounts: a new provider account would pass the limit of
	// connections per user and provider (Config.MaxAccounts).
	ErrTooManyAccounts = errors.New("vault: too many accounts at the provider")
)

// DefaultMaxAccounts is the default limit of a user's connections at one
// provider.
const DefaultMaxAccounts = 10

// MissingScopesError says the connection lacks scopes the caller requires; the
// caller asks the user to connect again with them (incremental authorization).
type MissingScopesError struct {
	Provider string
	Missing  []string
}

func (e *MissingScopesError) Error() string {
	return fmt.Sprintf("vault: connection to %s lacks scopes %s", e.Provider, strings.Join(e.Missing, " "))
}

// Status is a connection's state.
type Status string

// Connection states.
const (
	StatusActive                  Status = "active"
	StatusReauthorizationRequired Status = "reauthorization_required"
	StatusRevoked                 Status = "revoked"
)

// Connection describes a stored connection without its secrets.
type Connection struct {
	ID          string
	User        identity.User
	Provider    string
	Status      Status
	KeyVersion  uint32
	Scopes      []string  // granted scopes (copy of the sealed set, for listing)
	Expiry      time.Time // access-token expiry; zero when unknown
	CreatedAt   time.Time
	UpdatedAt   time.Time // last Put or refresh
	RefreshedAt time.Time // last successful refresh; zero if never
	// HealthCheckedAt is when a refresh last reached the provider (zero:
	// never); LastError what went wrong then, as an error class
	// (provider_unavailable, refresh_failed, invalid_grant), "" after a
	// success. Never a token or a provider's own message.
	HealthCheckedAt time.Time
	LastError       string
	// AccountHash is AccountHash of the provider account the credential is
	// for; nil on a row not stored or refreshed since it was kept (open the
	// credential to know).
	AccountHash []byte
	// DisplayName is Credential.DisplayName of the stored credential, kept
	// in clear: what the provider calls the account (login, email,
	// workspace), else its id for it; "" when it named the account not at
	// all (an API key) or on a row not read since migration 00025. Label is
	// the user's own name for the connection ("work"), "" when none.
	// Neither is a secret.
	DisplayName string
	Label       string
	// Org is the organization the connection belongs to: the one whose
	// provider app obtained it. AppID is that app (provider_apps.id); ""
	// for the deployment's shared app.
	Org   string
	AppID string
}

// App is the provider app a connection was obtained with, and so the only
// one that may refresh, narrow or revoke its grant: the provider, the
// organization and its app id ("": the deployment's shared app).
type App struct {
	Provider string
	Org      string
	AppID    string
}

// App is the app c was obtained with.
func (c Connection) App() App { return App{Provider: c.Provider, Org: c.Org, AppID: c.AppID} }

// RefreshFunc asks the provider for a new access token. It returns an error
// wrapping ErrReauthorizationRequired when the provider rejects the refresh
// token (invalid_grant), one wrapping ErrProviderUnavailable for retryable
// failures, and any other error otherwise. Errors must not contain secrets.
//
// app is the provider app the connection was obtained with: the refresh
// token was issued to it, and no other app can use it.
type RefreshFunc func(ctx context.Context, app App, refreshToken string) (*Refreshed, error)

// Refreshed is a provider's answer to a refresh.
type Refreshed struct {
	AccessToken  string
	TokenType    string
	RefreshToken string    // "" keeps the stored refresh token (providers that do not rotate)
	Expiry       time.Time // zero: the provider did not say
	Scopes       []string  // nil keeps the stored scopes
}

// RevokeFunc revokes a credential at the provider (RFC 7009 or the provider's
// equivalent). It returns an error wrapping ErrRevocationNotSupported when the
// provider cannot revoke. Errors must not contain secrets. app is the
// provider app the credential was obtained with.
type RevokeFunc func(ctx context.Context, app App, cred *Credential) error

// Config holds a Store's dependencies. Pool and Keyring are required.
type Config struct {
	Pool    *pgxpool.Pool
	Keyring *keyring.Keyring
	// Refresh refreshes expiring tokens; nil disables refreshing (Token then
	// fails for an expiring token instead of refreshing it).
	Refresh RefreshFunc
	// RefreshScoped fetches access tokens limited to a subset of a
	// connection's grant (Narrowed); nil: Narrowed fails with ErrCannotNarrow.
	RefreshScoped RefreshScopedFunc
	// Revoke revokes deleted credentials at the provider; nil skips revocation.
	Revoke RevokeFunc
	// Skew: a token expiring within Skew is refreshed before it is returned.
	// Default 1m.
	Skew time.Duration
	// ProviderTimeout bounds one refresh or revocation call. Default 30s.
	// The HTTP client behind Refresh must not give up sooner (the wiring
	// sets its timeouts to this): an answer dropped early is a rotated
	// refresh token lost.
	ProviderTimeout time.Duration
	// ReuseGrace says, per provider, how long it keeps accepting a refresh
	// token it has just rotated away (0 or nil: not at all). Where it is
	// positive, a refresh whose answer was lost is retried once with the
	// same token (lease.go).
	ReuseGrace func(provider string) time.Duration
	Now        func() time.Time // default time.Now
	Logger     *slog.Logger     // default: discard
	// CacheTTL is how long Token may use a connection row (sealed credential
	// and metadata) from memory; 0 disables the cache. Changes made through
	// any Store reach the cache sooner, by notification (see cache.go): the
	// TTL only bounds staleness should one be lost unnoticed.
	CacheTTL time.Duration
	// CacheSize caps the cached rows (default 50,000 when CacheTTL is set).
	CacheSize int
	// MaxAccounts limits a user's connections at one provider; a new
	// provider account past it is ErrTooManyAccounts. Default
	// DefaultMaxAccounts.
	MaxAccounts int
	// OnReauth, when set, is called inside the transaction that marks a
	// connection reauthorization_required (the provider refused its refresh
	// token, or it expired without one), with why; what it writes (webhook
	// events) commits with the change, and its error rolls the change back.
	OnReauth func(ctx context.Context, tx pgx.Tx, c Connection, reason string) error
}

// Store is the connections table: sealed credentials per (organization,
// issuer, subject, provider, provider account). It is safe for concurrent
// use; any number of Stores (one per replica) may share a database.
//
// A Store is a handle on one organization's connections (issue 34): every
// query it makes is scoped by organization (org_id), every connection it
// writes is that organization's, and its cache entries are keyed by it, so a
// connection made through one organization's app is not found, changed or
// refreshed through another's handle (ErrNotConnected, as if it did not
// exist). New returns the default organization's handle; In another's. The
// handles of one Store share everything else (pool, keys, cache, the
// in-process refresh flights) through one pointer.
type Store struct {
	*shared
	org string // never empty
}

// shared is what every organization's handle of one Store shares.
type shared struct {
	pool            *pgxpool.Pool
	root            *keyring.Keyring // as configured
	keys            *keyring.Keyring // root.Purpose(credentialKeys): seals and opens credentials
	refresh         RefreshFunc
	refreshScoped   RefreshScopedFunc
	narrowKeys      *keyring.Keyring // root.Purpose(narrowedKeys): seals narrowed tokens
	revoke          RevokeFunc
	grace           func(provider string) time.Duration
	skew            time.Duration
	providerTimeout time.Duration
	now             func() time.Time
	logger          *slog.Logger
	flight          singleflight.Group
	cache           *cache.Map[cache.Digest, tokenRow] // nil: disabled; see cache.go
	onReauth        func(ctx context.Context, tx pgx.Tx, c Connection, reason string) error
	maxAccounts     int
}

// DefaultOrg is the organization every deployment starts with (migration
// 00028), whose connections New's handle reads and writes.
const DefaultOrg = "default"

// orgOr is org, or DefaultOrg for "".
func orgOr(org string) string {
	if org == "" {
		return DefaultOrg
	}
	return org
}

// In returns the handle of organization org's connections ("": the default
// organization's), sharing s's pool, keys, cache and refreshes. An org that
// does not exist finds nothing and stores nothing.
func (s *Store) In(org string) *Store {
	return &Store{shared: s.shared, org: orgOr(org)}
}

// Org is the organization of the handle.
func (s *Store) Org() string { return s.org }

// New returns a Store.
func New(cfg Config) (*Store, error) {
	if cfg.Pool == nil || cfg.Keyring == nil {
		return nil, errors.New("vault: Config.Pool and Config.Keyring are required")
	}
	s := &Store{org: DefaultOrg, shared: &shared{
		pool: cfg.Pool, root: cfg.Keyring, keys: cfg.Keyring.Purpose(credentialKeys), refresh: cfg.Refresh, revoke: cfg.Revoke,
		refreshScoped: cfg.RefreshScoped, narrowKeys: cfg.Keyring.Purpose(narrowedKeys),
		skew: cfg.Skew, providerTimeout: cfg.ProviderTimeout, now: cfg.Now, logger: cfg.Logger, onReauth: cfg.OnReauth,
		grace: cfg.ReuseGrace, maxAccounts: cfg.MaxAccounts,
	}}
	if s.maxAccounts <= 0 {
		s.maxAccounts = DefaultMaxAccounts
	}
	if s.skew <= 0 {
		s.skew = time.Minute
	}
	if s.providerTimeout <= 0 {
		s.providerTimeout = 30 * time.Second
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 50_000
	}
	s.cache = cache.New[cache.Digest, tokenRow](cfg.CacheTTL, cfg.CacheSize, s.now)
	return s, nil
}

// reuseGrace is cfg.ReuseGrace's answer for provider.
func (s *Store) reuseGrace(provider string) time.Duration {
	if s.grace == nil {
		return 0
	}
	return s.grace(provider)
}

// Keyring returns the store's keyring as configured (credentials are sealed
// under its Purpose for credentials, with the same versions).
func (s *Store) Keyring() *keyring.Keyring { return s.root }

const connCols = `id, issuer, subject, provider, status, key_version, ciphertext, scopes, expires_at,
	created_at, updated_at, refreshed_at, health_checked_at, last_error, account_hash, coalesce(display_name, ''), label,
	org_id, coalesce(app_id, '')`

// Every statement on connections names the handle's organization (org_id),
// even one by id within a transaction whose locking read already did: a
// connection is found, changed and announced only within its organization.
const (
	selectConnection = `SELECT ` + connCols + ` FROM connections
		WHERE issuer = $1 AND subject = $2 AND provider = $3 AND id = $4 AND org_id = $5`
	selectConnectionForUpdate = selectConnection + ` FOR UPDATE`
	// selectIDs: the user's connections at a provider, the oldest first.
	selectIDs = `SELECT id FROM connections WHERE issuer = $1 AND subject = $2 AND provider = $3 AND org_id = $5
		ORDER BY created_at, id LIMIT $4`
	selectAtForUpdate = `SELECT ` + connCols + ` FROM connections
		WHERE issuer = $1 AND subject = $2 AND provider = $3 AND org_id = $4 ORDER BY created_at, id FOR UPDATE`
	// lockAccounts serializes the Puts of one user at one provider (the
	// account limit, a legacy row's first account).
	lockAccounts    = `SELECT pg_advisory_xact_lock($1)`
	listConnections = `SELECT ` + connCols + ` FROM connections
		WHERE issuer = $1 AND subject = $2 AND org_id = $3 ORDER BY provider, created_at, id`
	// listAllConnections is the user's own view across organizations
	// (ListAll), for the account page.
	listAllConnections = `SELECT ` + connCols + ` FROM connections
		WHERE issuer = $1 AND subject = $2 ORDER BY org_id, provider, created_at, id`
	// Every write announces itself to every replica's cache in the same
	// statement (see cache.go): the last parameter is the connection's
	// cache key. A statement that changed no row notifies nobody and
	// reports 0 rows.
	insertConnection = `WITH changed AS (INSERT INTO connections
		(id, issuer, subject, provider, status, key_version, ciphertext, scopes, expires_at, created_at, updated_at, account_hash,
		 display_name, org_id, app_id)
		VALUES ($1, $2, $3, $4, 'active', $5, $6, $7, $8, $9, $9, $11, $12, $13, nullif($14, ''))
		ON CONFLICT DO NOTHING RETURNING 1)
		` + notifyChangedSQL + `$10) FROM changed`
	// A new grant has no health on record yet, and ends any refresh lease:
	// an answer to a call made with the replaced grant is dropped.
	updateCredential = `WITH changed AS (UPDATE connections
		SET status = 'active', key_version = $2, ciphertext = $3, scopes = $4, expires_at = $5, updated_at = $6,
		    health_checked_at = NULL, last_error = '',
		    refresh_lease = '', refresh_lease_until = NULL, refresh_doubt_at = NULL, account_hash = $8, display_name = $9,
		    label = CASE WHEN $10 THEN '' ELSE label END, app_id = nullif($12, '')
		WHERE id = $1 AND org_id = $11 RETURNING 1)
		` + notifyChangedSQL + `$7) FROM changed`
	updateRefreshed = `WITH changed AS (UPDATE connections
		SET status = 'active', key_version = $2, ciphertext = $3, scopes = $4, expires_at = $5,
		    updated_at = $6, refreshed_at = $6, account_hash = $8, display_name = $9
		WHERE id = $1 AND org_id = $10 RETURNING 1)
		` + notifyChangedSQL + `$7) FROM changed`
	updateStatus = `WITH changed AS (UPDATE connections SET status = $2, updated_at = $3 WHERE id = $1 AND org_id = $5
		RETURNING 1)
		` + notifyChangedSQL + `$4) FROM changed`
	// deleteConnection deletes the user's connection to a provider and
	// returns the row as it was (its credential is revoked at the provider
	// after the commit): no separate locking read. notified is evaluated
	// through the count, as Postgres skips a SELECT CTE nobody reads.
	deleteConnection = `WITH changed AS (DELETE FROM connections
		WHERE issuer = $1 AND subject = $2 AND provider = $3 AND id = $5 AND org_id = $6
		RETURNING ` + connCols + `),
	notified AS (` + notifyChangedSQL + `$4) FROM changed)
		SELECT changed.* FROM changed, (SELECT count(*) FROM notified) AS n`
)

// row is one connections row as read.
type row struct {
	Connection
	ciphertext []byte
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func scanRow(r pgx.Row) (*row, error) {
	var (
		x                    row
		status               string
		version              int32
		expires, refreshedAt *time.Time
		checkedAt            *time.Time
	)
	err := r.Scan(&x.ID, &x.User.Issuer, &x.User.Subject, &x.Provider, &status, &version, &x.ciphertext,
		&x.Scopes, &expires, &x.CreatedAt, &x.UpdatedAt, &refreshedAt, &checkedAt, &x.LastError, &x.AccountHash,
		&x.DisplayName, &x.Label, &x.Org, &x.AppID)
	if err != nil {
		return nil, err
	}
	x.Status = Status(status)
	x.KeyVersion = uint32(version)
	if expires != nil {
		x.Expiry = *expires
	}
	if refreshedAt != nil {
		x.RefreshedAt = *refreshedAt
	}
	if checkedAt != nil {
		x.HealthCheckedAt = *checkedAt
	}
	return &x, nil
}

// load reads connection id of user at provider, locking it when forUpdate.
// An empty id is the user's only connection there (ErrAccountRequired when
// there are several).
func (s *Store) load(ctx context.Context, q querier, user identity.User, provider, id string, forUpdate bool) (*row, error) {
	if id == "" {
		var err error
		if id, err = s.onlyID(ctx, q, user, provider); err != nil {
			return nil, err
		}
	}
	query := selectConnection
	if forUpdate {
		query = selectConnectionForUpdate
	}
	r, err := scanRow(q.QueryRow(ctx, query, user.Issuer, user.Subject, provider, id, s.org))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w to %s", ErrNotConnected, provider)
	}
	if err != nil {
		return nil, fmt.Errorf("vault: read connection: %w", err)
	}
	return r, nil
}

// onlyID is the id of the user's one connection at provider:
// ErrNotConnected when there is none, ErrAccountRequired when there are
// several.
func (s *Store) onlyID(ctx context.Context, q querier, user identity.User, provider string) (string, error) {
	ids, err := s.ids(ctx, q, user, provider, 2)
	switch {
	case err != nil:
		return "", err
	case len(ids) == 0:
		return "", fmt.Errorf("%w to %s", ErrNotConnected, provider)
	case len(ids) > 1:
		return "", fmt.Errorf("%w: %s", ErrAccountRequired, provider)
	}
	return ids[0], nil
}

// ids lists (at most limit of) the user's connection ids at provider.
func (s *Store) ids(ctx context.Context, q querier, user identity.User, provider string, limit int) ([]string, error) {
	rows, err := q.Query(ctx, selectIDs, user.Issuer, user.Subject, provider, limit, s.org)
	if err != nil {
		return nil, fmt.Errorf("vault: read connections: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("vault: read connections: %w", err)
	}
	return ids, nil
}

// credentialPurpose starts the associated data of every connection credential.
const credentialPurpose = "connectd/vault/connection-credential/v1"

// credentialKeys is the Keyring.Purpose label of the keys that seal
// credentials (DESIGN invariant 13). Changing it makes every stored credential
// unreadable: a new label needs a new format and a rewrap, not an edit.
const credentialKeys = "connectd/vault/credential/v1"

// binding is the associated data of a connection's credential.
func binding(id string, user identity.User, provider string) []byte {
	return keyring.Binding(credentialPurpose, id, user.Issuer, user.Subject, provider)
}

// open decrypts the credential of r.
func (s *Store) open(r *row) (*Credential, error) {
	return s.openCredential(r.ID, r.User, r.Provider, r.ciphertext)
}

// openCredential decrypts the credential sealed in ct for the connection
// (id, user, provider). The associated data and the plaintext are built in
// pooled buffers, the plaintext zeroed before it goes back: opening
// allocates only the credential itself.
func (s *Store) openCredential(id string, user identity.User, provider string, ct []byte) (*Credential, error) {
	b := openBuffers.Get().(*openBuffer)
	b.ad = keyring.AppendAD(b.ad[:0], ct, credentialPurpose, id, user.Issuer, user.Subject, provider)
	pt, err := s.keys.OpenAppend(b.pt[:0], ct, b.ad)
	if err != nil {
		openBuffers.Put(b)
		return nil, fmt.Errorf("connection %s: %w", id, err)
	}
	c, err := decodeCredential(pt)
	clear(pt)
	if cap(pt) <= maxPooledPlaintext {
		b.pt = pt[:0]
		openBuffers.Put(b)
	}
	if err != nil {
		return nil, fmt.Errorf("connection %s: %w: %v", id, keyring.ErrDecrypt, err)
	}
	return c, nil
}

// openBuffer holds an opening's associated data and plaintext; the
// plaintext is always zeroed while the buffer is idle.
type openBuffer struct{ ad, pt []byte }

var openBuffers = sync.Pool{New: func() any { return &openBuffer{ad: make([]byte, 0, 256), pt: make([]byte, 0, 2048)} }}

// maxPooledPlaintext: larger buffers (huge credentials) are left to the GC.
const maxPooledPlaintext = 64 << 10

// seal encrypts c for the row (id, user, provider) under the primary key.
func (s *Store) seal(id string, user identity.User, provider string, c *Credential) ([]byte, error) {
	pt := c.encode()
	defer clear(pt)
	return s.keys.Seal(pt, binding(id, user, provider))
}

func validate(user identity.User, name string) error {
	switch {
	case user.Issuer == "" || len(user.Issuer) > 2048:
		return fmt.Errorf("%w: issuer must be 1-2048 bytes", ErrInvalid)
	case user.Subject == "" || len(user.Subject) > 2048:
		return fmt.Errorf("%w: subject must be 1-2048 bytes", ErrInvalid)
	case !names.ValidProvider(name): // the catalog's own rule
		return fmt.Errorf("%w: provider name must be 1-64 of a-z 0-9 _ . - starting with a letter or digit", ErrInvalid)
	}
	return nil
}

// MaxLabel is the longest label (in characters) a user may give a
// connection.
const MaxLabel = 40

// ValidLabel is the rule for a connection's label: at most MaxLabel
// characters of UTF-8 text with no control character (not even a tab or a
// newline, which would forge lines where it is printed) and no bidi
// override. "" (no label) is valid.
func ValidLabel(label string) bool {
	if !utf8.ValidString(label) || utf8.RuneCountInString(label) > MaxLabel {
		return false
	}
	for _, r := range label {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029' {
			return false
		}
	}
	return true
}

const setLabel = `WITH changed AS (UPDATE connections SET label = $5
		WHERE issuer = $1 AND subject = $2 AND provider = $3 AND id = $4 AND org_id = $7 RETURNING 1)
		` + notifyChangedSQL + `$6) FROM changed`

// SetLabel sets the user's own name for their connection id at provider
// ("" removes it); ErrNotConnected when there is no such connection. The
// caller checks the text (MaxLabel).
func (s *Store) SetLabel(ctx context.Context, user identity.User, provider, id, label string) error {
	if err := validate(user, provider); err != nil {
		return err
	}
	tag, err := s.db().Exec(ctx, setLabel, user.Issuer, user.Subject, provider, id, label,
		connKey(s.org, user, provider, id).Payload(), s.org)
	s.forget(user, provider, id)
	if err != nil {
		return fmt.Errorf("vault: set label: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: connection %s", ErrNotConnected, id)
	}
	return nil
}

// ValidID reports whether id has the shape of a connection id, to be
// checked before it touches a query.
func ValidID(id string) bool {
	if len(id) != len("cn_")+26 || !strings.HasPrefix(id, "cn_") {
		return false
	}
	for _, c := range id[3:] {
		if !('a' <= c && c <= 'z' || '2' <= c && c <= '7') {
			return false
		}
	}
	return true
}

func newID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("vault: connection id: %w", err)
	}
	return "cn_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)), nil
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// accountsLock is the advisory lock key of a user's connections at a
// provider in org. The default organization's is the key from before
// organizations, so replicas still running that code serialize with these.
func accountsLock(org string, user identity.User, provider string) int64 {
	d := cache.Key("connectd/vault/accounts", user.Issuer, user.Subject, provider)
	if org != DefaultOrg {
		d = cache.Key("connectd/vault/accounts", user.Issuer, user.Subject, provider, org)
	}
	return int64(binary.BigEndian.Uint64(d[:8]))
}

// unnamedHash is the account hash of a credential from before accounts
// were named ("" as its account id): like a row without a hash, it is the
// user's one account at its provider from then.
var unnamedHash = AccountHash("")

// errPutConflict: another Put inserted the same connection concurrently.
var errPutConflict = errors.New("vault: concurrent insert")

// Put stores cred as the user's connection to provider for the provider
// account cred names, creating it or replacing that connection's stored
// credential (the connection keeps its id), and marks it active. A user has
// one connection per provider account (AccountHash of cred.AccountID), up to
// Config.MaxAccounts at a provider. Granted scopes are merged: the stored set
// becomes the union of the scopes already granted and cred.Scopes, because
// the connect flow asks the provider for the union of granted and requested
// scopes (incremental authorization) and not every provider repeats earlier
// grants in its response. A stored credential that no longer opens (its key
// is gone) is replaced without merging.
func (s *Store) Put(ctx context.Context, user identity.User, provider string, cred Credential) (*Connection, error) {
	return s.PutWith(ctx, user, provider, Target{}, cred, nil)
}

// Change is what a Put did to the user's connection.
type Change struct {
	// Created: there was no connection for the account; otherwise one was
	// updated.
	Created bool
	// Scopes are the connection's scopes now; OldScopes those before an
	// update.
	Scopes, OldScopes []string
	// AccountID is the provider account the stored credential names now;
	// AccountChanged reports an update that put another account's
	// credential in the connection (a target replaced, or a credential that
	// did not open).
	AccountID      string
	AccountChanged bool
}

// PutHook runs inside PutWith's transaction after the credential is stored:
// what it writes (the flow's outcome, approvals, webhook events) commits or
// rolls back with it, and an error it returns stores nothing.
type PutHook func(ctx context.Context, tx pgx.Tx, c Connection, ch Change) error

// Target is what a Put is about, as the request that led to it said.
type Target struct {
	// ID is the connection the request was for (reauthorize or step up
	// that one); "" when it named none. An id of another user or provider
	// is ignored.
	ID string
	// New: the request was for another account.
	New bool
	// Unnamed: cred's account is not one the provider named (connectd made
	// it up: a typed API key, a round trip the provider did not say whose
	// it was). It then replaces the connection ID as another account
	// instead of adding one.
	Unnamed bool
	// AppID is the provider app of the handle's organization the
	// credential was obtained with ("": the deployment's shared app). The
	// connection records it, and refreshes, narrows and revokes through it
	// alone; a reconnect of the same account through another app of the
	// organization replaces the credential and the app.
	AppID string
}

// PutWith is Put with hook (if not nil) run inside the storing transaction,
// for the request t. A credential goes to the connection of its provider
// account; failing that, to a connection from before accounts were named
// only when the request was about that one (t.ID, or the user's only
// connection there and the request named none) — as another account, since
// nobody can say it is the same; failing that, an Unnamed credential
// replaces t.ID; else it is a new connection.
func (s *Store) PutWith(ctx context.Context, user identity.User, provider string, t Target, cred Credential, hook PutHook) (*Connection, error) {
	if err := validate(user, provider); err != nil {
		return nil, err
	}
	if cred.AccessToken == "" {
		return nil, fmt.Errorf("%w: credential has no access token", ErrInvalid)
	}
	for attempt := 0; ; attempt++ {
		var conn *Connection
		err := s.begin(ctx, func(tx pgx.Tx) error {
			var ch Change
			var err error
			if conn, ch, err = s.putIn(ctx, tx, user, provider, t, cred); err != nil {
				return err
			}
			if hook != nil {
				return hook(ctx, tx, *conn, ch)
			}
			return nil
		})
		if conn != nil {
			s.forget(user, provider, conn.ID)
		}
		switch {
		case errors.Is(err, errPutConflict) && attempt < 3:
			continue
		case err != nil:
			return nil, err
		}
		return conn, nil
	}
}

// putIn stores cred within tx: an update of the user's connection for
// cred's account (or of target, or of the row from before accounts were
// told apart), locked, merging what the provider did not repeat; else a new
// connection.
func (s *Store) putIn(ctx context.Context, tx pgx.Tx, user identity.User, provider string, t Target, cred Credential) (*Connection, Change, error) {
	if _, err := tx.Exec(ctx, lockAccounts, accountsLock(s.org, user, provider)); err != nil {
		return nil, Change{}, fmt.Errorf("vault: lock accounts: %w", err)
	}
	rows, err := tx.Query(ctx, selectAtForUpdate, user.Issuer, user.Subject, provider, s.org)
	if err != nil {
		return nil, Change{}, fmt.Errorf("vault: read connections: %w", err)
	}
	existing, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*row, error) { return scanRow(r) })
	if err != nil {
		return nil, Change{}, fmt.Errorf("vault: read connections: %w", err)
	}
	hash := AccountHash(cred.AccountID)
	var r *row
	var old *Credential
	unsure := false // r's account cannot be told from cred's: nothing of it carries over
	for _, x := range existing {
		if x.AccountHash != nil && subtle.ConstantTimeCompare(x.AccountHash, hash) == 1 {
			r = x
		}
	}
	if r == nil {
		// A row from before account hashes were kept, or from before
		// accounts were named: its credential says whose it is, or — when
		// it names nobody — it is taken only by the request about it.
		about := func(x *row) bool {
			return !t.New && (t.ID == x.ID || t.ID == "" && len(existing) == 1)
		}
		for _, x := range existing {
			if x.AccountHash != nil && subtle.ConstantTimeCompare(x.AccountHash, unnamedHash) != 1 {
				continue
			}
			c, err := s.open(x)
			switch {
			case err != nil:
			case c.AccountID != "" && c.AccountID == cred.AccountID:
				r, old = x, c
			case c.AccountID == "" && about(x):
				r, old, unsure = x, c, true
			}
		}
	}
	if r == nil && t.Unnamed && t.ID != "" && !t.New {
		for _, x := range existing {
			if x.ID == t.ID {
				r = x
			}
		}
	}
	if r == nil {
		if len(existing) >= s.maxAccounts {
			return nil, Change{}, fmt.Errorf("%w: %s: %d connections", ErrTooManyAccounts, provider, len(existing))
		}
		conn, err := s.insert(ctx, tx, user, provider, t.AppID, cred)
		if err != nil {
			return nil, Change{}, err // errPutConflict: PutWith starts over
		}
		return conn, Change{Created: true, Scopes: conn.Scopes, AccountID: cred.AccountID}, nil
	}
	now := s.now().UTC()
	ch := Change{OldScopes: r.Scopes}
	if old == nil {
		old, err = s.open(r)
	}
	switch {
	case err != nil:
		s.logger.WarnContext(ctx, "vault: replacing a stored credential that does not open",
			slog.String("connection_id", r.ID), slog.String("provider", provider), slog.Any("error", err))
		cred.Scopes = scope.Union(nil, cred.Scopes)
		ch.AccountChanged = true
	case unsure || old.AccountID != cred.AccountID: // the target, now another account (or nobody can say)
		cred.Scopes = scope.Union(nil, cred.Scopes)
		ch.AccountChanged = true
	case r.AppID != t.AppID:
		// Same account through another app: what the old app was granted
		// is not the new app's (its refresh token cannot be used with it).
		cred.Scopes = scope.Union(nil, cred.Scopes)
		if cred.AccountLabel == "" {
			cred.AccountLabel = old.AccountLabel
		}
	default:
		// Same account: keep what we knew.
		cred.Scopes = scope.Union(old.Scopes, cred.Scopes)
		if cred.AccountLabel == "" {
			cred.AccountLabel = old.AccountLabel
		}
	}
	// The user's label named the account that was there; another account
	// keeps it only when the user asked for this very connection.
	dropLabel := ch.AccountChanged && t.ID != r.ID
	if dropLabel {
		r.Label = ""
	}
	ct, err := s.seal(r.ID, user, provider, &cred)
	if err != nil {
		return nil, Change{}, err
	}
	if _, err := tx.Exec(ctx, updateCredential, r.ID, int32(s.keys.Primary()), ct, nonNil(cred.Scopes),
		nullTime(cred.Expiry), now, connKey(s.org, user, provider, r.ID).Payload(), hash, cred.DisplayName(),
		dropLabel, s.org, t.AppID); err != nil {
		return nil, Change{}, fmt.Errorf("vault: update connection: %w", err)
	}
	// Tokens narrowed from the replaced grant go with it.
	if _, err := tx.Exec(ctx, deleteNarrowedOf, r.ID, s.org); err != nil {
		return nil, Change{}, fmt.Errorf("vault: drop narrowed tokens: %w", err)
	}
	conn := &r.Connection
	conn.Status, conn.KeyVersion, conn.Scopes, conn.Expiry, conn.UpdatedAt, conn.AccountHash, conn.DisplayName, conn.AppID =
		StatusActive, s.keys.Primary(), cred.Scopes, cred.Expiry, now, hash, cred.DisplayName(), t.AppID
	ch.Scopes, ch.AccountID = cred.Scopes, cred.AccountID
	return conn, ch, nil
}

// insert stores cred as a new connection with q; errPutConflict when the user
// already has one for its account (a concurrent Put).
func (s *Store) insert(ctx context.Context, q querier, user identity.User, provider, appID string, cred Credential) (*Connection, error) {
	now := s.now().UTC()
	id, err := newID()
	if err != nil {
		return nil, err
	}
	cred.Scopes = scope.Union(nil, cred.Scopes)
	ct, err := s.seal(id, user, provider, &cred)
	if err != nil {
		return nil, err
	}
	hash := AccountHash(cred.AccountID)
	tag, err := q.Exec(ctx, insertConnection, id, user.Issuer, user.Subject, provider,
		int32(s.keys.Primary()), ct, nonNil(cred.Scopes), nullTime(cred.Expiry), now, connKey(s.org, user, provider, id).Payload(),
		hash, cred.DisplayName(), s.org, appID)
	if err != nil {
		return nil, fmt.Errorf("vault: insert connection: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return nil, errPutConflict
	}
	return &Connection{ID: id, User: user, Provider: provider, Status: StatusActive, KeyVersion: s.keys.Primary(),
		Scopes: cred.Scopes, Expiry: cred.Expiry, CreatedAt: now, UpdatedAt: now, AccountHash: hash,
		DisplayName: cred.DisplayName(), Org: s.org, AppID: appID}, nil
}

// Get returns the user's connection id at provider (empty: the only one)
// and its opened credential, whatever the connection's status.
// ErrNotConnected when there is none (or id is another user's or
// provider's); ErrAccountRequired for an empty id and several connections;
// keyring.ErrDecrypt when the credential does not open.
func (s *Store) Get(ctx context.Context, user identity.User, provider, id string) (*Connection, *Credential, error) {
	if err := validate(user, provider); err != nil {
		return nil, nil, err
	}
	r, err := s.load(ctx, s.db(), user, provider, id, false)
	if err != nil {
		return nil, nil, err
	}
	c, err := s.open(r)
	if err != nil {
		return nil, nil, err
	}
	return &r.Connection, c, nil
}

// Lookup returns the user's connection id at provider (empty: the only
// one) without reading or opening its credential; errors as Get's.
func (s *Store) Lookup(ctx context.Context, user identity.User, provider, id string) (*Connection, error) {
	if err := validate(user, provider); err != nil {
		return nil, err
	}
	r, err := s.load(ctx, s.db(), user, provider, id, false)
	if err != nil {
		return nil, err
	}
	return &r.Connection, nil
}

// Exists reports whether the user has a connection to provider, without
// reading or opening its credential.
func (s *Store) Exists(ctx context.Context, user identity.User, provider string) (bool, error) {
	if err := validate(user, provider); err != nil {
		return false, err
	}
	var ok bool
	if err := s.db().QueryRow(ctx, connectionExists, user.Issuer, user.Subject, provider, s.org).Scan(&ok); err != nil {
		return false, fmt.Errorf("vault: look up connection: %w", err)
	}
	return ok, nil
}

const connectionExists = `SELECT EXISTS (SELECT 1 FROM connections
	WHERE issuer = $1 AND subject = $2 AND provider = $3 AND org_id = $4)`

// List returns the user's connections in the handle's organization, by
// provider and then the oldest first, without opening them.
func (s *Store) List(ctx context.Context, user identity.User) ([]Connection, error) {
	return s.list(ctx, s.db(), listConnections, user.Issuer, user.Subject, s.org)
}

// ListAll returns the user's connections in every organization, by
// organization (Connection.Org), provider and then the oldest first,
// without opening them: the user's own view (the account page), never a
// client's. Acting on one goes through its organization's handle
// (In(c.Org)).
func (s *Store) ListAll(ctx context.Context, user identity.User) ([]Connection, error) {
	return s.list(ctx, s.pool, listAllConnections, user.Issuer, user.Subject) // every organization's: connectd.org unset (rls.go)
}

func (s *Store) list(ctx context.Context, q querier, query string, args ...any) ([]Connection, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("vault: list connections: %w", err)
	}
	defer rows.Close()
	var out []Connection
	for rows.Next() {
		r, err := scanRow(rows)
		if err != nil {
			return nil, fmt.Errorf("vault: list connections: %w", err)
		}
		out = append(out, r.Connection)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("vault: list connections: %w", err)
	}
	return out, nil
}

// Revocation is the outcome of revoking a deleted credential at the provider.
type Revocation string

// Revocation outcomes.
const (
	Revoked             Revocation = "revoked"       // the provider accepted the revocation
	RevocationSkipped   Revocation = "skipped"       // no RevokeFunc configured, or the credential did not open
	RevocationNoSupport Revocation = "not_supported" // the provider has no revocation endpoint
	RevocationFailed    Revocation = "failed"        // the provider call failed; see Deletion.RevokeErr
)

// Deletion reports what Delete did.
type Deletion struct {
	Connection Connection
	Revocation Revocation
	RevokeErr  error // set when Revocation is "failed" or "skipped" because the credential did not open
}

// Delete removes the user's connection to provider, then revokes its
// credential at the provider. The local delete is committed first and stands
// whatever the provider says: a failed revocation is logged and reported in
// Deletion, not as Delete's error. Delete returns an error only when nothing
// was deleted (ErrNotConnected, a database failure).
func (s *Store) Delete(ctx context.Context, user identity.User, provider, id string) (*Deletion, error) {
	return s.DeleteWith(ctx, user, provider, id, nil)
}

// DeleteWith is Delete with hook (if not nil) run inside the deleting
// transaction, after the row is gone and before the commit: what the hook
// writes commits or rolls back with the deletion, and a hook error leaves
// the connection untouched and is returned.
// An empty id is the user's only connection at provider.
func (s *Store) DeleteWith(ctx context.Context, user identity.User, provider, id string, hook DeleteHook) (*Deletion, error) {
	if err := validate(user, provider); err != nil {
		return nil, err
	}
	var (
		d    Deletion
		cred *Credential
	)
	err := s.begin(ctx, func(tx pgx.Tx) error {
		if id == "" {
			var err error
			if id, err = s.onlyID(ctx, tx, user, provider); err != nil {
				return err
			}
		}
		r, err := scanRow(tx.QueryRow(ctx, deleteConnection, user.Issuer, user.Subject, provider,
			connKey(s.org, user, provider, id).Payload(), id, s.org))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w to %s", ErrNotConnected, provider)
		}
		if err != nil {
			return fmt.Errorf("vault: delete connection: %w", err)
		}
		d.Connection = r.Connection
		if cred, err = s.open(r); err != nil {
			d.Revocation, d.RevokeErr = RevocationSkipped, err
		}
		if hook != nil {
			return hook(ctx, tx, r.Connection)
		}
		return nil
	})
	s.forget(user, provider, id)
	if err != nil {
		return nil, err
	}
	attrs := []any{slog.String("connection_id", d.Connection.ID), slog.String("provider", provider)}
	switch {
	case cred == nil:
		s.logger.WarnContext(ctx, "vault: connection deleted; credential did not open, not revoked",
			append(attrs, slog.Any("error", d.RevokeErr))...)
		return &d, nil
	case s.revoke == nil:
		d.Revocation = RevocationSkipped
		s.logger.InfoContext(ctx, "vault: connection deleted; revocation not configured", attrs...)
		return &d, nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.providerTimeout)
	defer cancel()
	err = s.revoke(rctx, d.Connection.App(), cred)
	switch {
	case err == nil:
		d.Revocation = Revoked
		s.logger.InfoContext(ctx, "vault: connection deleted and revoked at the provider", attrs...)
	case errors.Is(err, ErrRevocationNotSupported):
		d.Revocation = RevocationNoSupport
		s.logger.InfoContext(ctx, "vault: connection deleted; provider has no revocation endpoint", attrs...)
	default:
		d.Revocation, d.RevokeErr = RevocationFailed, err
		s.logger.WarnContext(ctx, "vault: connection deleted; revocation at the provider failed",
			append(attrs, slog.Any("error", err))...)
	}
	return &d, nil
}
