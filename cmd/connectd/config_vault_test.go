package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/server"
)

func genKey(t *testing.T, v uint32) string {
	t.Helper()
	l, err := keyring.GenerateKey(v)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVaultConfig(t *testing.T) {
	t.Parallel()
	l1, l2 := genKey(t, 1), genKey(t, 2)
	providers := writeFile(t, "providers.json", `{"providers":[
		{"name":"github","template":"github","client_id":"Iv1.x","client_secret_env":"GITHUB_SECRET"},
		{"name":"openai","kind":"api_key"}]}`)
	c, err := loadConfig(envOf(map[string]string{
		"CONNECTD_VAULT_KEYS":           l1 + ",*" + l2,
		"CONNECTD_PROVIDERS_FILE":       providers,
		"GITHUB_SECRET":                 "s3cret",
		"CONNECTD_REFRESH_SKEW":         "90s",
		"CONNECTD_PROXY_ANSWER_TIMEOUT": "5s",
	}), needs{providers: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.Vault.Keyring.Primary() != 2 || len(c.Vault.Keyring.Versions()) != 2 || c.Vault.RefreshSkew != 90*time.Second ||
		len(c.Vault.Providers.Providers) != 2 || c.Vault.Providers.Providers[0].ClientSecret.Reveal() != "s3cret" ||
		c.Vault.ProxyAnswerTimeout != 5*time.Second {
		t.Fatalf("%+v", c.Vault)
	}
	keysFile := writeFile(t, "keys", "# rotated 2026-01\n"+l1+"\n*"+l2+"\n")
	c, err = loadConfig(envOf(map[string]string{"CONNECTD_VAULT_KEYS_FILE": keysFile}), needs{})
	if err != nil || c.Vault.Keyring.Primary() != 2 {
		t.Fatalf("keys file: %v", err)
	}
	c, err = loadConfig(envOf(nil), needs{})
	if err != nil || c.Vault.Keyring != nil || c.Vault.RefreshSkew != 2*time.Minute || len(c.Vault.Providers.Providers) != 0 ||
		c.Vault.ProxyAnswerTimeout != 15*time.Second {
		t.Fatalf("defaults: %+v %v", c.Vault, err)
	}
}

func TestVaultConfigErrors(t *testing.T) {
	t.Parallel()
	l1, l2 := genKey(t, 1), genKey(t, 2)
	_, key1, _ := strings.Cut(l1, ":")
	badProviders := writeFile(t, "bad.json", `{"providers":[{"name":"x","kind":"oauth2","client_id":"c","client_secret_env":"S","authorize_url":"javascript:alert(1)","token_url":"https://a.example/t"}]}`)
	httpProviders := writeFile(t, "http.json", `{"providers":[{"name":"gl","template":"gitlab","base_url":"http://gitlab.internal","client_id":"c","client_secret_env":"S"}]}`)
	inline := writeFile(t, "inline.json", `{"providers":[{"name":"gh","template":"github","client_id":"c","client_secret":"hunter2-hunter2"}]}`)
	tests := []struct {
		name    string
		env     map[string]string
		wantVar string
		wantMsg string
	}{
		{"keys and file", map[string]string{"CONNECTD_VAULT_KEYS": l1, "CONNECTD_VAULT_KEYS_FILE": "/k"}, "CONNECTD_VAULT_KEYS_FILE", "not both"},
		{"keys file missing", map[string]string{"CONNECTD_VAULT_KEYS_FILE": "/nonexistent/keys"}, "CONNECTD_VAULT_KEYS_FILE", "no such file"},
		{"key not base64", map[string]string{"CONNECTD_VAULT_KEYS": "1:" + strings.Repeat("#", 44)}, "CONNECTD_VAULT_KEYS", "entry 1 (version 1): key must be 32 bytes"},
		{"key too short", map[string]string{"CONNECTD_VAULT_KEYS": "1:" + key1[:20]}, "CONNECTD_VAULT_KEYS", "key must be 32 bytes"},
		{"no primary", map[string]string{"CONNECTD_VAULT_KEYS": l1 + "," + l2}, "CONNECTD_VAULT_KEYS", "none marked primary"},
		{"two primaries", map[string]string{"CONNECTD_VAULT_KEYS": "*" + l1 + ",*" + l2}, "CONNECTD_VAULT_KEYS", "marked primary"},
		{"bad key in file", map[string]string{"CONNECTD_VAULT_KEYS_FILE": writeFile(t, "k", "*"+l1+"\n2:"+key1[:30]+"\n")}, "CONNECTD_VAULT_KEYS_FILE", "entry 2"},
		{"providers file missing", map[string]string{"CONNECTD_PROVIDERS_FILE": "/nonexistent/p.json"}, "CONNECTD_PROVIDERS_FILE", "no such file"},
		{"providers javascript URL", map[string]string{"CONNECTD_PROVIDERS_FILE": badProviders, "S": "x"}, "CONNECTD_PROVIDERS_FILE", `providers[0] (x): authorize_url: scheme "javascript" is not allowed`},
		{"providers http outside dev", map[string]string{"CONNECTD_PROVIDERS_FILE": httpProviders, "S": "x"}, "CONNECTD_PROVIDERS_FILE", "providers[0] (gl): base_url: must use https"},
		{"providers inline secret", map[string]string{"CONNECTD_PROVIDERS_FILE": inline}, "CONNECTD_PROVIDERS_FILE", "client_secret: must not be given inline"},
		{"providers secret env unset", map[string]string{"CONNECTD_PROVIDERS_FILE": badProviders}, "CONNECTD_PROVIDERS_FILE", "client_secret_env: environment variable S is not set"},
		{"skew not a duration", map[string]string{"CONNECTD_REFRESH_SKEW": "soon"}, "CONNECTD_REFRESH_SKEW", "duration"},
		{"skew too long", map[string]string{"CONNECTD_REFRESH_SKEW": "2h"}, "CONNECTD_REFRESH_SKEW", "between"},
		{"proxy answer timeout too short", map[string]string{"CONNECTD_PROXY_ANSWER_TIMEOUT": "0s"}, "CONNECTD_PROXY_ANSWER_TIMEOUT", "between"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadConfig(envOf(tt.env), needs{providers: true})
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Var != tt.wantVar || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("got %v, want %s and %q", err, tt.wantVar, tt.wantMsg)
			}
			for _, secret := range []string{key1[:12], strings.Repeat("#", 12), "hunter2"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("message echoes a secret: %q", err)
				}
			}
			if strings.Contains(err.Error(), "\n") || exitCode(err) != 2 {
				t.Fatalf("message %q, exit %d", err, exitCode(err))
			}
		})
	}
}

