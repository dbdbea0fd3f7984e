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
		}), needs{providers: true})
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

// TestEgressProxyConfig: CONNECTD_EGRESS_PROXY for every class, a class's
// own variable overriding it (none: direct), the separate credential for
// the URLs that carry none; a bad value is refused at start-up naming the
// variable and never repeating the value (it may hold a password).
func TestEgressProxyConfig(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(envOf(map[string]string{
		"CONNECTD_EGRESS_PROXY":          "http://proxy.internal:3128",
		"CONNECTD_EGRESS_PROXY_REFRESH":  "https://own:pw@refresh-proxy.internal",
		"CONNECTD_EGRESS_PROXY_WEBHOOKS": "none",
		"CONNECTD_EGRESS_PROXY_USER":     "connectd",
		"CONNECTD_EGRESS_PROXY_PASSWORD": "s3cret",
	}), needs{})
	if err != nil {
		t.Fatal(err)
	}
	ps := c.Egress.Proxies
	for _, tt := range []struct {
		class    egress.Class
		want     string
		withCred bool
	}{
		{egress.ClassDefault, "http://proxy.internal:3128", true},
		{egress.ClassToken, "http://proxy.internal:3128", true},
		{egress.ClassRevoke, "http://proxy.internal:3128", true},
		{egress.ClassAPI, "http://proxy.internal:3128", true},
		{egress.ClassRefresh, "https://refresh-proxy.internal:443", true},
		{egress.ClassWebhooks, "direct", false},
	} {
		if p := ps.For(tt.class); p.String() != tt.want || p.HasCredential() != tt.withCred {
			t.Errorf("class %q: %s (credential %v), want %s (%v)", tt.class, p, p.HasCredential(), tt.want, tt.withCred)
		}
	}
	if c, err := loadConfig(envOf(nil), needs{}); err != nil || c.Egress.Proxies.For(egress.ClassToken) != nil {
		t.Fatalf("unset: %v %v", c.Egress.Proxies, err)
	}

	for _, tt := range []struct {
		test, name, value string
		env               map[string]string
	}{
		{"not a URL", "CONNECTD_EGRESS_PROXY", "proxy.internal:3128", nil},
		{"socks", "CONNECTD_EGRESS_PROXY", "socks5://u:pw-leak@proxy.internal:1080", nil},
		{"path", "CONNECTD_EGRESS_PROXY_TOKEN", "http://u:pw-leak@proxy.internal:3128/x", nil},
		{"bad port", "CONNECTD_EGRESS_PROXY_REFRESH", "http://u:pw-leak@proxy.internal:99999", nil},
		{"no host", "CONNECTD_EGRESS_PROXY_REVOKE", "https://u:pw-leak@", nil},
		{"unparsable", "CONNECTD_EGRESS_PROXY_API", "http://u:pw-leak@proxy%zz", nil},
		{"query", "CONNECTD_EGRESS_PROXY_WEBHOOKS", "http://proxy.internal:3128?pw-leak", nil},
		{"password without user", "CONNECTD_EGRESS_PROXY_USER", "",
			map[string]string{"CONNECTD_EGRESS_PROXY": "http://proxy.internal:3128", "CONNECTD_EGRESS_PROXY_PASSWORD": "pw-leak"}},
		{"user without proxy", "CONNECTD_EGRESS_PROXY_USER", "u",
			map[string]string{"CONNECTD_EGRESS_PROXY_PASSWORD": "pw-leak"}},
	} {
		t.Run(tt.test, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range tt.env {
				env[k] = v
			}
			if tt.value != "" {
				env[tt.name] = tt.value
			}
			_, err := loadConfig(envOf(env), needs{})
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Var != tt.name {
				t.Fatalf("want a ConfigError for %s, got %v", tt.name, err)
			}
			if strings.Contains(err.Error(), "pw-leak") || strings.Contains(err.Error(), "proxy.internal") {
				t.Fatalf("error repeats the value: %v", err)
			}
		})
	}
}
