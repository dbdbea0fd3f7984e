package main

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestAdminConfig(t *testing.T) {
	t.Parallel()
	issuers := `[{"id":"main","issuer":"https://auth.example.com","login":true,"client_id":"connectd"},
		{"id":"tokens","issuer":"https://tokens.example.com"}]`
	base := func(extra map[string]string) map[string]string {
		m := map[string]string{"CONNECTD_ISSUERS": issuers}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}

	c, err := loadConfig(envOf(base(nil)), needs{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Admin.Issuer != "" || c.Admin.AuditRetention != 90*24*time.Hour || c.Admin.SessionMaxAge != 8*time.Hour {
		t.Fatalf("defaults: %+v", c.Admin)
	}
	c, err = loadConfig(envOf(base(map[string]string{
		"CONNECTD_ADMIN_ISSUER":          "https://auth.example.com",
		"CONNECTD_ADMIN_SUBJECTS":        " alice , 1234-5678 ",
		"CONNECTD_ADMIN_CLAIM":           "realm_access.roles=connectd-admin",
		"CONNECTD_ADMIN_SESSION_MAX_AGE": "1h",
		"CONNECTD_AUDIT_RETENTION":       "30d",
	})), needs{})
	if err != nil {
		t.Fatal(err)
	}
	a := c.Admin
	if !slices.Equal(a.Subjects, []string{"alice", "1234-5678"}) || a.Claim != "realm_access.roles" ||
		a.ClaimValue != "connectd-admin" || a.SessionMaxAge != time.Hour || a.AuditRetention != 30*24*time.Hour {
		t.Fatalf("parsed: %+v", a)
	}
	if c, err := loadConfig(envOf(base(map[string]string{"CONNECTD_AUDIT_RETENTION": "2160h"})), needs{}); err != nil ||
		c.Admin.AuditRetention != 90*24*time.Hour {
		t.Fatalf("retention in hours: %v", err)
	}

	tests := []struct {
		name    string
		env     map[string]string
		wantVar string
	}{
		{"subjects without issuer", map[string]string{"CONNECTD_ADMIN_SUBJECTS": "alice"}, "CONNECTD_ADMIN_ISSUER"},
		{"claim without issuer", map[string]string{"CONNECTD_ADMIN_CLAIM": "groups=admins"}, "CONNECTD_ADMIN_ISSUER"},
		{"issuer without who", map[string]string{"CONNECTD_ADMIN_ISSUER": "main"}, "CONNECTD_ADMIN_ISSUER"},
		{"unknown issuer", map[string]string{"CONNECTD_ADMIN_ISSUER": "other", "CONNECTD_ADMIN_SUBJECTS": "alice"}, "CONNECTD_ADMIN_ISSUER"},
		{"issuer without login", map[string]string{"CONNECTD_ADMIN_ISSUER": "tokens", "CONNECTD_ADMIN_SUBJECTS": "alice"}, "CONNECTD_ADMIN_ISSUER"},
		{"dev, the old development IdP's id", map[string]string{"CONNECTD_DEV": "true", "CONNECTD_ADMIN_ISSUER": "dev", "CONNECTD_ADMIN_SUBJECTS": "alice"}, "CONNECTD_ADMIN_ISSUER"},
		{"empty subject", map[string]string{"CONNECTD_ADMIN_ISSUER": "main", "CONNECTD_ADMIN_SUBJECTS": "alice,,bob"}, "CONNECTD_ADMIN_SUBJECTS"},
		{"claim without value", map[string]string{"CONNECTD_ADMIN_ISSUER": "main", "CONNECTD_ADMIN_CLAIM": "groups="}, "CONNECTD_ADMIN_CLAIM"},
		{"claim without =", map[string]string{"CONNECTD_ADMIN_ISSUER": "main", "CONNECTD_ADMIN_CLAIM": "groups"}, "CONNECTD_ADMIN_CLAIM"},
		{"bad claim name", map[string]string{"CONNECTD_ADMIN_ISSUER": "main", "CONNECTD_ADMIN_CLAIM": "a..b=x"}, "CONNECTD_ADMIN_CLAIM"},
		{"session too long", map[string]string{"CONNECTD_ADMIN_SESSION_MAX_AGE": "48h"}, "CONNECTD_ADMIN_SESSION_MAX_AGE"},
		{"retention too short", map[string]string{"CONNECTD_AUDIT_RETENTION": "12h"}, "CONNECTD_AUDIT_RETENTION"},
		{"retention not a duration", map[string]string{"CONNECTD_AUDIT_RETENTION": "ninety days"}, "CONNECTD_AUDIT_RETENTION"},
		{"retention in weeks", map[string]string{"CONNECTD_AUDIT_RETENTION": "12w"}, "CONNECTD_AUDIT_RETENTION"},
	}
	for _, tt := range tests {
		_, err := loadConfig(envOf(base(tt.env)), needs{})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Var != tt.wantVar {
			t.Errorf("%s: got %v, want a ConfigError for %s", tt.name, err, tt.wantVar)
		}
	}
}
