package provider_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/provider/providertest"
)

// templateEntry is the smallest providers-file entry that uses template
// name: client credentials for oauth2, and a sample per-customer value where
// the template needs one.
func templateEntry(name string, spec provider.Spec) map[string]any {
	e := map[string]any{"name": "p", "template": name}
	if spec.Kind == provider.KindAPIKey {
		return e
	}
	e["client_id"], e["client_secret_env"] = "cid", "S"
	if len(spec.BaseURLHosts) > 0 {
		e["base_url"] = "https://" + strings.ReplaceAll(spec.BaseURLHosts[len(spec.BaseURLHosts)-1], "*", "acme")
	}
	if strings.Contains(spec.AuthorizeURL+spec.TokenURL, "{subdomain}") {
		e["subdomain"] = "acme"
	}
	return e
}

func parseEntries(t *testing.T, dev bool, entries ...map[string]any) (*provider.Config, error) {
	t.Helper()
	return provider.ParseConfig(mustJSON(t, map[string]any{"providers": entries}),
		provider.ParseOptions{Dev: dev, Getenv: func(string) string { return "s" }})
}

// TestBuiltinTemplates loads and validates every template of the catalog:
// it names the documentation it follows, resolves with client credentials
// (and a sample subdomain or instance URL) into https endpoints, builds an
// authorize URL carrying state, the exact redirect URI, the PKCE S256
// challenge, the template's scope separator and extra parameters; an API-key
// template has an https verification request and an anchored key pattern.
func TestBuiltinTemplates(t *testing.T) {
	t.Parallel()
	var oauth, apiKey int
	for _, name := range provider.Templates() {
		spec, _ := provider.Template(name)
		switch spec.Kind {
		case provider.KindOAuth2:
			oauth++
		case provider.KindAPIKey:
			apiKey++
		}
	}
	if oauth < 40 || apiKey < 10 {
		t.Fatalf("%d oauth2 and %d api_key templates, want at least 40 and 10", oauth, apiKey)
	}
	label := regexp.MustCompile(`^(\*|[a-z0-9]([a-z0-9-]*[a-z0-9])?)$`)
	for _, name := range provider.Templates() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			spec, _ := provider.Template(name)
			if d, err := url.Parse(spec.Docs); err != nil || d.Scheme != "https" || d.Host == "" || spec.DisplayName == "" {
				t.Fatalf("docs %q (%v), display name %q", spec.Docs, err, spec.DisplayName)
			}
			for _, p := range spec.BaseURLHosts {
				for l := range strings.SplitSeq(p, ".") {
					if !label.MatchString(l) {
						t.Fatalf("host pattern %q: label %q", p, l)
					}
				}
			}
			for _, u := range []string{spec.AuthorizeURL, spec.TokenURL, spec.RevocationURL, spec.AccountURL, spec.APIBaseURL} {
				if strings.Contains(u, "{subdomain}") && !strings.HasPrefix(u, "https://{subdomain}.") {
					t.Fatalf("{subdomain} must be the first label of an https host: %s", u)
				}
			}
			cfg, err := parseEntries(t, false, templateEntry(name, spec))
			if err != nil {
				t.Fatal(err)
			}
			p, err := provider.NewProvider(context.Background(), cfg.Providers[0], false, provider.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.Providers[0]
			checkAPI(t, spec, got, p)
			if spec.Kind == provider.KindAPIKey {
				checkAPIKeyTemplate(t, got, p)
				return
			}
			checkOAuthTemplate(t, got, p.(provider.OAuth))
		})
	}
}

// checkAPI: a template's API base resolves to an https URL without a
// placeholder, query or trailing slash, which Info repeats; the credential
// goes in a header, at exactly one placeholder.
func checkAPI(t *testing.T, tpl, spec provider.Spec, p provider.Provider) {
	t.Helper()
	info := p.Info()
	if (tpl.APIBaseURL == "") != (spec.APIBaseURL == "") || info.APIBaseURL != spec.APIBaseURL {
		t.Fatalf("API base %q resolved to %q, Info %q", tpl.APIBaseURL, spec.APIBaseURL, info.APIBaseURL)
	}
	if u := spec.APIBaseURL; u != "" {
		if strings.ContainsAny(u, "{}?#") || strings.HasSuffix(u, "/") || egress.CheckURL(u, false) != nil {
			t.Fatalf("API base %q", u)
		}
	}
	a := info.APIAuth
	if a.Header == "" || strings.Count(a.Value, provider.TokenPlaceholder)+strings.Count(a.Value, provider.TokenBase64Placeholder) != 1 {
		t.Fatalf("APIAuth %+v", a)
	}
}

