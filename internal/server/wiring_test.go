package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/vault"
)

// TestEgressClientSelf: in dev mode connectd reaches its own listener (the
// dev IdP) at the public URL's host:port, whatever port it listens on.
func TestEgressClientSelf(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Host) }))
	t.Cleanup(srv.Close)
	cfg := Config{Dev: true, PublicURL: &url.URL{Scheme: "http", Host: "localhost:8080"}}
	c, err := outboundClient(cfg, srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://localhost:8080/dev/idp/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "localhost:8080" {
		t.Fatalf("reached %q", body)
	}
	// Only that host:port: another loopback port stays refused.
	if _, err := c.Get("http://localhost:9999/"); !errors.Is(err, egress.ErrInsecureScheme) {
		t.Fatalf("other port: %v", err)
	}
	if _, err := c.Get("https://127.0.0.1:9999/"); !errors.Is(err, egress.ErrBlockedAddress) {
		t.Fatalf("other port over https: %v", err)
	}

	prod := Config{PublicURL: &url.URL{Scheme: "https", Host: "connect.example.com"}}
	if _, err := outboundClient(prod, "127.0.0.1:8080"); err == nil {
		t.Fatal("reaching its own listener outside dev mode was allowed")
	}
}

func TestLoopbackAddr(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		":8080":          "127.0.0.1:8080",
		"0.0.0.0:8080":   "127.0.0.1:8080",
		"[::]:8080":      "127.0.0.1:8080",
		"127.0.0.1:8080": "127.0.0.1:8080",
		"[::1]:8080":     "[::1]:8080",
	} {
		if got := loopbackAddr(in); got != want {
			t.Errorf("loopbackAddr(%q) = %q, want %q", in, got, want)
		}
	}
	for _, tt := range [][3]string{
		{"http", "localhost", "localhost:80"},
		{"https", "connect.example.com", "connect.example.com:443"},
		{"http", "127.0.0.1:8080", "127.0.0.1:8080"},
		{"http", "[::1]", "[::1]:80"},
	} {
		if got := publicHostPort(tt[0], tt[1]); got != tt[2] {
			t.Errorf("publicHostPort(%q, %q) = %q, want %q", tt[0], tt[1], got, tt[2])
		}
	}
}

func TestServeKeyringRequirement(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	ctx := context.Background()

	if _, err := keyring(ctx, Config{Logger: logger}); err == nil || !strings.Contains(err.Error(), "CONNECTD_VAULT_KEYS: is required") {
		t.Fatalf("outside dev without keys: %v", err)
	}
	k, err := keyring(ctx, Config{Dev: true, Logger: logger})
	if err != nil || k == nil || !strings.Contains(logs.String(), "EPHEMERAL") {
		t.Fatalf("dev without keys: %v, logs %s", err, logs.String())
	}
	line, err := vault.GenerateKey(4)
	if err != nil {
		t.Fatal(err)
	}
	configured, err := vault.ParseKeyring(line)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := keyring(ctx, Config{Logger: logger, Vault: VaultConfig{Keyring: configured}}); err != nil || k.Primary() != 4 {
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
