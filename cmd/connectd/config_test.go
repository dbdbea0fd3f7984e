package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigValid(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(envOf(map[string]string{
		"CONNECTD_PUBLIC_URL":   "https://connect.example.com/",
		"CONNECTD_DATABASE_URL": "postgres://u:p@db:5432/connectd",
		"CONNECTD_DB_MAX_CONNS": "50",
		"CONNECTD_LOG_LEVEL":    "DEBUG",
	}), needs{db: true, publicURL: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.PublicURL.String() != "https://connect.example.com" || c.DB.MaxConns != 50 || c.Dev ||
		c.Addr != ":8080" || c.InternalAddr != "127.0.0.1:9090" || c.HTTP.ShutdownGrace != 30*time.Second {
		t.Fatalf("unexpected config %+v", c)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"CONNECTD_PUBLIC_URL":   "https://connect.example.com",
		"CONNECTD_DATABASE_URL": "postgres://u:p@db:5432/connectd",
	}
	tests := []struct {
		name    string
		set     map[string]string
		wantVar string
		wantMsg string
	}{
		{"missing database", map[string]string{"CONNECTD_DATABASE_URL": ""}, "CONNECTD_DATABASE_URL", "is required"},
		{"database not postgres", map[string]string{"CONNECTD_DATABASE_URL": "mysql://x"}, "CONNECTD_DATABASE_URL", "postgres://"},
		{"missing public url", map[string]string{"CONNECTD_PUBLIC_URL": ""}, "CONNECTD_PUBLIC_URL", "is required"},
		{"http public url outside dev", map[string]string{"CONNECTD_PUBLIC_URL": "http://connect.example.com"}, "CONNECTD_PUBLIC_URL", "CONNECTD_DEV=true"},
		{"javascript public url", map[string]string{"CONNECTD_PUBLIC_URL": "javascript:alert(1)"}, "CONNECTD_PUBLIC_URL", "http(s)"},
		{"relative public url", map[string]string{"CONNECTD_PUBLIC_URL": "/relative-path"}, "CONNECTD_PUBLIC_URL", "http(s)"},
		{"public url with userinfo", map[string]string{"CONNECTD_PUBLIC_URL": "https://a@evil.test"}, "CONNECTD_PUBLIC_URL", "user info"},
		{"public url with query", map[string]string{"CONNECTD_PUBLIC_URL": "https://a.test/?x=1"}, "CONNECTD_PUBLIC_URL", "query"},
		{"loopback public url outside dev", map[string]string{"CONNECTD_PUBLIC_URL": "https://127.0.0.1:8443"}, "CONNECTD_PUBLIC_URL", "loopback"},
		{"localhost public url outside dev", map[string]string{"CONNECTD_PUBLIC_URL": "https://localhost"}, "CONNECTD_PUBLIC_URL", "loopback"},
		{"dev not bool", map[string]string{"CONNECTD_DEV": "yes please"}, "CONNECTD_DEV", "true or false"},
		{"auto migrate not bool", map[string]string{"CONNECTD_AUTO_MIGRATE": "2"}, "CONNECTD_AUTO_MIGRATE", "true or false"},
		{"bad addr", map[string]string{"CONNECTD_ADDR": "8080"}, "CONNECTD_ADDR", "host:port"},
		{"bad internal addr", map[string]string{"CONNECTD_INTERNAL_ADDR": "localhost"}, "CONNECTD_INTERNAL_ADDR", "host:port"},
		{"max conns not int", map[string]string{"CONNECTD_DB_MAX_CONNS": "ten"}, "CONNECTD_DB_MAX_CONNS", "integer"},
		{"max conns zero", map[string]string{"CONNECTD_DB_MAX_CONNS": "0"}, "CONNECTD_DB_MAX_CONNS", "between 1 and 1000"},
		{"min above max", map[string]string{"CONNECTD_DB_MAX_CONNS": "2", "CONNECTD_DB_MIN_CONNS": "3"}, "CONNECTD_DB_MIN_CONNS", "must not exceed"},
		{"lifetime not duration", map[string]string{"CONNECTD_DB_MAX_CONN_LIFETIME": "forever"}, "CONNECTD_DB_MAX_CONN_LIFETIME", "duration"},
		{"grace too long", map[string]string{"CONNECTD_SHUTDOWN_GRACE": "1h"}, "CONNECTD_SHUTDOWN_GRACE", "between"},
		{"write timeout too short", map[string]string{"CONNECTD_HTTP_WRITE_TIMEOUT": "1ms"}, "CONNECTD_HTTP_WRITE_TIMEOUT", "between"},
		{"log level", map[string]string{"CONNECTD_LOG_LEVEL": "loud"}, "CONNECTD_LOG_LEVEL", "debug, info"},
		{"log format", map[string]string{"CONNECTD_LOG_FORMAT": "xml"}, "CONNECTD_LOG_FORMAT", "json or text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := map[string]string{}
			for k, v := range base {
				m[k] = v
			}
			for k, v := range tt.set {
				m[k] = v
			}
			_, err := loadConfig(envOf(m), needs{db: true, publicURL: true})
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *ConfigError", err)
			}
			if ce.Var != tt.wantVar || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("got %q, want variable %s and %q", err, tt.wantVar, tt.wantMsg)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("message is not one line: %q", err)
			}
			for _, v := range tt.set {
				if len(v) > 6 && strings.Contains(err.Error(), v) {
					t.Fatalf("message echoes the value %q", v)
				}
			}
		})
	}
}

