package provider_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/provider"
)

// TestAPIBaseURL: api_base_url comes from the template with its
// placeholders filled like the other URLs (from values that passed the host
// rules), can be overridden or removed by the entry, and loses a trailing
// slash.
func TestAPIBaseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		entry map[string]any
		want  string
	}{
		{"github template", map[string]any{"template": "github"}, "https://api.github.com"},
		{"gitlab.com by default", map[string]any{"template": "gitlab"}, "https://gitlab.com/api/v4"},
		{"gitlab self-managed with a path prefix", map[string]any{"template": "gitlab", "base_url": "https://GitLab.example.com:8443/gitlab/"},
			"https://gitlab.example.com:8443/gitlab/api/v4"},
		{"zendesk subdomain", map[string]any{"template": "zendesk", "subdomain": "Acme"}, "https://acme.zendesk.com/api/v2"},
		{"shopify subdomain", map[string]any{"template": "shopify", "subdomain": "my-shop"}, "https://my-shop.myshopify.com/admin/api"},
		{"gmail", map[string]any{"template": "gmail"}, "https://gmail.googleapis.com"},
		{"google calendar", map[string]any{"template": "google-calendar"}, "https://www.googleapis.com/calendar/v3"},
		{"google drive", map[string]any{"template": "google-drive"}, "https://www.googleapis.com/drive/v3"},
		{"microsoft, any tenant", map[string]any{"template": "microsoft", "tenant": "contoso.onmicrosoft.com"}, "https://graph.microsoft.com"},
		{"slack", map[string]any{"template": "slack"}, "https://slack.com/api"},
		{"template without one", map[string]any{"template": "salesforce"}, ""},
		{"entry overrides", map[string]any{"template": "github", "api_base_url": "https://ghe.example.com/api/v3/"}, "https://ghe.example.com/api/v3"},
		{"entry removes", map[string]any{"template": "github", "api_base_url": ""}, ""},
		{"entry's own placeholder", map[string]any{"template": "gitlab", "base_url": "https://gitlab.example.com", "api_base_url": "{base_url}/api/v5"},
			"https://gitlab.example.com/api/v5"},
		{"generic", map[string]any{"kind": "oauth2", "authorize_url": "https://a.example/auth", "token_url": "https://a.example/token",
			"api_base_url": "https://api.a.example/v1"}, "https://api.a.example/v1"},
		{"generic without", map[string]any{"kind": "oauth2", "authorize_url": "https://a.example/auth", "token_url": "https://a.example/token"}, ""},
		{"api_key template", map[string]any{"template": "openai"}, "https://api.openai.com/v1"},
		{"api_key entry", map[string]any{"kind": "api_key", "api_base_url": "https://api.k.example/"}, "https://api.k.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := parseEntries(t, false, withClient(tt.entry))
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Providers[0].APIBaseURL; got != tt.want {
				t.Fatalf("APIBaseURL %q, want %q", got, tt.want)
			}
			p, err := provider.NewProvider(context.Background(), cfg.Providers[0], false, provider.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Info().APIBaseURL; got != tt.want {
				t.Fatalf("Info().APIBaseURL %q, want %q", got, tt.want)
			}
		})
	}
}

