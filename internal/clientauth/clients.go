package clientauth

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/jose"
	"github.com/connectd/connectd/internal/names"
)

// KeyPrefix starts every client key, so a leaked key is recognisable (secret
// scanners) and never mistaken for a user token.
const KeyPrefix = "cks_"

// keyBytes is the key's entropy: 256 bits.
const keyBytes = 32

// lastUsedEvery is how often last_used_at is written per client at most.
const lastUsedEvery = time.Minute

// Client is a registered MCP server.
type Client struct {
	ID        string
	Name      string
	Resources []string // RFC 8707 resource URIs its users' tokens must be issued for
	Providers []string // third-party providers it may request
	Disabled  bool
	// ProxyOnly: the client never receives a credential; it calls
	// providers through connectd's proxy (token reads answer
	// token_release_disabled).
	ProxyOnly bool
	// ProxyRules restrict its proxied calls, by provider (none: no rule).
	ProxyRules map[string]ProxyRules
	// LogoURL and Homepage are what the end-user pages show of it besides
	// its name (SetDisplay): an https image, its homepage; "" for none.
	LogoURL   string
	Homepage  string
	CreatedAt time.Time
	// LastUsedAt is the last authenticated request, to the minute; zero if never.
	LastUsedAt time.Time
	// JWKSURL or JWKS (a public JWK Set) are the keys its private_key_jwt
	// client assertions are signed with (assertion.go); neither: none.
	JWKSURL string
	JWKS    []byte
	// DPoPRequired: every /v1 call carries a DPoP proof (RFC 9449) signed
	// by one of those keys (dpop.go).
	DPoPRequired bool
	// Org is the organization the MCP server belongs to (clients.org_id,
	// names.DefaultOrg for every client registered before organizations):
	// loaded and cached with the client, so resolving the organization of a
	// request costs no query of its own.
	Org string
}

// ClientsConfig configures a Clients store.
type ClientsConfig struct {
	Pool *pgxpool.Pool
	// AllowHTTP accepts http:// resource URIs (dev mode only).
	AllowHTTP bool
	Now       func() time.Time
	Logger    *slog.Logger
	// CacheTTL is how long an authenticated client key is remembered (by
	// its hash) before the database is asked again; 0 disables the cache.
	// Disabling a client or rotating its keys through any Clients reaches
	// every replica's cache sooner, by notification (see clientcache.go).
	CacheTTL time.Duration
	// CacheSize caps the remembered keys (default 10,000 when CacheTTL is set).
	CacheSize int
	// HTTPClient fetches the JWKS URLs clients register for private_key_jwt
	// (the egress client: its guard refuses private addresses at every dial,
	// and registration refuses what it can tell without resolving). Nil: a
	// plain client, bounded.
	HTTPClient *http.Client
	// Skew is the clock skew tolerated on client assertions' exp and iat
	// (default 30s).
	Skew time.Duration
}

// Clients is the registry of MCP-server clients and their keys (tables clients
// and client_keys). Keys are stored only as SHA-256 hashes.
type Clients struct {
	pool      *pgxpool.Pool
	allowHTTP bool
	now       func() time.Time
	logger    *slog.Logger

	touched *cache.Every // per client: when this process last wrote last_used_at

	cache *cache.Map[[32]byte, cachedKey] // by key hash; nil: disabled

	watchMu  sync.Mutex
	watchers []func(id string) // OnChange's, told after the cache forgot

	httpClient *http.Client // fetches registered JWKS URLs (bounded)
	rawClient  *http.Client // as configured: registration asks its guard
	skew       time.Duration
	remote     *jose.Cache // the registered JWKS URLs' keys (jwks.go)
}

// NewClients returns the client registry over cfg.Pool.
func NewClients(cfg ClientsConfig) *Clients {
	c := &Clients{pool: cfg.Pool, allowHTTP: cfg.AllowHTTP, now: cfg.Now, logger: cfg.Logger,
		touched: cache.NewEvery(lastUsedEvery)}
	if c.now == nil {
		c.now = time.Now
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 10_000
	}
	c.cache = cache.New[[32]byte, cachedKey](cfg.CacheTTL, cfg.CacheSize, c.now)
	c.rawClient = cfg.HTTPClient
	c.httpClient = egress.Bound(cfg.HTTPClient, egress.Limits{Timeout: 10 * time.Second, MaxResponseBytes: maxJWKSBytes})
	c.skew = cmp.Or(cfg.Skew, 30*time.Second)
	c.remote = jose.NewCache(jose.CacheConfig{Client: c.httpClient, Lifetime: remoteKeysLifetime,
		UnknownKeyInterval: unknownKeyInterval, Skew: c.skew, Timeout: 10 * time.Second, MaxSets: maxRemoteSets,
		Now: c.now, Logger: c.logger, What: "client"})
	return c
}