func TestConfigDevAllowsHTTPLoopback(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(envOf(map[string]string{
		"CONNECTD_DEV":          "true",
		"CONNECTD_PUBLIC_URL":   "http://127.0.0.1:8080",
		"CONNECTD_DATABASE_URL": "postgres://localhost/x",
	}), needs{db: true, publicURL: true})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Dev || c.PublicURL.Scheme != "http" {
		t.Fatalf("%+v", c)
	}
}

// TestConfigReportsEveryProblem: one run names every variable at fault, the
// keys serve needs outside dev mode among them, not one per start.
func TestConfigReportsEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := loadConfig(envOf(map[string]string{
		"CONNECTD_PUBLIC_URL":     "http://connect.example.com",
		"CONNECTD_DATABASE_URL":   "postgres://u:p@db:5432/connectd",
		"CONNECTD_LOG_LEVEL":      "loud",
		"CONNECTD_SESSION_KEYS":   "c2hvcnQ=",
		"CONNECTD_DB_MAX_CONNS":   "ten",
		"CONNECTD_SHUTDOWN_GRACE": "1h",
	}), needs{db: true, publicURL: true, keys: true})
	var ces ConfigErrors
	if !errors.As(err, &ces) || exitCode(err) != 2 {
		t.Fatalf("got %v (exit %d), want ConfigErrors", err, exitCode(err))
	}
	var got []string
	for _, ce := range ces {
		got = append(got, ce.Var)
	}
	want := []string{"CONNECTD_DB_MAX_CONNS", "CONNECTD_LOG_LEVEL", "CONNECTD_SHUTDOWN_GRACE", "CONNECTD_PUBLIC_URL",
		"CONNECTD_SESSION_KEYS", "CONNECTD_VAULT_KEYS"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("problems for %v, want %v:\n%v", got, want, err)
	}
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Var != want[0] {
		t.Fatalf("errors.As finds %v, want the first problem", ce)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "invalid configuration (6 problems):\n  CONNECTD_DB_MAX_CONNS: ") ||
		strings.Count(msg, "\n") != 6 || strings.Contains(msg, "c2hvcnQ=") {
		t.Fatalf("message:\n%s", msg)
	}
	// In dev mode the keys may be left out (ephemeral ones, with a warning).
	if _, err := loadConfig(envOf(map[string]string{"CONNECTD_DEV": "true", "CONNECTD_PUBLIC_URL": "http://127.0.0.1:8080",
		"CONNECTD_DATABASE_URL": "postgres://u:p@db/c"}), needs{db: true, publicURL: true, keys: true}); err != nil {
		t.Fatalf("dev mode without keys: %v", err)
	}
}