func checkAPIKeyTemplate(t *testing.T, spec provider.Spec, p provider.Provider) {
	t.Helper()
	if spec.Verify == nil || !p.Info().Verifiable || !strings.HasPrefix(spec.Verify.URL, "https://") {
		t.Fatalf("verification %+v", spec.Verify)
	}
	if spec.KeyPattern != "" && (!strings.HasPrefix(spec.KeyPattern, "^") || !strings.HasSuffix(spec.KeyPattern, "$")) {
		t.Fatalf("key pattern %q is not anchored", spec.KeyPattern)
	}
}

func checkOAuthTemplate(t *testing.T, spec provider.Spec, o provider.OAuth) {
	t.Helper()
	if !slices.Contains([]string{"required", "supported", "ignored", "unverified"}, spec.PKCESupport) {
		t.Fatalf("PKCESupport %q", spec.PKCESupport)
	}
	for _, u := range []string{spec.Issuer, spec.AuthorizeURL, spec.TokenURL, spec.RevocationURL} {
		if u != "" && (strings.Contains(u, "{") || egress.CheckURL(u, false) != nil) {
			t.Fatalf("endpoint %q", u)
		}
	}
	if spec.Revocation != provider.RevokeNone && spec.RevocationURL == "" {
		t.Fatalf("revocation %s without a URL", spec.Revocation)
	}
	u, err := url.Parse(o.AuthCodeURL("st", "ch", "https://connect.example/cb", []string{"a", "b"}))
	if err != nil || u.Scheme != "https" || u.Host != o.Info().AuthorizeHost {
		t.Fatalf("authorize URL %v (%v)", u, err)
	}
	q := u.Query()
	if q.Get("client_id") != "cid" || q.Get("state") != "st" || q.Get("redirect_uri") != "https://connect.example/cb" ||
		q.Get("response_type") != "code" {
		t.Fatalf("authorize query %v", q)
	}
	if !o.Info().PKCE || q.Get("code_challenge") != "ch" || q.Get("code_challenge_method") != "S256" {
		t.Fatalf("no PKCE S256 challenge in %v", q)
	}
	for k, v := range spec.AuthorizeParams {
		if q.Get(k) != v {
			t.Fatalf("%s=%q, want %q", k, q.Get(k), v)
		}
	}
	if !strings.Contains(q.Get(spec.ScopeParam), "a"+spec.ScopeSeparator+"b") {
		t.Fatalf("scopes %q with separator %q", q.Get(spec.ScopeParam), spec.ScopeSeparator)
	}
	for _, s := range spec.AlwaysScopes {
		if !slices.Contains(strings.Split(q.Get(spec.ScopeParam), spec.ScopeSeparator), s) {
			t.Fatalf("always-requested scope %s missing from %q", s, q.Get(spec.ScopeParam))
		}
	}
}