const (
	insertClientSQL = `INSERT INTO clients (id, name, resources, providers, created_at, org_id) VALUES ($1, $2, $3, $4, $5, $6)`
	insertKeySQL    = `INSERT INTO client_keys (key_hash, client_id, created_at) VALUES ($1, $2, $3)`
	clientColumns   = `c.id, c.name, c.resources, c.providers, c.disabled, c.created_at, c.last_used_at, c.proxy_only, ` + proxyRulesColumn + `, c.logo_url, c.homepage, c.jwks_url, c.jwks, c.dpop_required, c.org_id`
	listClientsSQL  = `SELECT ` + clientColumns + ` FROM clients c ORDER BY c.created_at, c.id`
	listInOrgSQL    = `SELECT ` + clientColumns + ` FROM clients c WHERE c.org_id = $1 ORDER BY c.created_at, c.id`
	getClientSQL    = `SELECT ` + clientColumns + ` FROM clients c WHERE c.id = $1`
	// Every replica's key cache learns of the change on commit.
	setDisabledSQL = `WITH changed AS (UPDATE clients SET disabled = $2 WHERE id = $1 RETURNING id)
		SELECT pg_notify('` + InvalidationChannel + `', id) FROM changed`
	setDisplaySQL = `WITH changed AS (UPDATE clients SET logo_url = $2, homepage = $3 WHERE id = $1 RETURNING id)
		SELECT pg_notify('` + InvalidationChannel + `', id) FROM changed`
	setProxyOnlySQL = `WITH changed AS (UPDATE clients SET proxy_only = $2 WHERE id = $1 AND ($2 OR NOT ` + asksSQL + `) RETURNING id)
		SELECT pg_notify('` + InvalidationChannel + `', id) FROM changed`
	// A rotation shortens every key still open-ended (or expiring later than
	// the overlap allows) to the overlap, then adds the new key.
	expireKeysSQL = `UPDATE client_keys SET expires_at = $2
		WHERE client_id = $1 AND (expires_at IS NULL OR expires_at > $2)`
	authenticateSQL = `SELECT k.key_hash, k.expires_at, ` + clientColumns + `
		FROM client_keys k JOIN clients c ON c.id = k.client_id
		WHERE k.key_hash = $1 AND (k.expires_at IS NULL OR k.expires_at > $2)`
	// The condition keeps replicas from writing more than once a minute too.
	touchClientSQL = `UPDATE clients SET last_used_at = $2
		WHERE id = $1 AND (last_used_at IS NULL OR last_used_at <= $3)`
)

// ValidateResource checks a resource URI: absolute https (http when allowHTTP),
// a host, no user info, no fragment.
func ValidateResource(raw string, allowHTTP bool) error {
	if err := egress.CheckURL(raw, allowHTTP); err != nil {
		return fmt.Errorf("%w: resource %q %w", ErrInvalidClient, raw, err)
	}
	return nil
}

// ErrResourceTaken means a resource URI is already registered to another
// client (disabled ones included: they may be enabled again). Resource URIs
// are unique across clients (DESIGN invariant 14) because a user token is
// accepted for the client whose resources name its aud: a second client with
// the same resource would accept the first one's tokens. URIs that differ only
// by trailing slashes count as the same. The error text names the resource and
// the client holding it. Enforced by the schema (client_resources, migration
// 00007), so no writer can get around it.
var ErrResourceTaken = errors.New("clientauth: resource URI already registered")

// resourceKey is the form in which resources must be unique; the same rule as
// client_resource_key in migrations/00007_unique_resources.sql.
func resourceKey(r string) string { return strings.TrimRight(r, "/") }

// Create registers a client of the default organization and returns it
// with its first key: CreateIn(ctx, names.DefaultOrg, …).
func (c *Clients) Create(ctx context.Context, name string, resources, providers []string) (Client, string, error) {
	return c.CreateIn(ctx, names.DefaultOrg, name, resources, providers)
}