// TestAPIConfigRefusals: api_base_url passes the URL rule of every provider
// URL and names a place a request path can go under; api_auth_* name a
// header and where the token goes in it. Each refusal names the entry and
// the field, and never repeats a rejected host.
func TestAPIConfigRefusals(t *testing.T) {
	t.Parallel()
	oauth := func(extra map[string]any) map[string]any {
		e := map[string]any{"name": "p", "template": "github", "client_id": "c", "client_secret_env": "S"}
		for k, v := range extra {
			e[k] = v
		}
		return e
	}
	tests := []struct {
		name  string
		entry map[string]any
		dev   bool
		field string
		msg   string
	}{
		{"http outside dev", oauth(map[string]any{"api_base_url": "http://api.example.com"}), false, "api_base_url", "must use https"},
		{"file scheme in dev", oauth(map[string]any{"api_base_url": "file:///etc"}), true, "api_base_url", `scheme "file"`},
		{"javascript", oauth(map[string]any{"api_base_url": "javascript:alert(1)"}), false, "api_base_url", `scheme "javascript"`},
		{"relative", oauth(map[string]any{"api_base_url": "/api"}), false, "api_base_url", "absolute"},
		{"user info", oauth(map[string]any{"api_base_url": "https://u:p@api.example.com"}), false, "api_base_url", "user info"},
		{"query", oauth(map[string]any{"api_base_url": "https://api.example.com/v1?key=x"}), false, "api_base_url", "must not contain a query"},
		{"empty query", oauth(map[string]any{"api_base_url": "https://api.example.com/v1?"}), false, "api_base_url", "must not contain a query"},
		{"fragment", oauth(map[string]any{"api_base_url": "https://api.example.com/v1#x"}), false, "api_base_url", "fragment"},
		{"dot-dot segment", oauth(map[string]any{"api_base_url": "https://api.example.com/v1/../admin"}), false, "api_base_url", `".." path segment`},
		{"no host", oauth(map[string]any{"api_base_url": "https:///v1"}), false, "api_base_url", "host"},
		{"placeholder the template cannot fill", oauth(map[string]any{"api_base_url": "https://{subdomain}.example.com"}), false, "api_base_url", "needs subdomain"},
		{"api_key placeholder", map[string]any{"name": "p", "kind": "api_key", "api_base_url": "{base_url}/v1"}, false, "api_base_url", "placeholder"},
		{"api_key query", map[string]any{"name": "p", "template": "openai", "api_base_url": "https://api.openai.com/v1?x"}, false, "api_base_url", "query"},
		// Per-customer hosts: the value that fills the API base is refused
		// by the host rules first, under its own field.
		{"okta host outside the pattern", map[string]any{"name": "p", "template": "okta", "client_id": "c", "client_secret_env": "S",
			"base_url": "https://evil.example"}, false, "base_url", "host must match"},
		{"zendesk subdomain with a dot", map[string]any{"name": "p", "template": "zendesk", "client_id": "c", "client_secret_env": "S",
			"subdomain": "evil.example"}, false, "subdomain", "one hostname label"},
		{"gitlab base_url with a query", map[string]any{"name": "p", "template": "gitlab", "client_id": "c", "client_secret_env": "S",
			"base_url": "https://gitlab.evil.example?x=1"}, false, "base_url", "query"},
		{"zendesk without a subdomain", map[string]any{"name": "p", "template": "zendesk", "client_id": "c", "client_secret_env": "S"},
			false, "authorize_url", "needs subdomain"},
		// api_auth_*
		{"auth header not a name", oauth(map[string]any{"api_auth_header": "X Token"}), false, "api_auth_header", "header name"},
		{"auth header Host", oauth(map[string]any{"api_auth_header": "host"}), false, "api_auth_header", "frames the message"},
		{"auth header Content-Length", oauth(map[string]any{"api_auth_header": "Content-Length"}), false, "api_auth_header", "frames the message"},
		{"auth value without token", oauth(map[string]any{"api_auth_value": "Bearer"}), false, "api_auth_value", "{token} exactly once"},
		{"auth value twice", oauth(map[string]any{"api_auth_value": "{token} {token_base64}"}), false, "api_auth_value", "exactly once"},
		{"auth value two lines", oauth(map[string]any{"api_auth_value": "Bearer {token}\r\nX-Evil: 1"}), false, "api_auth_value", "one line"},
		{"api_key auth value", map[string]any{"name": "p", "kind": "api_key", "api_auth_value": "Token {key}"}, false, "api_auth_value", "{token}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseEntries(t, tt.dev, tt.entry)
			var ce *provider.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *provider.ConfigError", err)
			}
			if ce.Field != tt.field || ce.Index != 0 || ce.Provider != "p" || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("got %q (entry %d %q, field %q), want providers[0] (p), field %q and %q", err, ce.Index, ce.Provider, ce.Field, tt.field, tt.msg)
			}
			if !strings.HasPrefix(err.Error(), "providers[0] (p): "+tt.field+": ") {
				t.Fatalf("message %q does not name the entry and field", err)
			}
			if strings.Contains(err.Error(), "evil") {
				t.Fatalf("the refusal repeats the value: %v", err)
			}
		})
	}
}