// TestQuirkClasses drives each class of provider quirk end to end over real
// HTTP: a catalog entry made from the real template (its endpoints pointed
// at the fake provider, every quirk property kept) against the fake
// provider showing that quirk.
func TestQuirkClasses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		template string // "" for a generic entry built by entry
		opts     providertest.Options
		entry    func(srv *providertest.Server) map[string]any // extra or replacing fields
		client   func(srv *providertest.Server) *http.Client
		scopes   []string
		check    func(t *testing.T, srv *providertest.Server, p provider.OAuth, tok *provider.Token)
	}{
		{
			name: "form-encoded token answer", template: "github",
			opts: providertest.Options{Quirks: providertest.Quirks{FormEncoded: true}},
			// GitHub answers form-encoded when the Accept header is missing:
			// turn it off to get that answer.
			entry:  func(*providertest.Server) map[string]any { return map[string]any{"accept_json": false} },
			scopes: []string{"repo", "gist"},
			check: func(t *testing.T, srv *providertest.Server, p provider.OAuth, tok *provider.Token) {
				if !slices.Equal(tok.Scopes, []string{"repo", "gist"}) || !tok.Expiry.IsZero() == srv.Quirks().NoExpiresIn {
					t.Fatalf("token %v", tok)
				}
				if reqs := srv.TokenRequests(); reqs[0].Accept == "application/json" || reqs[0].ClientAuth != "post" {
					t.Fatalf("token request %+v", reqs[0])
				}
			},
		},
		{
			name: "nested token", template: "slack",
			opts: providertest.Options{Subject: "U0123", AccountLabel: "Acme", RotateRefreshTokens: true,
				Quirks: providertest.Quirks{SlackNested: true}},
			scopes: []string{"channels:read", "chat:write"},
			check: func(t *testing.T, srv *providertest.Server, p provider.OAuth, tok *provider.Token) {
				if tok.AccountID != "U0123" || tok.AccountLabel != "Acme" || !slices.Equal(tok.Scopes, []string{"channels:read", "chat:write"}) {
					t.Fatalf("token %v", tok)
				}
				if err := provider.RevokeGrant(context.Background(), p, tok.AccessToken, tok.RefreshToken); err != nil ||
					srv.Revocations()[0].ClientAuth != "bearer" {
					t.Fatalf("bearer revocation: %v %+v", err, srv.Revocations())
				}
			},
		},
		{
			name: "missing expiry, Basic only", template: "notion",
			opts: providertest.Options{Quirks: providertest.Quirks{NoExpiresIn: true, BasicAuthOnly: true}},
			check: func(t *testing.T, srv *providertest.Server, p provider.OAuth, tok *provider.Token) {
				if !tok.Expiry.IsZero() || srv.TokenRequests()[0].ClientAuth != "basic" {
					t.Fatalf("expiry %v, requests %+v", tok.Expiry, srv.TokenRequests())
				}
			},
		},
		{
			name: "rotating refresh", template: "box",
			opts: providertest.Options{RotateRefreshTokens: true},
			check: func(t *testing.T, srv *providertest.Server, p provider.OAuth, tok *provider.Token) {
				ref, err := p.Refresh(context.Background(), tok.RefreshToken)
				if err != nil || ref.RefreshToken == tok.RefreshToken || !srv.Valid(ref.AccessToken) {
					t.Fatalf("refresh: %v %v", ref, err)
				}
				if _, err := p.Refresh(context.Background(), tok.RefreshToken); !errors.Is(err, provider.ErrInvalidGrant) {
					t.Fatalf("the rotated-away refresh token: %v", err)
				}
			},
		},
		{
			name: "no new refresh token, missing expiry", template: "salesforce",
			opts: providertest.Options{Quirks: providertest.Quirks{NoRefreshTokenOnRefresh: true, NoExpiresIn: true}},
			check: func(t *testing.T, srv *providertest.Server, p provider.OAuth, tok *provider.Token) {
				ref, err := p.Refresh(context.Background(), tok.RefreshToken)
				if err != nil || ref.RefreshToken != tok.RefreshToken || !ref.Expiry.IsZero() || !srv.Valid(ref.AccessToken) {
					t.Fatalf("refresh: %v %v", ref, err)
				}
			},
		},
		{
			name: "scopes answered as a JSON array", template: "twitch",
			opts:   providertest.Options{Quirks: providertest.Quirks{ScopeArray: true}},
			scopes: []string{"user:read:email", "chat:read"},
			check: func(t *testing.T, srv *providertest.Server, p provider.OAuth, tok *provider.Token) {
				if !slices.Equal(tok.Scopes, []string{"user:read:email", "chat:read"}) {
					t.Fatalf("scopes %q", tok.Scopes)
				}
			},
		},
		{
			name: "per-customer host",
			opts: providertest.Options{Quirks: providertest.Quirks{CustomerHost: "acme.fake.test"}},
			entry: func(srv *providertest.Server) map[string]any {
				// A Zendesk-shaped entry: the endpoints live on the
				// customer's subdomain, which the user typed in capitals.
				port := strings.TrimPrefix(srv.URL(), "http://127.0.0.1")
				return map[string]any{"subdomain": "ACME", "issuer": nil,
					"authorize_url":  "http://{subdomain}.fake.test" + port + "/authorize",
					"token_url":      "http://{subdomain}.fake.test" + port + "/token",
					"revocation_url": "http://{subdomain}.fake.test" + port + "/revoke"}
			},
			client: (*providertest.Server).HostClient,
			check: func(t *testing.T, srv *providertest.Server, p provider.OAuth, tok *provider.Token) {
				if h := srv.TokenRequests()[0].Host; h != "acme.fake.test" || p.Info().AuthorizeHost != "acme.fake.test"+strings.TrimPrefix(srv.URL(), "http://127.0.0.1") {
					t.Fatalf("token request to %q, authorize host %q", h, p.Info().AuthorizeHost)
				}
				if err := provider.RevokeGrant(context.Background(), p, tok.AccessToken, tok.RefreshToken); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "narrowing on refresh", template: "google",
			scopes: []string{"files.read", "files.write"},
			check: func(t *testing.T, srv *providertest.Server, p provider.OAuth, tok *provider.Token) {
				if !p.Info().NarrowOnRefresh {
					t.Fatal("google does not narrow")
				}
				ref, err := p.RefreshScoped(context.Background(), tok.RefreshToken, []string{"files.read"})
				if err != nil {
					t.Fatal(err)
				}
				if got, _ := srv.TokenScopes(ref.AccessToken); !slices.Equal(got, []string{"files.read"}) {
					t.Fatalf("narrowed token carries %v", got)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := providertest.New(t, tc.opts)
			entry := srv.ProviderConfig("p", "S")
			if tc.template != "" {
				tpl, _ := provider.Template(tc.template)
				entry = map[string]any{"name": "p", "template": tc.template, "client_id": srv.ClientID, "client_secret_env": "S",
					"issuer": srv.Issuer(), "authorize_url": srv.AuthorizeURL(), "token_url": srv.TokenURL()}
				if tpl.Revocation != provider.RevokeNone {
					entry["revocation_url"] = srv.RevocationURL()
				}
				if tpl.AccountURL != "" { // the fake's own "who am I"
					entry["account_url"], entry["account_url_id_field"] = srv.URL()+"/api/me", "id"
				}
			}
			if tc.entry != nil {
				for k, v := range tc.entry(srv) {
					if v == nil {
						delete(entry, k)
					} else {
						entry[k] = v
					}
				}
			}
			client := srv.Client()
			if tc.client != nil {
				client = tc.client(srv)
			}
			cfg, err := provider.ParseConfig(mustJSON(t, map[string]any{"providers": []any{entry}}),
				provider.ParseOptions{Dev: true, Getenv: func(string) string { return srv.ClientSecret }})
			if err != nil {
				t.Fatal(err)
			}
			cat, err := provider.New(context.Background(), cfg, provider.Options{HTTPClient: client})
			if err != nil {
				t.Fatal(err)
			}
			p, err := cat.OAuth("p")
			if err != nil {
				t.Fatal(err)
			}
			tok := connect(t, srv, p, tc.scopes)
			if !srv.Valid(tok.AccessToken) {
				t.Fatal("the exchanged token does not work at the provider")
			}
			tc.check(t, srv, p, tok)
		})
	}
}

// TestPerCustomerHostAttacks: a subdomain or instance URL is checked before
// it becomes part of any URL; everything but a plain host of the template's
// pattern is refused, and the refusal never repeats the value.
func TestPerCustomerHostAttacks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		template, field, value string
		want                   string // resulting token URL; "" = refused
	}{
		// Subdomains: one hostname label.
		{"zendesk", "subdomain", "acme", "https://acme.zendesk.com/oauth/tokens"},
		{"zendesk", "subdomain", "ACME", "https://acme.zendesk.com/oauth/tokens"},
		{"shopify", "subdomain", "my-shop-2", "https://my-shop-2.myshopify.com/admin/oauth/access_token"},
		{"zendesk", "subdomain", "evil.com", ""},
		{"zendesk", "subdomain", "evil.com#", ""},
		{"zendesk", "subdomain", "evil.com/", ""},
		{"zendesk", "subdomain", "evil.com?", ""},
		{"zendesk", "subdomain", "evil.com@acme", ""},
		{"zendesk", "subdomain", "acme:8443", ""},
		{"zendesk", "subdomain", "acme%2eevil", ""},
		{"zendesk", "subdomain", "acme\u3002evil", ""}, // ideographic full stop
		{"zendesk", "subdomain", "acme\uff0eevil", ""}, // fullwidth full stop
		{"zendesk", "subdomain", "\u0430cme", ""},      // Cyrillic a
		{"zendesk", "subdomain", "\u212acme", ""},      // Kelvin sign, which ToLower folds to k
		{"zendesk", "subdomain", "127.0.0.1", ""},
		{"zendesk", "subdomain", "acme.", ""},
		{"zendesk", "subdomain", "-acme", ""},
		{"zendesk", "subdomain", "acme_", ""},
		{"zendesk", "subdomain", " acme", ""},
		{"zendesk", "subdomain", "acme\n", ""},
		{"zendesk", "subdomain", strings.Repeat("a", 64), ""},
		// Instance URLs: an https origin matching the template's hosts.
		{"salesforce", "base_url", "https://acme.my.salesforce.com", "https://acme.my.salesforce.com/services/oauth2/token"},
		{"salesforce", "base_url", "https://ACME.My.Salesforce.COM/", "https://acme.my.salesforce.com/services/oauth2/token"},
		{"salesforce", "base_url", "https://acme--dev.sandbox.my.salesforce.com", "https://acme--dev.sandbox.my.salesforce.com/services/oauth2/token"},
		{"salesforce", "base_url", "https://test.salesforce.com", "https://test.salesforce.com/services/oauth2/token"},
		{"salesforce", "base_url", "https://evil.example", ""},
		{"salesforce", "base_url", "https://EVIL.EXAMPLE", ""},
		{"salesforce", "base_url", "https://my.salesforce.com", ""},
		{"salesforce", "base_url", "https://a.b.my.salesforce.com", ""},
		{"salesforce", "base_url", "https://acme.my.salesforce.com.evil.example", ""},
		{"salesforce", "base_url", "https://evil.example/.my.salesforce.com", ""},
		{"salesforce", "base_url", "https://acme.my.salesforce.com@evil.example", ""},
		{"salesforce", "base_url", "https://user:pw@acme.my.salesforce.com", ""},
		{"salesforce", "base_url", "https://acme.my.salesforce.com:8443", ""},
		{"salesforce", "base_url", "https://acme.my.salesforce.com/services", ""},
		{"salesforce", "base_url", "https://acme.my.salesforce.com?x=1", ""},
		{"salesforce", "base_url", "https://acme.my.salesforce.com#x", ""},
		{"salesforce", "base_url", "https://acme.my.salesforce.com.", ""},
		{"salesforce", "base_url", "https://acme%2emy.salesforce.com", ""},
		{"salesforce", "base_url", "https://acme\u3002my.salesforce.com", ""},
		{"salesforce", "base_url", "https://\u0430cme.my.salesforce.com", ""},
		{"salesforce", "base_url", "https://93.184.216.34", ""},
		{"salesforce", "base_url", "https://[::1]", ""},
		{"salesforce", "base_url", "http://acme.my.salesforce.com", ""},
		{"salesforce", "base_url", "javascript:alert(1)//acme.my.salesforce.com", ""},
		{"okta", "base_url", "https://acme.okta.com", "https://acme.okta.com/oauth2/default/v1/token"},
		{"okta", "base_url", "https://acme.okta.com.evil.example", ""},
		{"auth0", "base_url", "https://acme.eu.auth0.com", "https://acme.eu.auth0.com/oauth/token"},
		{"docusign", "base_url", "https://account-d.docusign.com", "https://account-d.docusign.com/oauth/token"},
		{"docusign", "base_url", "https://account-x.docusign.com", ""},
		// GitLab self-managed: any https host (a port and a path prefix
		// too), still no user info, query, fragment, IP literal or dot tricks.
		{"gitlab", "base_url", "https://gitlab.example.com:8443/gitlab/", "https://gitlab.example.com:8443/gitlab/oauth/token"},
		{"gitlab", "base_url", "https://user@gitlab.example.com", ""},
		{"gitlab", "base_url", "https://gitlab.example.com?x=1", ""},
		{"gitlab", "base_url", "https://gitlab.example.com#x", ""},
		{"gitlab", "base_url", "https://10.0.0.1", ""},
		{"gitlab", "base_url", "https://0x7f.1", ""},
		{"gitlab", "base_url", "https://2130706433", ""},
		{"gitlab", "base_url", "https://gitlab", ""},
		{"gitlab", "base_url", "https://gitlab.example.com.", ""},
		{"gitlab", "base_url", "https://gitlab%2eexample.com", ""},
		{"gitlab", "base_url", "http://gitlab.example.com", ""},
		// Tenants go into a path: hostname labels only.
		{"microsoft", "tenant", "contoso.onmicrosoft.com", "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token"},
		{"microsoft", "tenant", "00000000-0000-0000-0000-000000000000", "https://login.microsoftonline.com/00000000-0000-0000-0000-000000000000/oauth2/v2.0/token"},
		{"microsoft", "tenant", "common/../evil", ""},
		{"microsoft", "tenant", "common?x=1", ""},
		{"microsoft", "tenant", "contoso\u3002com", ""},
	} {
		entry := map[string]any{"name": "p", "template": tc.template, "client_id": "c", "client_secret_env": "S", tc.field: tc.value}
		cfg, err := parseEntries(t, false, entry)
		if tc.want != "" {
			if err != nil || cfg.Providers[0].TokenURL != tc.want {
				t.Errorf("%s %s %q: %v, want token URL %s", tc.template, tc.field, tc.value, err, tc.want)
				continue
			}
			// An API base on the per-customer host is on the very host
			// the checked value made: the proxy goes nowhere else.
			if tpl, _ := provider.Template(tc.template); strings.Contains(tpl.APIBaseURL, "{") {
				api, _ := url.Parse(cfg.Providers[0].APIBaseURL)
				tok, _ := url.Parse(tc.want)
				if api == nil || api.Host != tok.Host || api.Scheme != "https" {
					t.Errorf("%s %s %q: API base %q, not on %s", tc.template, tc.field, tc.value, cfg.Providers[0].APIBaseURL, tok.Host)
				}
			}
			continue
		}
		var ce *provider.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s %s %q accepted or refused for another reason: %v", tc.template, tc.field, tc.value, err)
			continue
		}
		if strings.Contains(err.Error(), "evil") || strings.Contains(err.Error(), tc.value) {
			t.Errorf("the refusal repeats the value: %v", err)
		}
	}
	// The same rules, called directly (for values that arrive later than
	// the providers file).
	if _, err := provider.CheckSubdomain("acme.evil"); !errors.Is(err, provider.ErrBadHost) {
		t.Errorf("CheckSubdomain: %v", err)
	}
	if o, err := provider.CheckInstanceURL("https://ACME.okta.com/", []string{"*.okta.com"}, false); err != nil || o != "https://acme.okta.com" {
		t.Errorf("CheckInstanceURL: %q %v", o, err)
	}
	if _, err := provider.CheckInstanceURL("https://acme.okta.com:444", []string{"*.okta.com"}, false); !errors.Is(err, provider.ErrBadHost) {
		t.Errorf("CheckInstanceURL with a port: %v", err)
	}
}

