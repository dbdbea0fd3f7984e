package org

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/provider"
)

// Errors. Each wraps a kind of package problem (so the one error table
// answers it), and carries a problem.Detail description naming what was
// refused, never a secret.
var (
	// ErrInvalid: a malformed organization id, name, brand color, logo
	// URL, client id or secret.
	ErrInvalid = fmt.Errorf("org: %w", problem.ErrInvalid)
	// ErrNotFound: no such organization.
	ErrNotFound = fmt.Errorf("org: no such organization: %w", problem.ErrNotFound)
	// ErrExists: an organization with that id exists already.
	ErrExists = fmt.Errorf("org: organization exists: %w", problem.ErrConflict)
	// ErrInUse: the organization still has MCP servers (clients) or
	// connections, which a delete would orphan: delete or move them first.
	ErrInUse = fmt.Errorf("org: organization in use: %w", problem.ErrConflict)
	// ErrDefault: the default organization cannot be deleted (every row
	// made before organizations is its, and it is the columns' default),
	// nor stop accepting the deployment's issuers.
	ErrDefault = fmt.Errorf("org: the default organization cannot be deleted: %w", problem.ErrConflict)
	// ErrUnknownProvider: the provider is not in the catalog (the
	// providers file).
	ErrUnknownProvider = fmt.Errorf("org: unknown provider: %w", problem.ErrInvalid)
	// ErrAPIKeyProvider: the provider is of the api_key kind: users type
	// their own keys, there is no OAuth app to bring.
	ErrAPIKeyProvider = fmt.Errorf("org: api_key provider needs no app: %w", problem.ErrInvalid)
	// ErrAppNotFound: the organization has no app at that provider (Get,
	// Remove), or no app has that id (ByID: the app was removed, or its
	// client id changed, so connections made through it must be made
	// again).
	ErrAppNotFound = fmt.Errorf("org: no such provider app: %w", problem.ErrNotFound)
	// ErrNoApp: the organization has no app of its own at the provider and
	// may not use the deployment's (its shared_app is "default"). The
	// description names the organization, the provider and the command
	// that fixes it; internal/web answers 409 provider_app_required.
	ErrNoApp = errors.New("org: the organization needs its own app at this provider")
	// ErrAppSecret: an app's stored secret did not open: sealed under a key
	// the keyring no longer holds, or not sealed for this row (copied from
	// another). An operator's problem, never the caller's: connectd vault
	// status tells which key is missing.
	ErrAppSecret = errors.New("org: provider app secret does not open")
)

// InvalidationChannel is the NOTIFY channel of organization and app
// changes; the payload is the organization id, or cache.Flush.
const InvalidationChannel = "connectd_orgs"

// DefaultCacheTTL is Config.CacheTTL's default: how long a resolved app is
// remembered when no notification says it changed.
const DefaultCacheTTL = 30 * time.Second

// secretPurpose is the keyring purpose app secrets are sealed under; never
// reused for anything else.
const secretPurpose = "connectd/org/app-secret/v1"

// Config configures a Store.
type Config struct {
	Pool *pgxpool.Pool
	// Keyring is the vault keyring (CONNECTD_VAULT_KEYS): app secrets are
	// sealed under its secretPurpose key. Needed to set an app and to
	// resolve one; nil: those fail.
	Keyring *keyring.Keyring
	// Catalog is the provider catalog: Set refuses providers it lacks (and
	// api_key ones), Resolve and ByID build providers from it. Nil: those
	// fail with ErrUnknownProvider.
	Catalog *provider.Catalog
	// CacheTTL is how long a resolved app is remembered (default
	// DefaultCacheTTL; negative: not at all). Entries are cached only
	// while the process's notification listener is live (CacheSubscriber).
	CacheTTL  time.Duration
	CacheSize int // default 10,000
	// DeploymentIssuers are the deployment's trusted issuers
	// (CONNECTD_ISSUERS): an organization's own issuer may share neither
	// an id nor a URL with one (AddIssuer: ErrIssuerReserved).
	DeploymentIssuers []mcpauth.Issuer
	// AllowHTTP permits http:// issuer URLs (development only), as the
	// deployment's issuers do.
	AllowHTTP bool
	Now       func() time.Time
	Logger    *slog.Logger
}

