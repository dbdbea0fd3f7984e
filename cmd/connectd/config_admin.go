package main

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/connectd/connectd/internal/admin"
)

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
		e.fail("CONNECTD_ADMIN_ISSUER", "must be the id or URL of an issuer in CONNECTD_ISSUERS with \"login\": true")
	}
	a.SessionMaxAge = e.duration("CONNECTD_ADMIN_SESSION_MAX_AGE", 8*time.Hour, 5*time.Minute, 24*time.Hour)
	a.AuditRetention = e.days("CONNECTD_AUDIT_RETENTION", admin.DefaultRetention, 24*time.Hour, 3650*24*time.Hour)
}

// loginIssuer reports whether idOrURL names an issuer browsers can sign in at.
func (c *Config) loginIssuer(idOrURL string) bool {
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
