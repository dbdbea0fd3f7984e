package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestScalingConfig(t *testing.T) {
	base := map[string]string{"CONNECTD_DATABASE_URL": "postgres://u:p@db/connectd"}
	with := func(kv ...string) func(string) string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	cfg, err := loadConfig(with(), needs{db: true})
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.Cache; c.CredentialTTL != 30*time.Second || c.ConsentTTL != 30*time.Second ||
		c.ClientKeyTTL != 10*time.Second || c.Size != 50_000 || cfg.DatabaseListenURL != "" {
		t.Fatalf("defaults: %+v %q", c, cfg.DatabaseListenURL)
	}
	cfg, err = loadConfig(with("CONNECTD_CREDENTIAL_CACHE", "false", "CONNECTD_CLIENT_CACHE_TTL", "0",
		"CONNECTD_DATABASE_LISTEN_URL", "postgres://u:p@primary/connectd"), needs{db: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cache.CredentialTTL != 0 || cfg.Cache.ClientKeyTTL != 0 || cfg.Cache.ConsentTTL != 30*time.Second ||
		cfg.DatabaseListenURL != "postgres://u:p@primary/connectd" {
		t.Fatalf("cache off: %+v %q", cfg.Cache, cfg.DatabaseListenURL)
	}
	for _, bad := range [][]string{
		{"CONNECTD_CREDENTIAL_CACHE", "maybe"},
		{"CONNECTD_CREDENTIAL_CACHE_TTL", "2h"},
		{"CONNECTD_CONSENT_CACHE_TTL", "-1s"},
		{"CONNECTD_CACHE_SIZE", "0"},
		{"CONNECTD_DATABASE_LISTEN_URL", "mysql://secret@db"},
	} {
		_, err := loadConfig(with(bad...), needs{db: true})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Var != bad[0] {
			t.Errorf("%s=%s: %v, want a ConfigError naming it", bad[0], bad[1], err)
		}
		if err != nil && bad[0] == "CONNECTD_DATABASE_LISTEN_URL" && strings.Contains(err.Error(), "secret") {
			t.Errorf("the error repeats the URL: %v", err)
		}
	}
}
