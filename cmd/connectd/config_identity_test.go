package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/session"
)

func identityEnv(set map[string]string) map[string]string {
	m := map[string]string{
		"CONNECTD_PUBLIC_URL":   "https://connect.example.com",
		"CONNECTD_DATABASE_URL": "postgres://u:p@db:5432/connectd",
	}
	for k, v := range set {
		m[k] = v
	}
	return m
}

func TestIdentityConfigValid(t *testing.T) {
	t.Parallel()
	k1, k2 := session.NewKey(), session.NewKey()
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := loadConfig(envOf(identityEnv(map[string]string{
		"CONNECTD_ISSUERS": `[
			{"id":"main","issuer":"https://auth.example.com","login":true,"client_id":"connectd","client_secret_env":"MAIN_SECRET","scopes":["profile"]},
			{"id":"legacy","issuer":"https://legacy.example.com/realms/x","jwks_url":"https://legacy.example.com/keys","allow_plain_jwt":true},
			{"id":"filed","issuer":"https://f.example.com","login":true,"client_id":"c","client_secret_file":"` + secretFile + `","switch_prompt":"select_account"}
		]`,
		"MAIN_SECRET":                   "s3cret-value",
		"CONNECTD_SESSION_KEYS":         k1.Encode() + "," + k2.Encode(),
		"CONNECTD_SESSION_MAX_AGE":      "8h",
		"CONNECTD_SESSION_IDLE_TIMEOUT": "30m",
		"CONNECTD_TOKEN_SKEW":           "10s",
		"CONNECTD_CLIENT_KEY_OVERLAP":   "72h",
	})), needs{db: true, publicURL: true})
	if err != nil {
		t.Fatal(err)
	}
	ic := c.Identity
	if len(ic.Issuers) != 3 || ic.Issuers[0].ClientSecret != "s3cret-value" || !ic.Issuers[0].Login ||
		ic.Issuers[1].JWKSURL != "https://legacy.example.com/keys" || !ic.Issuers[1].AllowPlainJWT ||
		ic.Issuers[2].ClientSecret != "from-a-file" || ic.Issuers[0].SwitchPrompt != nil ||
		ic.Issuers[2].SwitchPrompt == nil || *ic.Issuers[2].SwitchPrompt != "select_account" {
		t.Fatalf("issuers %+v", ic.Issuers)
	}
	if len(ic.SessionKeys) != 2 || string(ic.SessionKeys[0].Hash) != string(k1.Hash) || ic.SessionMaxAge != 8*time.Hour ||
		ic.SessionIdleTimeout != 30*time.Minute || ic.TokenSkew != 10*time.Second || ic.ClientKeyOverlap != 72*time.Hour {
		t.Fatalf("identity %+v", ic)
	}

	// Defaults, and the file form of the issuer list.
	file := filepath.Join(t.TempDir(), "issuers.json")
	os.WriteFile(file, []byte(`[{"id":"a","issuer":"https://a.example.com"}]`), 0o600)
	c, err = loadConfig(envOf(identityEnv(map[string]string{"CONNECTD_ISSUERS_FILE": file})), needs{})
	if err != nil {
		t.Fatal(err)
	}
	if ic := c.Identity; len(ic.Issuers) != 1 || ic.SessionMaxAge != 12*time.Hour || ic.SessionIdleTimeout != time.Hour ||
		ic.TokenSkew != 30*time.Second || ic.ClientKeyOverlap != 24*time.Hour {
		t.Fatalf("defaults %+v", ic)
	}
}