// CreateIn registers a client of organization org and returns it with its
// first key. The key is returned only here; connectd keeps only its hash. A
// resource another client holds is refused with ErrResourceTaken (resource
// URIs are unique across organizations too: a user token names its
// audience, not an organization); an organization id that is malformed or
// names no organization with ErrInvalidClient.
func (c *Clients) CreateIn(ctx context.Context, org, name string, resources, providers []string) (Client, string, error) {
	if !names.ValidOrg(org) {
		return Client{}, "", fmt.Errorf("%w: organization id must be 1-%d of a-z 0-9 -, not starting or ending with -",
			ErrInvalidClient, names.MaxOrgBytes)
	}
	name = strings.TrimSpace(name)
	if providers == nil {
		providers = []string{}
	}
	if err := c.checkRegistration(name, resources, providers); err != nil {
		return Client{}, "", err
	}
	cl := Client{ID: newClientID(), Name: name, Resources: resources, Providers: providers,
		CreatedAt: c.now().UTC().Truncate(time.Microsecond), Org: org}
	key, hash := newKey()
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, insertClientSQL, cl.ID, cl.Name, cl.Resources, cl.Providers, cl.CreatedAt, cl.Org); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, insertKeySQL, hash[:], cl.ID, cl.CreatedAt)
		return err
	})
	// 23505 unique_violation, raised by the trigger that indexes resources.
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "client_resources_pkey" {
		return Client{}, "", c.resourceTaken(ctx, resources)
	}
	if errors.As(err, &pgErr) && pgErr.Code == "23503" && pgErr.ConstraintName == "clients_org_id_fkey" {
		return Client{}, "", fmt.Errorf("%w: no organization %s (connectd orgs list)", ErrInvalidClient, org)
	}
	if err != nil {
		return Client{}, "", fmt.Errorf("clientauth: create client: %w", err)
	}
	return cl, key, nil
}

// takenResourceSQL finds the first of the given resources that a client holds.
const takenResourceSQL = `SELECT q.r, cr.resource, cr.client_id
	FROM unnest($1::text[]) WITH ORDINALITY AS q (r, n)
	JOIN client_resources cr ON cr.resource_key = client_resource_key(q.r)
	ORDER BY q.n LIMIT 1`

// resourceTaken builds the ErrResourceTaken for a refused registration of
// resources, naming the resource and its holder.
func (c *Clients) resourceTaken(ctx context.Context, resources []string) error {
	var want, held, owner string
	err := c.pool.QueryRow(ctx, takenResourceSQL, resources).Scan(&want, &held, &owner)
	switch {
	case err != nil: // the holder went away meanwhile, or the look-up failed
		return fmt.Errorf("%w: one of %q belongs to another client", ErrResourceTaken, resources)
	case want != held:
		return fmt.Errorf("%w: resource %q is registered to client %s as %q", ErrResourceTaken, want, owner, held)
	default:
		return fmt.Errorf("%w: resource %q is registered to client %s", ErrResourceTaken, want, owner)
	}
}

// List returns every client, oldest first.
func (c *Clients) List(ctx context.Context) ([]Client, error) { return c.list(ctx, listClientsSQL) }

// ListIn returns organization org's clients, oldest first.
func (c *Clients) ListIn(ctx context.Context, org string) ([]Client, error) {
	return c.list(ctx, listInOrgSQL, org)
}

