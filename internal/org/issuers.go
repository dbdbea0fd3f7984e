package org

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/problem"
)

// An organization's own trusted issuers (issue 34): its MCP authorization
// servers. Its MCP servers (clients) accept user tokens of them — and of
// the deployment's issuers while the organization's DeploymentIssuers is
// on — and a browser may sign in at one with login on. An issuer belongs to
// one organization: its id and URL are unique across the deployment, the
// deployment's issuers' included. The Store is mcpauth's IssuerSource.

// Issuer errors, each wrapping a kind of package problem.
var (
	// ErrIssuerNotFound: the organization has no issuer of that id.
	ErrIssuerNotFound = fmt.Errorf("org: no such issuer: %w", problem.ErrNotFound)
	// ErrIssuerExists: an issuer (of any organization) has that id or URL
	// already.
	ErrIssuerExists = fmt.Errorf("org: issuer exists: %w", problem.ErrConflict)
	// ErrIssuerReserved: a deployment issuer (CONNECTD_ISSUERS) has that id
	// or URL: a token's iss must name one issuer, so one organization.
	ErrIssuerReserved = fmt.Errorf("org: issuer id or URL is the deployment's: %w", problem.ErrConflict)
	// ErrIssuerSecret: an issuer's stored login client secret did not open
	// (a key the keyring lacks, or not sealed for this row): the
	// operator's problem, logged (at most once a minute per issuer).
	// LookupIssuer then answers the issuer with login off: its tokens
	// still verify, sign-ins at it are refused as unknown.
	ErrIssuerSecret = errors.New("org: issuer client secret does not open")
)

// issuerSecretPurpose is the keyring purpose issuers' login client secrets
// are sealed under; never reused for anything else.
const issuerSecretPurpose = "connectd/org/issuer-secret/v1"

// MaxIssuerScopes bounds an issuer's login scopes.
const MaxIssuerScopes = 32