func TestIdentityConfigErrors(t *testing.T) {
	t.Parallel()
	const secret = "do-not-echo-this-secret"
	tests := []struct {
		name    string
		set     map[string]string
		wantVar string
		wantMsg string
	}{
		{"not JSON", map[string]string{"CONNECTD_ISSUERS": "main=https://x"}, "CONNECTD_ISSUERS", "JSON array"},
		{"inline secret", map[string]string{"CONNECTD_ISSUERS": `[{"id":"a","issuer":"https://a.example","client_secret":"` + secret + `"}]`},
			"CONNECTD_ISSUERS", "must not be inline"},
		{"unknown field", map[string]string{"CONNECTD_ISSUERS": `[{"id":"a","issuer":"https://a.example","jwks":"x"}]`}, "CONNECTD_ISSUERS", "JSON array"},
		{"http issuer outside dev", map[string]string{"CONNECTD_ISSUERS": `[{"id":"a","issuer":"http://a.example"}]`}, "CONNECTD_ISSUERS", "https"},
		{"javascript jwks", map[string]string{"CONNECTD_ISSUERS": `[{"id":"a","issuer":"https://a.example","jwks_url":"javascript:x"}]`}, "CONNECTD_ISSUERS", "jwks_url"},
		{"bad id", map[string]string{"CONNECTD_ISSUERS": `[{"id":"Main Issuer","issuer":"https://a.example"}]`}, "CONNECTD_ISSUERS", "id must be"},
		{"switch prompt none", map[string]string{"CONNECTD_ISSUERS": `[{"id":"a","issuer":"https://a.example","switch_prompt":"none"}]`}, "CONNECTD_ISSUERS", "switch_prompt"},
		{"login without client id", map[string]string{"CONNECTD_ISSUERS": `[{"id":"a","issuer":"https://a.example","login":true}]`}, "CONNECTD_ISSUERS", "client_id"},
		{"secret variable unset", map[string]string{"CONNECTD_ISSUERS": `[{"id":"a","issuer":"https://a.example","login":true,"client_id":"c","client_secret_env":"NOPE"}]`},
			"CONNECTD_ISSUERS", "empty or unset"},
		{"secret file missing", map[string]string{"CONNECTD_ISSUERS": `[{"id":"a","issuer":"https://a.example","client_secret_file":"/nonexistent/x"}]`},
			"CONNECTD_ISSUERS", "cannot be read"},
		{"secret env and file", map[string]string{"CONNECTD_ISSUERS": `[{"id":"a","issuer":"https://a.example","client_secret_env":"X","client_secret_file":"/x"}]`},
			"CONNECTD_ISSUERS", "not both"},
		{"duplicate issuer", map[string]string{"CONNECTD_ISSUERS": `[{"id":"a","issuer":"https://a.example"},{"id":"b","issuer":"https://a.example"}]`},
			"CONNECTD_ISSUERS", "twice"},
		{"both issuer variables", map[string]string{"CONNECTD_ISSUERS": `[]`, "CONNECTD_ISSUERS_FILE": "/x"}, "CONNECTD_ISSUERS_FILE", "together"},
		{"issuers file missing", map[string]string{"CONNECTD_ISSUERS_FILE": "/nonexistent/issuers.json"}, "CONNECTD_ISSUERS_FILE", "cannot be read"},
		{"session key not base64", map[string]string{"CONNECTD_SESSION_KEYS": secret}, "CONNECTD_SESSION_KEYS", "key 1"},
		{"second session key short", map[string]string{"CONNECTD_SESSION_KEYS": session.NewKey().Encode() + ",c2hvcnQ="}, "CONNECTD_SESSION_KEYS", "key 2"},
		{"max age too short", map[string]string{"CONNECTD_SESSION_MAX_AGE": "1m"}, "CONNECTD_SESSION_MAX_AGE", "between"},
		{"idle above max age", map[string]string{"CONNECTD_SESSION_MAX_AGE": "1h", "CONNECTD_SESSION_IDLE_TIMEOUT": "2h"},
			"CONNECTD_SESSION_IDLE_TIMEOUT", "must not exceed"},
		{"skew too large", map[string]string{"CONNECTD_TOKEN_SKEW": "1h"}, "CONNECTD_TOKEN_SKEW", "between"},
		{"overlap not a duration", map[string]string{"CONNECTD_CLIENT_KEY_OVERLAP": "a day"}, "CONNECTD_CLIENT_KEY_OVERLAP", "duration"},
		{"dev idp in dev mode", map[string]string{"CONNECTD_DEV": "true", "CONNECTD_DEV_IDP": "true"}, "CONNECTD_DEV_IDP", "moved to the demo program, connectd-demo"},
		{"dev idp outside dev mode", map[string]string{"CONNECTD_DEV_IDP": "true"}, "CONNECTD_DEV_IDP", "connectd-demo"},
		{"dev idp not bool", map[string]string{"CONNECTD_DEV": "true", "CONNECTD_DEV_IDP": "maybe"}, "CONNECTD_DEV_IDP", "connectd-demo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadConfig(envOf(identityEnv(tt.set)), needs{db: true, publicURL: true})
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *ConfigError", err)
			}
			if ce.Var != tt.wantVar || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("got %q, want variable %s and %q", err, tt.wantVar, tt.wantMsg)
			}
			if strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), secret) {
				t.Fatalf("message is multi-line or echoes a secret: %q", err)
			}
		})
	}
}

// TestDevIdPOff: CONNECTD_DEV_IDP=false, the old default, still starts
// connectd (an operator's env file that spells it out keeps working); any
// other value is refused above, never silently dropped.
func TestDevIdPOff(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"false", "0", " FALSE "} {
		if _, err := loadConfig(envOf(map[string]string{"CONNECTD_DEV": "true", "CONNECTD_DEV_IDP": v}), needs{}); err != nil {
			t.Errorf("CONNECTD_DEV_IDP=%q: %v", v, err)
		}
	}
}
