package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/server"
)

func TestEgressConfig(t *testing.T) {
	t.Parallel()
	const name = "CONNECTD_EGRESS_ALLOW_HOSTS"
	for _, tt := range []struct {
		test    string
		env     map[string]string
		want    []string
		wantErr bool
	}{
		{"unset", nil, nil, false},
		{"dev", map[string]string{"CONNECTD_DEV": "true", name: " 127.0.0.1:8081, localhost:9000,,[::1]:9001 "},
			[]string{"127.0.0.1:8081", "localhost:9000", "[::1]:9001"}, false},
		{"outside dev", map[string]string{name: "idp.test:8081"}, nil, true},
		{"outside dev, explicitly", map[string]string{"CONNECTD_DEV": "false", name: "idp.test:8081"}, nil, true},
		{"no port", map[string]string{"CONNECTD_DEV": "true", name: "idp.test"}, nil, true},
		{"URL", map[string]string{"CONNECTD_DEV": "true", name: "http://idp.test:8081"}, nil, true},
		{"bad port", map[string]string{"CONNECTD_DEV": "true", name: "127.0.0.1:8081,idp.test:0"}, nil, true},
	} {
		t.Run(tt.test, func(t *testing.T) {
			c, err := loadConfig(envOf(tt.env), needs{})
			if tt.wantErr {
				var ce *ConfigError
				if !errors.As(err, &ce) || ce.Var != name {
					t.Fatalf("want a ConfigError for %s, got %v", name, err)
				}
				if strings.Contains(err.Error(), "idp.test") {
					t.Fatalf("error repeats the value: %v", err)
				}
				return
			}
			if err != nil || !slices.Equal(c.Egress.AllowHosts, tt.want) {
				t.Fatalf("got %q, %v", c.Egress.AllowHosts, err)
			}
		})
	}
}

// TestCatalogUsesEgress: provider calls go through the egress client, so a
// loopback http provider is unreachable unless the dev allow-list names it.
func TestCatalogUsesEgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := providertest.New(t, providertest.Options{})
	data, err := json.Marshal(map[string]any{"providers": []any{srv.ProviderConfig("fake", "FAKE_SECRET")}})
	if err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, "p.json", string(data))
	catalog := func(allow string) provider.OAuth {
		t.Helper()
		cfg, err := loadConfig(envOf(map[string]string{
			"CONNECTD_DEV": "true", "CONNECTD_PROVIDERS_FILE": file, "FAKE_SECRET": srv.ClientSecret,
			"CONNECTD_EGRESS_ALLOW_HOSTS": allow,
		}), needs{})
		if err != nil {
			t.Fatal(err)
		}
		cat, err := server.NewCatalog(ctx, cfg.server(nil, slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		p, err := cat.OAuth("fake")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	_, err = catalog("").Refresh(ctx, "rt-unknown")
	if !errors.Is(err, egress.ErrInsecureScheme) || !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("without the allow-list: %v", err)
	}
	if n := srv.Counts().Refresh; n != 0 {
		t.Fatalf("%d refresh request(s) reached the provider", n)
	}
	_, err = catalog(strings.TrimPrefix(srv.URL(), "http://")).Refresh(ctx, "rt-unknown")
	if !errors.Is(err, provider.ErrInvalidGrant) || srv.Counts().Refresh != 1 {
		t.Fatalf("with the allow-list: %v (refreshes %d)", err, srv.Counts().Refresh)
	}
}

// TestIdentityUsesEgress: the verifier's discovery and JWKS fetches (and so
// the logins built on it) go through the egress client too, so a loopback
// http issuer is unreachable unless the dev allow-list names it.
func TestIdentityUsesEgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	idp, err := devidp.New(devidp.Config{Issuer: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/", idp.Handler())
	const resource = "https://files.mcp.example/"
	tok, err := idp.AccessToken("alice", resource)
	if err != nil {
		t.Fatal(err)
	}
	issuers, _ := json.Marshal([]map[string]any{{"id": "t", "issuer": srv.URL}})
	verify := func(allow string) error {
		t.Helper()
		cfg, err := loadConfig(envOf(map[string]string{"CONNECTD_DEV": "true", "CONNECTD_DEV_IDP": "false", "CONNECTD_PUBLIC_URL": "http://localhost:8080",
			"CONNECTD_ISSUERS": string(issuers), "CONNECTD_EGRESS_ALLOW_HOSTS": allow}), needs{})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := server.New(ctx, cfg.server(pgtest.Pool(t), slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		_, err = srv.Verifier().VerifyAccessToken(ctx, tok, []string{resource})
		return err
	}
	if err := verify(""); !errors.Is(err, mcpauth.ErrIssuerUnavailable) {
		t.Fatalf("without the allow-list the issuer was reached: %v", err)
	}
	if err := verify(strings.TrimPrefix(srv.URL, "http://")); err != nil {
		t.Fatalf("with the allow-list: %v", err)
	}
}