// TestInfoAPIAuth: Info says how the proxy attaches the credential: a
// Bearer token unless the template says otherwise; an API key where its
// verification request puts it (a placeholder of its own, never the key).
func TestInfoAPIAuth(t *testing.T) {
	t.Parallel()
	bearer := provider.APIAuth{Header: "Authorization", Value: "Bearer {token}"}
	tests := []struct {
		name  string
		entry map[string]any
		want  provider.APIAuth
		// what HeaderValue("tok:en") gives
		header string
	}{
		{"github", map[string]any{"template": "github"}, bearer, "Bearer tok:en"},
		{"microsoft", map[string]any{"template": "microsoft"}, bearer, "Bearer tok:en"},
		{"gitlab self-managed", map[string]any{"template": "gitlab", "base_url": "https://gitlab.example.com"}, bearer, "Bearer tok:en"},
		{"shopify", map[string]any{"template": "shopify", "subdomain": "shop"},
			provider.APIAuth{Header: "X-Shopify-Access-Token", Value: "{token}"}, "tok:en"},
		{"monday", map[string]any{"template": "monday"}, provider.APIAuth{Header: "Authorization", Value: "{token}"}, "tok:en"},
		{"entry's value, default header", map[string]any{"template": "github", "api_auth_value": "token {token}"},
			provider.APIAuth{Header: "Authorization", Value: "token {token}"}, "token tok:en"},
		{"entry's header, default value", map[string]any{"template": "github", "api_auth_header": "X-Token"},
			provider.APIAuth{Header: "X-Token", Value: "{token}"}, "tok:en"},
		{"entry's header over the template's value", map[string]any{"template": "shopify", "subdomain": "shop", "api_auth_header": "X-Other"},
			provider.APIAuth{Header: "X-Other", Value: "{token}"}, "tok:en"},
		{"openai key", map[string]any{"template": "openai"}, bearer, "Bearer tok:en"},
		{"anthropic key", map[string]any{"template": "anthropic"}, provider.APIAuth{Header: "x-api-key", Value: "{token}"}, "tok:en"},
		{"pagerduty key", map[string]any{"template": "pagerduty"},
			provider.APIAuth{Header: "Authorization", Value: "Token token={token}"}, "Token token=tok:en"},
		{"twilio key, Basic", map[string]any{"template": "twilio"},
			provider.APIAuth{Header: "Authorization", Value: "Basic {token_base64}"}, "Basic " + base64.StdEncoding.EncodeToString([]byte("tok:en"))},
		{"key verified by the entry", map[string]any{"kind": "api_key", "verify": map[string]any{"url": "https://api.k.example/me", "header": "X-Key"}},
			provider.APIAuth{Header: "X-Key", Value: "{token}"}, "tok:en"},
		{"key without verification", map[string]any{"kind": "api_key"}, bearer, "Bearer tok:en"},
		{"key with the entry's own", map[string]any{"template": "anthropic", "api_auth_header": "Authorization", "api_auth_value": "Bearer {token}"},
			bearer, "Bearer tok:en"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := parseEntries(t, false, withClient(tt.entry))
			if err != nil {
				t.Fatal(err)
			}
			p, err := provider.NewProvider(context.Background(), cfg.Providers[0], false, provider.Options{})
			if err != nil {
				t.Fatal(err)
			}
			info := p.Info()
			if info.APIAuth != tt.want {
				t.Fatalf("APIAuth %+v, want %+v", info.APIAuth, tt.want)
			}
			if got := info.APIAuth.HeaderValue("tok:en"); got != tt.header {
				t.Fatalf("HeaderValue %q, want %q", got, tt.header)
			}
		})
	}
}

// TestInfoAPIAuthForSpecsInCode: a Spec built in code, not parsed, gets the
// same defaults.
func TestInfoAPIAuthForSpecsInCode(t *testing.T) {
	t.Parallel()
	o, err := provider.NewProvider(context.Background(), provider.Spec{Name: "o", Kind: provider.KindOAuth2,
		AuthorizeURL: "https://a.example/auth", TokenURL: "https://a.example/token", APIBaseURL: "https://api.a.example"}, false, provider.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if i := o.Info(); i.APIBaseURL != "https://api.a.example" || i.APIAuth.HeaderValue("t") != "Bearer t" {
		t.Fatalf("oauth2 in code: %+v", i)
	}
	k, err := provider.NewProvider(context.Background(), provider.Spec{Name: "k", Kind: provider.KindAPIKey,
		Verify: &provider.VerifySpec{Method: "GET", URL: "https://api.k.example/me", Header: "X-Key", Value: "Key {key}", ExpectStatus: 200}},
		false, provider.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if i := k.Info(); i.APIBaseURL != "" || i.APIAuth != (provider.APIAuth{Header: "X-Key", Value: "Key {token}"}) {
		t.Fatalf("api_key in code: %+v", i)
	}
}

// withClient names the entry "p" and gives it client credentials when it
// is an oauth2 entry (of its kind or its template's).
func withClient(e map[string]any) map[string]any {
	e["name"] = "p"
	kind, _ := e["kind"].(string)
	if name, ok := e["template"].(string); ok {
		tpl, _ := provider.Template(name)
		kind = string(tpl.Kind)
	}
	if kind == string(provider.KindOAuth2) {
		e["client_id"], e["client_secret_env"] = "c", "S"
	}
	return e
}