// TestAPIKeyTemplates: a key of the wrong form is refused before anything
// is sent; a well-formed one is sent once, in the template's header (and
// with its fixed headers), to the verification URL.
func TestAPIKeyTemplates(t *testing.T) {
	t.Parallel()
	good := map[string]string{
		"openai": "sk-proj-abcdefghijklmnopqrstuvwxyz0123", "anthropic": "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
		"stripe": "rk_test_abcdefghijklmnop", "sendgrid": "SG.abcdefghijklmnop.abcdefghijklmnopqrstuv",
		"twilio":  "SK0123456789abcdef0123456789abcdef:abcdefghijklmnopqrstuvwxyz012345",
		"datadog": "0123456789abcdef0123456789abcdef", "pagerduty": "y_NbAkKc66ryYTWUXYEu",
		"github-pat":  "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
		"huggingface": "hf_abcdefghijklmnopqrstuvwxyz01234567", "cloudflare": "any-token", "vercel": "any-token",
	}
	for _, name := range provider.Templates() {
		spec, _ := provider.Template(name)
		if spec.Kind != provider.KindAPIKey {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var got []http.Header
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				got = append(got, r.Header.Clone())
				mu.Unlock()
				w.WriteHeader(spec.Verify.ExpectStatus)
			}))
			t.Cleanup(api.Close)
			spec.Name = name
			spec.Verify.URL = api.URL + "/verify"
			p, err := provider.NewProvider(context.Background(), spec, true, provider.Options{})
			if err != nil {
				t.Fatal(err)
			}
			k := p.(provider.APIKey)
			key, ok := good[name]
			if !ok {
				t.Fatalf("no sample key for %s", name)
			}
			if spec.KeyPattern != "" {
				var pe *provider.Error
				err := k.Verify(context.Background(), "another/service.key!")
				if !errors.Is(err, provider.ErrInvalidKey) || !errors.As(err, &pe) || pe.Code != "key_format" || len(got) != 0 {
					t.Fatalf("a key of another form: %v (%d requests)", err, len(got))
				}
			}
			if err := k.Verify(context.Background(), key); err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("%d verification requests", len(got))
			}
			want := strings.Replace(spec.Verify.Value, "{key}", key, 1)
			want = strings.Replace(want, "{key_base64}", base64.StdEncoding.EncodeToString([]byte(key)), 1)
			if got[0].Get(spec.Verify.Header) != want {
				t.Fatalf("%s: %q, want %q", spec.Verify.Header, got[0].Get(spec.Verify.Header), want)
			}
			for h, v := range spec.Verify.Headers {
				if got[0].Get(h) != v {
					t.Fatalf("%s: %q, want %q", h, got[0].Get(h), v)
				}
			}
		})
	}
}

