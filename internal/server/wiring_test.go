package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/keyring"
)

func TestServeKeyringRequirement(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	ctx := context.Background()

	if _, err := loadKeyring(ctx, Config{Logger: logger}); err == nil || !strings.Contains(err.Error(), "CONNECTD_VAULT_KEYS: is required") {
		t.Fatalf("outside dev without keys: %v", err)
	}
	k, err := loadKeyring(ctx, Config{Dev: true, Logger: logger})
	if err != nil || k == nil || !strings.Contains(logs.String(), "EPHEMERAL") {
		t.Fatalf("dev without keys: %v, logs %s", err, logs.String())
	}
	line, err := keyring.GenerateKey(4)
	if err != nil {
		t.Fatal(err)
	}
	configured, err := keyring.Parse(line)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := loadKeyring(ctx, Config{Logger: logger, Vault: VaultConfig{Keyring: configured}}); err != nil || k.Primary() != 4 {
		t.Fatalf("configured: %v", err)
	}
}

// TestWebhooksUseEgress: webhook deliveries go out through the egress
// client: an endpoint on a loopback address is refused before a packet is
// sent (over https in production; over http in dev mode unless its host is
// allow-listed), so a registered endpoint is never an SSRF path.
func TestWebhooksUseEgress(t *testing.T) {
	t.Parallel()
	hits := 0
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	t.Cleanup(plain.Close)
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	t.Cleanup(tls.Close)
	post := func(cfg Config, u string) error {
		t.Helper()
		cfg.Logger = slog.New(slog.DiscardHandler)
		wc, err := webhookConfig(cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := wc.HTTPClient.Post(u, "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := post(Config{}, tls.URL); !errors.Is(err, egress.ErrBlockedAddress) {
		t.Fatalf("https loopback endpoint: %v", err)
	}
	if err := post(Config{Dev: true}, plain.URL); !errors.Is(err, egress.ErrInsecureScheme) {
		t.Fatalf("http endpoint in dev mode, not allow-listed: %v", err)
	}
	if hits != 0 {
		t.Fatalf("%d requests reached a refused endpoint", hits)
	}
	allowed := Config{Dev: true, Egress: EgressConfig{AllowHosts: []string{strings.TrimPrefix(plain.URL, "http://")}}}
	if err := post(allowed, plain.URL); err != nil || hits != 1 {
		t.Fatalf("allow-listed dev endpoint: %v (%d hits)", err, hits)
	}
}