// Store is the organizations and their provider apps.
type Store struct {
	pool    *pgxpool.Pool
	keys    *keyring.Keyring // Keyring.Purpose(secretPurpose); nil without a keyring
	catalog *provider.Catalog
	now     func() time.Time
	logger  *slog.Logger
	cache   *cache.Map[string, cachedApp]

	// The organizations' own issuers (issuers.go).
	issuerKeys *keyring.Keyring // Keyring.Purpose(issuerSecretPurpose); nil without a keyring
	reserved   map[string]bool  // the deployment issuers' ids and URLs
	allowHTTP  bool
	trust      *cache.Map[string, cachedTrust]
	// secretWarnings rate-limits the log line of an issuer secret that
	// does not open.
	secretWarnings *cache.Every
}

// New returns the Store over cfg.Pool.
func New(cfg Config) *Store {
	s := &Store{pool: cfg.Pool, catalog: cfg.Catalog, now: cfg.Now, logger: cfg.Logger}
	if cfg.Keyring != nil {
		s.keys = cfg.Keyring.Purpose(secretPurpose)
		s.issuerKeys = cfg.Keyring.Purpose(issuerSecretPurpose)
	}
	s.allowHTTP, s.reserved = cfg.AllowHTTP, map[string]bool{}
	for _, is := range cfg.DeploymentIssuers {
		s.reserved[is.ID], s.reserved[is.URL] = true, true
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	ttl := cfg.CacheTTL
	if ttl == 0 {
		ttl = DefaultCacheTTL
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 10_000
	}
	s.cache = cache.New[string, cachedApp](ttl, cfg.CacheSize, s.now)
	s.trust = cache.New[string, cachedTrust](ttl, cfg.CacheSize, s.now)
	s.secretWarnings = cache.NewEvery(time.Minute)
	return s
}

// Organization is one organization. It holds no secret.
type Organization struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	BrandColor string `json:"brand_color"` // "#rrggbb", "" for none
	LogoURL    string `json:"logo_url"`    // https, "" for none
	// DeploymentIssuers says whether the organization's MCP servers accept
	// user tokens of the deployment's issuers (CONNECTD_ISSUERS) besides
	// its own (Issuers); always true for the default organization.
	DeploymentIssuers bool      `json:"deployment_issuers"`
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`
}

// Update is a change to an organization; a nil field stays as it is, ""
// removes a brand color or logo.
type Update struct {
	Name       *string
	BrandColor *string
	LogoURL    *string
	// DeploymentIssuers turns the deployment's issuers on or off for the
	// organization's MCP servers; false is refused for the default
	// organization (ErrDefault).
	DeploymentIssuers *bool
}

// MaxName is the longest organization name, in characters.
const MaxName = 100

// CheckName is the rule for an organization's name: 1–MaxName characters
// of one-line text, trimmed.
func CheckName(name string) error {
	switch {
	case name == "" || strings.TrimSpace(name) != name:
		return problem.Detail(ErrInvalid, "name must not be blank or start or end with spaces")
	case !utf8.ValidString(name) || strings.ContainsFunc(name, unicode.IsControl):
		return problem.Detail(ErrInvalid, "name must be one line of text")
	case utf8.RuneCountInString(name) > MaxName:
		return problem.Detail(ErrInvalid, "name must be at most %d characters", MaxName)
	}
	return nil
}

// CheckBrandColor is the rule for a brand color: "#rrggbb" in lower-case
// hexadecimal (as organizations.brand_color's CHECK), or "" for none.
func CheckBrandColor(c string) error {
	if c == "" {
		return nil
	}
	if len(c) != 7 || c[0] != '#' || strings.ContainsFunc(c[1:], func(r rune) bool {
		return (r < '0' || r > '9') && (r < 'a' || r > 'f')
	}) {
		return problem.Detail(ErrInvalid, "brand color must be #rrggbb in lower-case hexadecimal, such as #1f6feb")
	}
	return nil
}

// CheckLogoURL is the rule for an organization's logo: egress.CheckLogoURL
// (absolute https, a host a Content-Security-Policy can name, no user info
// or fragment: never javascript: or data:), or "" for none. The URL is
// never repeated in the message.
func CheckLogoURL(u string) error {
	if u == "" {
		return nil
	}
	if err := egress.CheckLogoURL(u); err != nil {
		return problem.Detail(ErrInvalid, "logo URL %v", err)
	}
	return nil
}

// checkID refuses an id that is not an organization id.
func checkID(id string) error {
	if !names.ValidOrg(id) {
		return problem.Detail(ErrInvalid, "organization id must be 1-%d of a-z 0-9 -, not starting or ending with -",
			names.MaxOrgBytes)
	}
	return nil
}

const (
	orgColumns   = `id, name, brand_color, logo_url, deployment_issuers, created_at, updated_at`
	insertOrgSQL = `INSERT INTO organizations (id, name, created_at, updated_at) VALUES ($1, $2, $3, $3)
		RETURNING ` + orgColumns
	getOrgSQL    = `SELECT ` + orgColumns + ` FROM organizations WHERE id = $1`
	lockOrgSQL   = getOrgSQL + ` FOR UPDATE`
	listOrgsSQL  = `SELECT ` + orgColumns + ` FROM organizations ORDER BY id`
	updateOrgSQL = `UPDATE organizations SET name = $2, brand_color = $3, logo_url = $4, deployment_issuers = $5, updated_at = $6 WHERE id = $1
		RETURNING ` + orgColumns
	deleteOrgSQL = `DELETE FROM organizations WHERE id = $1`
	notifySQL    = `SELECT pg_notify('` + InvalidationChannel + `', $1)`
)

func scanOrg(row pgx.Row) (Organization, error) {
	var o Organization
	err := row.Scan(&o.ID, &o.Name, &o.BrandColor, &o.LogoURL, &o.DeploymentIssuers, &o.CreatedAt, &o.UpdatedAt)
	return o, err
}

// Create makes organization id named name, audited (org.created, by actor).
// ErrInvalid for a malformed id or name, ErrExists when the id is taken.
func (s *Store) Create(ctx context.Context, id, name, actor string) (Organization, error) {
	if err := checkID(id); err != nil {
		return Organization{}, err
	}
	if err := CheckName(name); err != nil {
		return Organization{}, err
	}
	var o Organization
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if o, err = scanOrg(tx.QueryRow(ctx, insertOrgSQL, id, name, s.now().UTC())); err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Event{Kind: "org.created", Actor: actor, Target: id,
			Detail: map[string]any{"org": id, "name": name}})
	})
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "23505":
		return Organization{}, problem.Detail(ErrExists, "organization %s exists already", id)
	case err != nil:
		return Organization{}, fmt.Errorf("org: create %s: %w", id, err)
	}
	return o, nil
}

// Get returns organization id; ErrNotFound when there is none.
func (s *Store) Get(ctx context.Context, id string) (Organization, error) {
	if err := checkID(id); err != nil {
		return Organization{}, err
	}
	o, err := scanOrg(s.pool.QueryRow(ctx, getOrgSQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Organization{}, problem.Detail(ErrNotFound, "no organization %s", id)
	}
	if err != nil {
		return Organization{}, fmt.Errorf("org: get %s: %w", id, err)
	}
	return o, nil
}

// List returns every organization, by id.
func (s *Store) List(ctx context.Context) ([]Organization, error) {
	rows, err := s.pool.Query(ctx, listOrgsSQL)
	if err != nil {
		return nil, fmt.Errorf("org: list: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Organization, error) { return scanOrg(r) })
	if err != nil {
		return nil, fmt.Errorf("org: list: %w", err)
	}
	return out, nil
}

// Update changes an organization's name, brand color or logo URL, each
// checked (CheckName, CheckBrandColor, CheckLogoURL) before anything is
// written, audited (org.updated, by actor, naming what changed).
func (s *Store) Update(ctx context.Context, id string, u Update, actor string) (Organization, error) {
	if err := checkID(id); err != nil {
		return Organization{}, err
	}
	if u.Name != nil {
		if err := CheckName(*u.Name); err != nil {
			return Organization{}, err
		}
	}
	if u.BrandColor != nil {
		if err := CheckBrandColor(*u.BrandColor); err != nil {
			return Organization{}, err
		}
	}
	if u.LogoURL != nil {
		if err := CheckLogoURL(*u.LogoURL); err != nil {
			return Organization{}, err
		}
	}
	if u.DeploymentIssuers != nil && !*u.DeploymentIssuers && id == names.DefaultOrg {
		return Organization{}, problem.Detail(ErrDefault, "the default organization always accepts the deployment's issuers")
	}
	var out Organization
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		cur, err := scanOrg(tx.QueryRow(ctx, lockOrgSQL, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return problem.Detail(ErrNotFound, "no organization %s", id)
		}
		if err != nil {
			return err
		}
		next, changed := cur, map[string]any{}
		for _, f := range []struct {
			field string
			to    *string
			cur   *string
		}{{"name", u.Name, &next.Name}, {"brand_color", u.BrandColor, &next.BrandColor}, {"logo_url", u.LogoURL, &next.LogoURL}} {
			if f.to != nil && *f.to != *f.cur {
				changed[f.field] = map[string]any{"from": *f.cur, "to": *f.to}
				*f.cur = *f.to
			}
		}
		if u.DeploymentIssuers != nil && *u.DeploymentIssuers != next.DeploymentIssuers {
			changed["deployment_issuers"] = map[string]any{"from": next.DeploymentIssuers, "to": *u.DeploymentIssuers}
			next.DeploymentIssuers = *u.DeploymentIssuers
		}
		out = cur
		if len(changed) == 0 {
			return nil
		}
		if out, err = scanOrg(tx.QueryRow(ctx, updateOrgSQL, id, next.Name, next.BrandColor, next.LogoURL, next.DeploymentIssuers, s.now().UTC())); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, notifySQL, id); err != nil {
			return err
		}
		changed["org"] = id
		return audit.Write(ctx, tx, audit.Event{Kind: "org.updated", Actor: actor, Target: id, Detail: changed})
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return Organization{}, err
		}
		return Organization{}, fmt.Errorf("org: update %s: %w", id, err)
	}
	s.forget(id)
	return out, nil
}

// Delete removes an organization with its provider apps and admin keys
// (the schema's ON DELETE CASCADE), audited (org.deleted, by actor). It is
// refused with ErrInUse while any MCP server (client) or connection is the
// organization's — the foreign keys of clients and connections say so, so
// no writer can get around it — and with ErrDefault for the default
// organization. Its audit trail stays.
func (s *Store) Delete(ctx context.Context, id, actor string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if id == names.DefaultOrg {
		return problem.Detail(ErrDefault, "the default organization cannot be deleted")
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, deleteOrgSQL, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return problem.Detail(ErrNotFound, "no organization %s", id)
		}
		if _, err := tx.Exec(ctx, notifySQL, id); err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Event{Kind: "org.deleted", Actor: actor, Target: id,
			Detail: map[string]any{"org": id}})
	})
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "23503":
		return problem.Detail(ErrInUse, "organization %s still has MCP servers (clients) or connections; "+
			"delete them first (connectd clients delete)", id)
	case errors.Is(err, ErrNotFound):
		return err
	case err != nil:
		return fmt.Errorf("org: delete %s: %w", id, err)
	}
	s.forget(id)
	return nil
}