// OrgIssuer is one organization's issuer as listed: never its client
// secret (Issuer.ClientSecret is empty; HasSecret says whether one is
// stored).
type OrgIssuer struct {
	mcpauth.Issuer
	Org       string    `json:"org"`
	HasSecret bool      `json:"has_secret"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// cachedTrust is what the trust cache holds: an issuer's row as read (its
// secret still sealed), no issuer (org ""), or an organization's
// DeploymentIssuers flag.
type cachedTrust struct {
	org        string // the issuer's organization, or the flag's; "" for no issuer
	is         mcpauth.Issuer
	sealed     []byte
	deployment bool
}

func issuerAAD(id, org, url, clientID string) []byte {
	return keyring.Binding(issuerSecretPurpose, id, org, url, clientID)
}

// checkIssuer is AddIssuer's check of what it is given.
func (s *Store) checkIssuer(is mcpauth.Issuer) error {
	if err := is.Validate(s.allowHTTP); err != nil {
		return problem.Detail(ErrInvalid, "issuer: %v", err)
	}
	switch {
	case len(is.URL) > 2048 || len(is.JWKSURL) > 2048:
		return problem.Detail(ErrInvalid, "issuer: a URL is longer than 2048 bytes")
	case is.ClientID != "" && (len(is.ClientID) > MaxClientID ||
		strings.ContainsFunc(is.ClientID, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) })):
		return problem.Detail(ErrInvalid, "issuer: client id must be 1-%d characters without spaces", MaxClientID)
	case len(is.ClientSecret) > MaxSecret || strings.ContainsFunc(is.ClientSecret, unicode.IsControl):
		return problem.Detail(ErrInvalid, "issuer: client secret must be one line of at most %d bytes", MaxSecret)
	case is.ClientSecret != "" && !is.Login:
		return problem.Detail(ErrInvalid, "issuer: a client secret is for login only (turn login on, or give none)")
	case len(is.Scopes) > MaxIssuerScopes:
		return problem.Detail(ErrInvalid, "issuer: at most %d scopes", MaxIssuerScopes)
	}
	for _, sc := range is.Scopes {
		if sc == "" || len(sc) > 128 || strings.ContainsFunc(sc, func(r rune) bool { return r <= ' ' || r == '"' || r == '\\' || r > '~' }) {
			return problem.Detail(ErrInvalid, "issuer: a scope must be 1-128 printable ASCII characters without spaces, quotes or backslashes")
		}
	}
	if s.reserved[is.ID] {
		return problem.Detail(ErrIssuerReserved, "issuer id %s is a deployment issuer's (CONNECTD_ISSUERS)", is.ID)
	}
	if s.reserved[is.URL] {
		return problem.Detail(ErrIssuerReserved, "issuer URL %s is a deployment issuer's (CONNECTD_ISSUERS)", is.URL)
	}
	return nil
}

const (
	issuerColumns = `id, org_id, url, jwks_url, allow_plain_jwt, login, client_id, client_secret IS NOT NULL, scopes,
		created_at, updated_at`
	insertIssuerSQL = `INSERT INTO org_issuers (id, org_id, url, jwks_url, allow_plain_jwt, login, client_id, key_version,
		client_secret, scopes, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)
		RETURNING ` + issuerColumns
	listIssuersSQL  = `SELECT ` + issuerColumns + ` FROM org_issuers WHERE org_id = $1 ORDER BY id`
	deleteIssuerSQL = `DELETE FROM org_issuers WHERE org_id = $1 AND id = $2 RETURNING ` + issuerColumns
	// An id never contains ':', a URL always does: at most one row matches.
	lookupIssuerSQL = `SELECT id, org_id, url, jwks_url, allow_plain_jwt, login, client_id, client_secret, scopes
		FROM org_issuers WHERE id = $1 OR url = $1 LIMIT 1`
	deploymentIssuersSQL = `SELECT deployment_issuers FROM organizations WHERE id = $1`
)

func scanIssuer(row pgx.Row) (OrgIssuer, error) {
	var o OrgIssuer
	err := row.Scan(&o.ID, &o.Org, &o.URL, &o.JWKSURL, &o.AllowPlainJWT, &o.Login, &o.ClientID, &o.HasSecret,
		&o.Scopes, &o.CreatedAt, &o.UpdatedAt)
	return o, err
}

// AddIssuer gives organization org its own trusted issuer is, checked
// (mcpauth.Issuer.Validate, and the id and URL neither a deployment
// issuer's, ErrIssuerReserved, nor another issuer's, ErrIssuerExists).
// is.ClientSecret, when set, is sealed (bound to the row) and never shown
// again. Audited (org.issuer_added, by actor: never the secret); every
// replica's trust cache forgets org.
func (s *Store) AddIssuer(ctx context.Context, org string, is mcpauth.Issuer, actor string) (OrgIssuer, error) {
	if err := checkID(org); err != nil {
		return OrgIssuer{}, err
	}
	if err := s.checkIssuer(is); err != nil {
		return OrgIssuer{}, err
	}
	var version *int32
	var sealed []byte
	if is.ClientSecret != "" {
		if s.issuerKeys == nil {
			return OrgIssuer{}, errors.New("org: add issuer: no vault keyring (CONNECTD_VAULT_KEYS): client secrets are sealed with it")
		}
		var err error
		if sealed, err = s.issuerKeys.Seal([]byte(is.ClientSecret), issuerAAD(is.ID, org, is.URL, is.ClientID)); err != nil {
			return OrgIssuer{}, fmt.Errorf("org: add issuer: %w", err)
		}
		v := int32(s.issuerKeys.Primary())
		version = &v
	}
	scopes := is.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	var out OrgIssuer
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		out, err = scanIssuer(tx.QueryRow(ctx, insertIssuerSQL, is.ID, org, is.URL, is.JWKSURL, is.AllowPlainJWT,
			is.Login, is.ClientID, version, sealed, scopes, now))
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, notifySQL, org); err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Event{Kind: "org.issuer_added", Actor: actor, Target: is.ID, OrgID: org,
			Detail: map[string]any{"org": org, "issuer": is.ID, "url": is.URL, "login": is.Login, "client_id": is.ClientID,
				"has_secret": sealed != nil}})
	})
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "23503":
		return OrgIssuer{}, problem.Detail(ErrNotFound, "no organization %s", org)
	case errors.As(err, &pe) && pe.Code == "23505":
		return OrgIssuer{}, problem.Detail(ErrIssuerExists, "an issuer with id %s or URL %s exists already", is.ID, is.URL)
	case err != nil:
		return OrgIssuer{}, fmt.Errorf("org: add issuer %s to %s: %w", is.ID, org, err)
	}
	s.forget(org)
	s.logger.InfoContext(ctx, "issuer added", slog.String("org", org), slog.String("issuer", is.ID),
		slog.String("url", is.URL))
	return out, nil
}

// Issuers lists organization org's own issuers, by id, without secrets.
// ErrNotFound when there is no such organization.
func (s *Store) Issuers(ctx context.Context, org string) ([]OrgIssuer, error) {
	if err := checkID(org); err != nil {
		return nil, err
	}
	var out []OrgIssuer
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var flag bool
		if err := tx.QueryRow(ctx, deploymentIssuersSQL, org).Scan(&flag); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, listIssuersSQL, org)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (OrgIssuer, error) { return scanIssuer(r) })
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, problem.Detail(ErrNotFound, "no organization %s", org)
	}
	if err != nil {
		return nil, fmt.Errorf("org: list issuers of %s: %w", org, err)
	}
	return out, nil
}

// RemoveIssuer deletes organization org's issuer id, audited
// (org.issuer_removed). Its tokens are refused, and logins at it fail, on
// every replica once the notification arrives. ErrIssuerNotFound when org
// has no issuer of that id.
func (s *Store) RemoveIssuer(ctx context.Context, org, id, actor string) (OrgIssuer, error) {
	if err := checkID(org); err != nil {
		return OrgIssuer{}, err
	}
	var out OrgIssuer
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		out, err = scanIssuer(tx.QueryRow(ctx, deleteIssuerSQL, org, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return problem.Detail(ErrIssuerNotFound, "organization %s has no issuer %s", org, id)
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, notifySQL, org); err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Event{Kind: "org.issuer_removed", Actor: actor, Target: id, OrgID: org,
			Detail: map[string]any{"org": org, "issuer": id, "url": out.URL}})
	})
	if err != nil {
		if errors.Is(err, ErrIssuerNotFound) {
			return OrgIssuer{}, err
		}
		return OrgIssuer{}, fmt.Errorf("org: remove issuer %s of %s: %w", id, org, err)
	}
	s.forget(org)
	return out, nil
}

// SetDeploymentIssuers turns the deployment's issuers on or off for
// organization org's MCP servers (Update's DeploymentIssuers).
func (s *Store) SetDeploymentIssuers(ctx context.Context, org string, on bool, actor string) (Organization, error) {
	return s.Update(ctx, org, Update{DeploymentIssuers: &on}, actor)
}

// LookupIssuer finds an organization's issuer by its id or exact URL: the
// issuer (its login client secret opened) and its organization; ok false
// when no organization has one. It is mcpauth's IssuerSource. A warm call,
// found or not, answers from memory (see Config.CacheTTL); an error means
// the database could not say (the caller answers 503).
func (s *Store) LookupIssuer(ctx context.Context, idOrURL string) (mcpauth.Issuer, string, bool, error) {
	if mcpauth.CheckIssuer(idOrURL) != nil { // NUL, bad UTF-8, too long: no issuer, and no query
		return mcpauth.Issuer{}, "", false, nil
	}
	key := "i\x00" + idOrURL
	c, ok := s.trust.Lookup(ctx, key)
	if !ok {
		gen := s.trust.Gen()
		var is mcpauth.Issuer
		var org string
		var sealed []byte
		err := s.pool.QueryRow(ctx, lookupIssuerSQL, idOrURL).Scan(&is.ID, &org, &is.URL, &is.JWKSURL,
			&is.AllowPlainJWT, &is.Login, &is.ClientID, &sealed, &is.Scopes)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			c = cachedTrust{}
			s.trust.Put(key, c, gen, time.Time{})
		case err != nil:
			err = fmt.Errorf("org: look up issuer: %w", err)
			// The database unreachable: the answer as last read, within
			// the stale-if-error time; any other error drops it.
			if c, ok = s.trust.Fallback(ctx, key, err); !ok {
				return mcpauth.Issuer{}, "", false, err
			}
		default:
			if len(is.Scopes) == 0 {
				is.Scopes = nil
			}
			c = cachedTrust{org: org, is: is, sealed: sealed}
			s.trust.Put(key, c, gen, time.Time{})
		}
	}
	if c.org == "" {
		return mcpauth.Issuer{}, "", false, nil
	}
	is := c.is
	is.Scopes = slices.Clone(is.Scopes)
	if c.sealed != nil {
		var plain []byte
		err := fmt.Errorf("%w: issuer %s: no vault keyring (CONNECTD_VAULT_KEYS)", ErrIssuerSecret, is.ID)
		if s.issuerKeys != nil {
			if plain, err = s.issuerKeys.Open(c.sealed, issuerAAD(is.ID, c.org, is.URL, is.ClientID)); err != nil {
				err = fmt.Errorf("%w: issuer %s (a key version the keyring lacks, or not sealed for this row)", ErrIssuerSecret, is.ID)
			}
		}
		if err != nil {
			// Its tokens still verify; logins at it are off until the
			// operator fixes the keyring (or sets the issuer again).
			is.Login = false
			if s.secretWarnings.Due(is.ID, s.now()) {
				s.logger.ErrorContext(ctx, "issuer login disabled: its client secret does not open", slog.String("org", c.org),
					slog.String("issuer", is.ID), slog.Any("error", err))
			}
		} else {
			is.ClientSecret = string(plain)
			clear(plain)
		}
	}
	return is, c.org, true, nil
}

// DeploymentIssuers reports whether organization org's MCP servers accept
// the deployment's issuers: always for the default organization (no
// query), else its flag, answered from memory when warm. ErrNotFound for
// an organization that does not exist.
func (s *Store) DeploymentIssuers(ctx context.Context, org string) (bool, error) {
	if org == names.DefaultOrg {
		return true, nil
	}
	key := "d\x00" + org
	c, ok := s.trust.Lookup(ctx, key)
	if !ok {
		if err := checkID(org); err != nil {
			return false, err
		}
		gen := s.trust.Gen()
		var flag bool
		err := s.pool.QueryRow(ctx, deploymentIssuersSQL, org).Scan(&flag)
		if errors.Is(err, pgx.ErrNoRows) {
			err = problem.Detail(ErrNotFound, "no organization %s", org)
		} else if err != nil {
			err = fmt.Errorf("org: deployment issuers of %s: %w", org, err)
		}
		if err != nil {
			// The database unreachable: the flag as last read, within the
			// stale-if-error time; any other answer drops it.
			if c, ok = s.trust.Fallback(ctx, key, err); !ok {
				return false, err
			}
		} else {
			c = cachedTrust{org: org, deployment: flag}
			s.trust.Put(key, c, gen, time.Time{})
		}
	}
	return c.deployment, nil
}

// forgetTrust drops what the trust cache holds about organization org
// (cache.Flush: all), and every "no such issuer" answer: the change may
// have added the issuer asked for.
func (s *Store) forgetTrust(org string) {
	s.trust.DeleteFunc(func(_ string, c cachedTrust) bool { return org == cache.Flush || c.org == org || c.org == "" })
}

// TrustCacheStats reports the trust cache's counters (issuers looked up,
// organizations' DeploymentIssuers flags; zero when disabled).
func (s *Store) TrustCacheStats() cache.Stats { return s.trust.Stats() }

// The Store is where the verifier finds the organizations' issuers.
var _ mcpauth.IssuerSource = (*Store)(nil)
