package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/session"
)

// issuerJSON is one entry of CONNECTD_ISSUERS. Secrets are never inline: only
// the name of a variable or a file holding them.
type issuerJSON struct {
	ID               string   `json:"id"`
	Issuer           string   `json:"issuer"`
	JWKSURL          string   `json:"jwks_url"`
	AllowPlainJWT    bool     `json:"allow_plain_jwt"`
	Login            bool     `json:"login"`
	ClientID         string   `json:"client_id"`
	ClientSecretEnv  string   `json:"client_secret_env"`
	ClientSecretFile string   `json:"client_secret_file"`
	Scopes           []string `json:"scopes"`
	SwitchPrompt     *string  `json:"switch_prompt"`
}

// loadIdentity reads the identity variables (see docs/identity.md).
func (c *Config) loadIdentity(e *env) {
	ic := &c.Identity
	name, raw := "CONNECTD_ISSUERS", e.str("CONNECTD_ISSUERS", "")
	if path := e.str("CONNECTD_ISSUERS_FILE", ""); path != "" {
		if raw != "" {
			e.fail("CONNECTD_ISSUERS_FILE", "must not be set together with CONNECTD_ISSUERS")
		}
		b, err := os.ReadFile(path)
		if err != nil {
			e.fail("CONNECTD_ISSUERS_FILE", "cannot be read: %v", err)
		}
		name, raw = "CONNECTD_ISSUERS_FILE", string(b)
	}
	if strings.TrimSpace(raw) != "" {
		ic.Issuers = parseIssuers(e, name, raw, c.Dev)
	}

	if v := e.str("CONNECTD_SESSION_KEYS", ""); v != "" {
		for i, s := range strings.Split(v, ",") {
			k, err := session.ParseKey(s)
			if err != nil {
				e.fail("CONNECTD_SESSION_KEYS", "key %d: %v (generate one with: openssl rand -base64 64 | tr -d '\\n')", i+1, err)
				break
			}
			ic.SessionKeys = append(ic.SessionKeys, k)
		}
	}
	ic.SessionMaxAge = e.duration("CONNECTD_SESSION_MAX_AGE", 12*time.Hour, 5*time.Minute, 30*24*time.Hour)
	ic.SessionIdleTimeout = e.duration("CONNECTD_SESSION_IDLE_TIMEOUT", time.Hour, time.Minute, 30*24*time.Hour)
	if ic.SessionIdleTimeout > ic.SessionMaxAge {
		e.fail("CONNECTD_SESSION_IDLE_TIMEOUT", "must not exceed CONNECTD_SESSION_MAX_AGE")
	}
	// Only a safety net: an ended session is forgotten on every replica as
	// soon as its notification arrives (see internal/session/live.go).
	ic.SessionCacheTTL = e.duration("CONNECTD_SESSION_CACHE_TTL", 30*time.Second, 0, time.Hour)
	ic.TokenSkew = e.duration("CONNECTD_TOKEN_SKEW", 30*time.Second, 0, 5*time.Minute)
	ic.ClientKeyOverlap = e.duration("CONNECTD_CLIENT_KEY_OVERLAP", 24*time.Hour, 0, 30*24*time.Hour)
	// The development identity provider left connectd (issue 23 §5). A
	// configuration that asks for it fails rather than starting without the
	// issuer it expects; false, the old default, still means what it meant.
	if on, err := strconv.ParseBool(e.str("CONNECTD_DEV_IDP", "false")); on || err != nil {
		e.fail("CONNECTD_DEV_IDP", "is no longer supported: the development identity provider moved to the demo program, connectd-demo (make demo), "+
			"which serves it on its own port; trust any identity provider through CONNECTD_ISSUERS, and unset CONNECTD_DEV_IDP")
	}
}

// parseIssuers decodes and validates the issuer list held by variable name.
func parseIssuers(e *env, name, raw string, dev bool) []mcpauth.Issuer {
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	var list []issuerJSON
	if err := dec.Decode(&list); err != nil {
		if strings.Contains(err.Error(), `"client_secret"`) {
			e.fail(name, "client_secret must not be inline: use client_secret_env (a variable name) or client_secret_file")
		} else {
			e.fail(name, "must be a JSON array of issuers (id, issuer, jwks_url, login, client_id, client_secret_env, client_secret_file, allow_plain_jwt, scopes, switch_prompt): %v", err)
		}
		return nil
	}
	var out []mcpauth.Issuer
	seen := map[string]bool{}
	for n, j := range list {
		is := mcpauth.Issuer{ID: j.ID, URL: j.Issuer, JWKSURL: j.JWKSURL, AllowPlainJWT: j.AllowPlainJWT,
			Login: j.Login, ClientID: j.ClientID, Scopes: j.Scopes, SwitchPrompt: j.SwitchPrompt}
		label := fmt.Sprintf("issuer %d (%s)", n+1, j.ID)
		switch {
		case j.ClientSecretEnv != "" && j.ClientSecretFile != "":
			e.fail(name, "%s: set client_secret_env or client_secret_file, not both", label)
			return nil
		case j.ClientSecretEnv != "":
			is.ClientSecret = strings.TrimSpace(e.getenv(j.ClientSecretEnv))
			if is.ClientSecret == "" {
				e.fail(name, "%s: client_secret_env names %s, which is empty or unset", label, j.ClientSecretEnv)
				return nil
			}
		case j.ClientSecretFile != "":
			b, err := os.ReadFile(j.ClientSecretFile)
			if err != nil || strings.TrimSpace(string(b)) == "" {
				e.fail(name, "%s: client_secret_file cannot be read or is empty", label)
				return nil
			}
			is.ClientSecret = strings.TrimSpace(string(b))
		}
		if err := is.Validate(dev); err != nil {
			e.fail(name, "%s: %v", label, err)
			return nil
		}
		if seen[is.ID] || seen[is.URL] {
			e.fail(name, "%s: id or issuer URL listed twice", label)
			return nil
		}
		seen[is.ID], seen[is.URL] = true, true
		out = append(out, is)
	}
	return out
}