func (c *Clients) list(ctx context.Context, query string, args ...any) ([]Client, error) {
	rows, err := c.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("clientauth: list clients: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Client, error) { return scanClient(row) })
	if err != nil {
		return nil, fmt.Errorf("clientauth: list clients: %w", err)
	}
	return out, nil
}

// Get returns the client with id, or ErrClientNotFound.
func (c *Clients) Get(ctx context.Context, id string) (Client, error) {
	cl, err := scanClient(c.pool.QueryRow(ctx, getClientSQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Client{}, fmt.Errorf("%w: %s", ErrClientNotFound, id)
	}
	if err != nil {
		return Client{}, fmt.Errorf("clientauth: get client: %w", err)
	}
	return cl, nil
}

// SetDisabled disables (or re-enables) a client: a disabled client's keys are
// all refused.
func (c *Clients) SetDisabled(ctx context.Context, id string, disabled bool) error {
	tag, err := c.pool.Exec(ctx, setDisabledSQL, id, disabled)
	if err != nil {
		return fmt.Errorf("clientauth: disable client: %w", err)
	}
	c.forget(id)
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %s", ErrClientNotFound, id)
	}
	return nil
}

// CheckDisplay checks what SetDisplay takes: logoURL an https image
// (egress.CheckLogoURL), homepage an https URL (http when allowHTTP); ""
// for none. The error is ErrInvalidClient, naming the field.
func CheckDisplay(logoURL, homepage string, allowHTTP bool) error {
	if logoURL != "" {
		if err := egress.CheckLogoURL(logoURL); err != nil {
			return fmt.Errorf("%w: logo URL %w", ErrInvalidClient, err)
		}
	}
	if homepage != "" {
		if err := egress.CheckURL(homepage, allowHTTP); err != nil {
			return fmt.Errorf("%w: homepage %w", ErrInvalidClient, err)
		}
		if len(homepage) > egress.MaxLogoURL {
			return fmt.Errorf("%w: homepage is too long", ErrInvalidClient)
		}
	}
	return nil
}

// SetDisplay sets what the end-user pages show of the client besides its
// name: logoURL, an https image (egress.CheckLogoURL), and homepage, an
// https URL (http in dev mode); "" removes either. A bad URL is
// ErrInvalidClient, naming the field.
func (c *Clients) SetDisplay(ctx context.Context, id, logoURL, homepage string) error {
	if err := CheckDisplay(logoURL, homepage, c.allowHTTP); err != nil {
		return err
	}
	tag, err := c.pool.Exec(ctx, setDisplaySQL, id, logoURL, homepage)
	if err != nil {
		return fmt.Errorf("clientauth: set display: %w", err)
	}
	c.forget(id)
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %s", ErrClientNotFound, id)
	}
	return nil
}

// SetProxyOnly switches the client to proxy-only (it never receives a
// credential, only calls through connectd's proxy) or back; every replica's
// key cache learns of it by notification.
func (c *Clients) SetProxyOnly(ctx context.Context, id string, proxyOnly bool) error {
	tag, err := c.pool.Exec(ctx, setProxyOnlySQL, id, proxyOnly)
	if err != nil {
		return fmt.Errorf("clientauth: set proxy-only: %w", err)
	}
	c.forget(id)
	if tag.RowsAffected() == 0 {
		if _, err := c.Get(ctx, id); err != nil {
			return err
		}
		return ErrAsksUser
	}
	return nil
}

// RotateKey adds a new key to the client and returns it. Every older key keeps
// working for overlap (zero: stops at once), so the MCP server can roll out
// the new key without downtime.
func (c *Clients) RotateKey(ctx context.Context, id string, overlap time.Duration) (string, error) {
	if overlap < 0 {
		return "", fmt.Errorf("%w: negative overlap", ErrInvalidClient)
	}
	now := c.now().UTC()
	key, hash := newKey()
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		var exists bool
		// Lock the client row so concurrent rotations serialise.
		if err := tx.QueryRow(ctx, `SELECT true FROM clients WHERE id = $1 FOR UPDATE`, id).Scan(&exists); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%w: %s", ErrClientNotFound, id)
			}
			return err
		}
		if _, err := tx.Exec(ctx, expireKeysSQL, id, now.Add(overlap)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, notifySQL, InvalidationChannel, id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, insertKeySQL, hash[:], id, now)
		return err
	})
	c.forget(id)
	if err != nil {
		return "", fmt.Errorf("clientauth: rotate key: %w", err)
	}
	return key, nil
}

// Authenticate returns the client a key belongs to. The lookup is by the key's
// SHA-256, so the database index never sees the key and timing reveals nothing
// about it; the hash is compared again in constant time. Disabled clients get
// ErrClientDisabled; unknown, malformed and expired keys ErrInvalidClientKey.
func (c *Clients) Authenticate(ctx context.Context, key string) (Client, error) {
	if !wellFormedKey(key) {
		return Client{}, ErrInvalidClientKey
	}
	want := hashKey(key)
	now := c.now().UTC()
	cl, ok := c.cached(ctx, want)
	if !ok {
		var err error
		if cl, err = c.lookup(ctx, want, now); err != nil {
			// The database unreachable: the key as last read, within the
			// stale-if-error time (never one a notification dropped, nor
			// past the key's own expiry).
			if cl, ok = c.stale(ctx, want, err); !ok {
				return Client{}, err
			}
		}
	}
	if cl.Disabled {
		return Client{}, ErrClientDisabled
	}
	c.touch(ctx, cl.ID, now)
	return cl, nil
}