// TestAPIKeyConfigRefusals: key_pattern and verify.headers from the file
// pass the same rules as a template's.
func TestAPIKeyConfigRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		entry map[string]any
		field string
	}{
		{map[string]any{"name": "k", "kind": "api_key", "key_pattern": "sk-.*"}, "key_pattern"},
		{map[string]any{"name": "k", "kind": "api_key", "key_pattern": "^(sk$"}, "key_pattern"},
		{map[string]any{"name": "k", "template": "github", "client_id": "c", "client_secret_env": "S", "key_pattern": "^x$"}, "key_pattern"},
		{map[string]any{"name": "k", "kind": "api_key", "verify": map[string]any{"url": "https://api.example/me", "header": "X-Key",
			"headers": map[string]string{"X-Other": "{key}"}}}, "verify.headers"},
		{map[string]any{"name": "k", "kind": "api_key", "verify": map[string]any{"url": "https://api.example/me", "header": "X-Key",
			"headers": map[string]string{"x-key": "v"}}}, "verify.headers"},
		{map[string]any{"name": "k", "kind": "api_key", "verify": map[string]any{"url": "https://api.example/me", "header": "X-Key",
			"value": "{key}{key_base64}"}}, "verify.value"},
		{map[string]any{"name": "k", "kind": "api_key", "refresh_idle_lifetime": "1h"}, "refresh_idle_lifetime"},
		{map[string]any{"name": "k", "template": "github", "client_id": "c", "client_secret_env": "S", "refresh_idle_lifetime": "-1h"}, "refresh_idle_lifetime"},
		{map[string]any{"name": "k", "template": "github", "client_id": "c", "client_secret_env": "S", "refresh_idle_lifetime": "90d"}, "refresh_idle_lifetime"},
		{map[string]any{"name": "k", "template": "zendesk", "client_id": "c", "client_secret_env": "S"}, "authorize_url"},
	} {
		_, err := parseEntries(t, false, tc.entry)
		var ce *provider.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%v: %v, want a refusal of %s", tc.entry, err, tc.field)
		}
	}
	cfg, err := parseEntries(t, false, map[string]any{"name": "k", "template": "xero", "client_id": "c", "client_secret_env": "S",
		"refresh_idle_lifetime": "0", "refresh_rotates": false})
	if err != nil || cfg.Providers[0].RefreshIdleLifetime != 0 || cfg.Providers[0].RefreshRotates {
		t.Fatalf("overriding the refresh properties: %v %+v", err, cfg)
	}
}