// TestCommandsWithoutProviderSecrets (issue 38 item 5): a command that
// calls no provider reads the providers file for its names and form only:
// it runs in a shell without the providers' secrets (the demo's `vault
// status`, `admin connections list` failed on one), the configuration it
// gets holds no secret, and no catalog can be built of it. A malformed file
// is still refused; a command that calls providers still needs the secret.
func TestCommandsWithoutProviderSecrets(t *testing.T) {
	t.Parallel()
	providers := writeFile(t, "providers.json", `{"providers":[
		{"name":"github","template":"github","client_id_env":"GITHUB_ID","client_secret_env":"GITHUB_SECRET"},
		{"name":"files","template":"github","client_id":"x","client_secret_file":"/nonexistent/secret"}]}`)
	c, err := loadConfig(envOf(map[string]string{"CONNECTD_PROVIDERS_FILE": providers}), needs{db: false})
	if err != nil {
		t.Fatalf("a command that calls no provider: %v", err)
	}
	if pc := c.Vault.Providers; len(pc.Providers) != 2 || pc.Providers[0].Name != "github" || pc.Providers[0].ClientSecret != "" ||
		pc.Providers[1].ClientSecret != "" || !pc.NoSecrets {
		t.Fatalf("providers read without secrets: %+v", pc)
	}
	if _, err := server.NewCatalog(context.Background(), c.server(nil, slog.New(slog.DiscardHandler))); !errors.Is(err, provider.ErrNoSecrets) {
		t.Fatalf("a catalog of a file read without secrets: %v", err)
	}
	_, err = loadConfig(envOf(map[string]string{"CONNECTD_PROVIDERS_FILE": providers}), needs{providers: true})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Var != "CONNECTD_PROVIDERS_FILE" || !strings.Contains(err.Error(), "GITHUB_ID") {
		t.Fatalf("a command that calls providers, without their secrets: %v", err)
	}
	bad := writeFile(t, "bad.json", `{"providers":[{"name":"x","kind":"oauth2","client_id":"c","client_secret_env":"S","authorize_url":"javascript:alert(1)","token_url":"https://a.example/t"}]}`)
	if _, err := loadConfig(envOf(map[string]string{"CONNECTD_PROVIDERS_FILE": bad}), needs{}); err == nil {
		t.Fatal("a malformed providers file passed a command that calls no provider")
	}
}