// lookup reads the client of the key with hash want from the database and
// caches it. (Apart from Authenticate so that the cached path keeps its
// locals on the stack.)
func (c *Clients) lookup(ctx context.Context, want [32]byte, now time.Time) (Client, error) {
	gen := c.cache.Gen()
	var cl Client
	var got []byte
	var keyExpires, lastUsed *time.Time
	var rules []byte
	var jwksURL *string
	// A read: once more on a live connection if its own died under it (a
	// restart's, before its answer).
	err := db.Read(ctx, func(ctx context.Context) error {
		return c.pool.QueryRow(ctx, authenticateSQL, want[:], now).Scan(&got, &keyExpires, &cl.ID, &cl.Name, &cl.Resources,
			&cl.Providers, &cl.Disabled, &cl.CreatedAt, &lastUsed, &cl.ProxyOnly, &rules, &cl.LogoURL, &cl.Homepage, &jwksURL,
			&cl.JWKS, &cl.DPoPRequired, &cl.Org)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Client{}, ErrInvalidClientKey
	}
	if err != nil {
		return Client{}, fmt.Errorf("clientauth: authenticate client: %w", err)
	}
	if subtle.ConstantTimeCompare(got, want[:]) != 1 {
		return Client{}, ErrInvalidClientKey
	}
	if cl.ProxyRules, err = decodeRules(rules); err != nil {
		return Client{}, err
	}
	cl.ProxyOnly = cl.ProxyOnly || asks(cl.ProxyRules)
	if lastUsed != nil {
		cl.LastUsedAt = *lastUsed
	}
	if jwksURL != nil {
		cl.JWKSURL = *jwksURL
	}
	c.remember(want, cl, keyExpires, gen)
	return cl, nil
}

// touch records use of a client at most once a minute per process (and, by
// the SQL condition, per database): authenticating is not a write per request.
func (c *Clients) touch(ctx context.Context, id string, now time.Time) {
	if !c.touched.Due(id, now) {
		return
	}
	if _, err := c.pool.Exec(ctx, touchClientSQL, id, now, now.Add(-lastUsedEvery)); err != nil {
		c.logger.WarnContext(ctx, "record client use", slog.String("client_id", id), slog.Any("error", err))
	}
}

func scanClient(row pgx.Row) (Client, error) {
	var cl Client
	var lastUsed *time.Time
	var rules []byte
	var jwksURL *string
	if err := row.Scan(&cl.ID, &cl.Name, &cl.Resources, &cl.Providers, &cl.Disabled, &cl.CreatedAt, &lastUsed, &cl.ProxyOnly, &rules,
		&cl.LogoURL, &cl.Homepage, &jwksURL, &cl.JWKS, &cl.DPoPRequired, &cl.Org); err != nil {
		return Client{}, err
	}
	if lastUsed != nil {
		cl.LastUsedAt = *lastUsed
	}
	if jwksURL != nil {
		cl.JWKSURL = *jwksURL
	}
	var err error
	cl.ProxyRules, err = decodeRules(rules)
	cl.ProxyOnly = cl.ProxyOnly || asks(cl.ProxyRules)
	return cl, err
}

// newKey returns a fresh client key and its hash.
func newKey() (string, [32]byte) {
	var b [keyBytes]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms.
	key := KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return key, hashKey(key)
}

func hashKey(key string) [32]byte { return sha256.Sum256([]byte(key)) }

// wellFormedKey: the prefix and exactly the base64url (unpadded) encoding of
// keyBytes bytes. Checked by alphabet, which for this length is what
// decoding would accept, without decoding into a buffer on every request.
func wellFormedKey(key string) bool {
	rest, ok := strings.CutPrefix(key, KeyPrefix)
	if !ok || len(rest) != base64.RawURLEncoding.EncodedLen(keyBytes) {
		return false
	}
	for i := 0; i < len(rest); i++ {
		switch b := rest[i]; {
		case b >= 'A' && b <= 'Z', b >= 'a' && b <= 'z', b >= '0' && b <= '9', b == '-', b == '_':
		default:
			return false
		}
	}
	return true
}

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newClientID returns "cli_" and 80 random bits; ids are not secret.
func newClientID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "cli_" + strings.ToLower(idEncoding.EncodeToString(b[:]))
}
