package main

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/admin"
	"github.com/connectd/connectd/internal/connect"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/session"
)

// AdminConfig configures the admin pages, the admin API and the audit
// trail's retention (docs/admin.md). Filled by loadAdmin.
type AdminConfig struct {
	// Issuer (CONNECTD_ADMIN_ISSUER) is the id or URL of the login issuer
	// admins sign in at; empty disables admin sign-in (the API still takes
	// admin keys).
	Issuer string
	// Subjects (CONNECTD_ADMIN_SUBJECTS) are the allow-listed subjects at
	// Issuer.
	Subjects []string
	// Claim and ClaimValue (CONNECTD_ADMIN_CLAIM=name=value): an ID token
	// claim admins must carry. With Subjects too, both must hold.
	Claim, ClaimValue string
	SessionMaxAge     time.Duration // CONNECTD_ADMIN_SESSION_MAX_AGE
	AuditRetention    time.Duration // CONNECTD_AUDIT_RETENTION
}

// claimName is a claim, dotted for nested objects: realm_access.roles.
var claimName = regexp.MustCompile(`^[A-Za-z0-9_:/-]+(\.[A-Za-z0-9_:/-]+)*$`)

// loadAdmin reads the admin variables. It runs after loadIdentity: the admin
// issuer must be one of the login issuers.
func (c *Config) loadAdmin(e *env) {
	a := &c.Admin
	a.Issuer = e.str("CONNECTD_ADMIN_ISSUER", "")
	if v := e.str("CONNECTD_ADMIN_SUBJECTS", ""); v != "" {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if s == "" || len(s) > 2048 || strings.IndexFunc(s, unicode.IsControl) >= 0 {
				e.fail("CONNECTD_ADMIN_SUBJECTS", "must be a comma-separated list of subjects (sub claims) at CONNECTD_ADMIN_ISSUER")
				break
			}
			a.Subjects = append(a.Subjects, s)
		}
	}
	if v := e.str("CONNECTD_ADMIN_CLAIM", ""); v != "" {
		name, value, ok := strings.Cut(v, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || !claimName.MatchString(name) || value == "" {
			e.fail("CONNECTD_ADMIN_CLAIM", "must be NAME=VALUE, e.g. groups=connectd-admins (NAME may be dotted: realm_access.roles=admin)")
		}
		a.Claim, a.ClaimValue = name, value
	}
	switch {
	case a.Issuer == "" && (len(a.Subjects) > 0 || a.Claim != ""):
		e.fail("CONNECTD_ADMIN_ISSUER", "is required with CONNECTD_ADMIN_SUBJECTS or CONNECTD_ADMIN_CLAIM (the issuer admins sign in at)")
	case a.Issuer != "" && len(a.Subjects) == 0 && a.Claim == "":
		e.fail("CONNECTD_ADMIN_ISSUER", "needs CONNECTD_ADMIN_SUBJECTS or CONNECTD_ADMIN_CLAIM: otherwise everyone who can sign in there would be an admin")
	case a.Issuer != "" && !c.loginIssuer(a.Issuer):
		e.fail("CONNECTD_ADMIN_ISSUER", "must be the id or URL of an issuer in CONNECTD_ISSUERS with \"login\": true (or dev with CONNECTD_DEV_IDP=true)")
	}
	a.SessionMaxAge = e.duration("CONNECTD_ADMIN_SESSION_MAX_AGE", 8*time.Hour, 5*time.Minute, 24*time.Hour)
	a.AuditRetention = e.days("CONNECTD_AUDIT_RETENTION", admin.DefaultRetention, 24*time.Hour, 3650*24*time.Hour)
}

// loginIssuer reports whether idOrURL names an issuer browsers can sign in at.
func (c *Config) loginIssuer(idOrURL string) bool {
	if idOrURL == "dev" && c.Identity.DevIdP {
		return true
	}
	for _, is := range c.Identity.Issuers {
		if is.Login && (is.ID == idOrURL || is.URL == idOrURL) {
			return true
		}
	}
	return false
}

// days reads a duration that may also be given in days: 90d, or 2160h.
func (e *env) days(name string, def, min, max time.Duration) time.Duration {
	v := e.str(name, "")
	if v == "" {
		return def
	}
	d, err := parseDays(v)
	if err != nil {
		e.fail(name, "must be a number of days such as 90d, or a duration such as 2160h")
		return def
	}
	if d < min || d > max {
		e.fail(name, "must be between %dd and %dd", min/(24*time.Hour), max/(24*time.Hour))
		return def
	}
	return d
}

// parseDays parses "90d" (days) or a Go duration ("2160h").
func parseDays(v string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(v, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days > 100_000 {
			return 0, errors.New("not a number of days")
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(v)
}

// newAdmin wires the admin pages and API: an admin session store (its own
// cookie, under the session keys), an OIDC relying party at the admin issuer
// with its own redirect URI (<public URL>/admin/login/callback, to register
// at that issuer) and the connect flow's vault store.
func newAdmin(ctx context.Context, cfg *Config, pool *pgxpool.Pool, logger *slog.Logger, ident *identity, conn *connect.Server) (*admin.Server, error) {
	store, err := admin.NewStore(admin.StoreConfig{Pool: pool, Vault: conn.Vault(),
		Logger: logger})
	if err != nil {
		return nil, err
	}
	ac := admin.Config{Logger: logger, Store: store, Keys: admin.NewKeys(pool, nil, logger), Clients: ident.clients,
		Retention: cfg.Admin.AuditRetention}
	if cfg.Admin.Issuer == "" {
		logger.InfoContext(ctx, "admin sign-in disabled (CONNECTD_ADMIN_ISSUER not set); the admin API takes admin keys")
		return admin.New(ac)
	}
	keys := cfg.Identity.SessionKeys
	if len(keys) == 0 { // dev mode only: newIdentity refused this otherwise
		keys = []session.Key{session.NewKey()}
	}
	ac.Sessions, err = session.New(session.Config{Pool: pool, Keys: keys, Name: admin.SessionCookie, BindingName: admin.BindingCookie,
		MaxAge: cfg.Admin.SessionMaxAge, IdleTimeout: min(cfg.Identity.SessionIdleTimeout, cfg.Admin.SessionMaxAge)})
	if err != nil {
		return nil, err
	}
	ac.Login, err = mcpauth.NewLogin(mcpauth.LoginConfig{Pool: pool, Verifier: ident.verifier,
		RedirectURL: cfg.PublicURL.String() + admin.CallbackPath, Logger: logger})
	if err != nil {
		return nil, err
	}
	ac.Policy = admin.Policy{Issuer: cfg.Admin.Issuer, Subjects: cfg.Admin.Subjects, Claim: cfg.Admin.Claim,
		ClaimValue: cfg.Admin.ClaimValue}
	return admin.New(ac)
}
