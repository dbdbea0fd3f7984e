package provider_test

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/connectd/connectd/internal/provider"
)

// FuzzParseConfig: whatever the providers file holds, parsing never panics
// and never hands out a secret in its error; and what it accepts (outside dev
// mode) can only send browsers and back-channel calls to absolute https URLs
// with a host, no user info and no fragment, and builds authorize URLs where
// state, redirect_uri and the PKCE challenge are connectd's own, once each,
// whichever select-account parameters are set over them.
// Run longer with
//
//	go test -run '^$' -fuzz FuzzParseConfig -fuzztime 1m ./internal/provider
func FuzzParseConfig(f *testing.F) {
	const sec = `"client_id":"x","client_secret_env":"S"`
	for _, s := range []string{
		`{"providers":[{"name":"gh","template":"github",` + sec + `}]}`,
		`{"providers":[{"name":"gl","template":"gitlab","base_url":"https://git.example.com",` + sec + `}]}`,
		`{"providers":[{"name":"ms","template":"microsoft","tenant":"contoso",` + sec + `}]}`,
		`{"providers":[{"name":"x","kind":"oauth2",` + sec + `,"authorize_url":"https://a.example/auth","token_url":"https://a.example/token","authorize_params":{"prompt":"consent"}}]}`,
		`{"providers":[{"name":"x","kind":"oauth2",` + sec + `,"authorize_url":"https://a.example/auth","token_url":"https://a.example/token","select_account_params":{"prompt":"select_account"}}]}`,
		`{"providers":[{"name":"g","template":"google",` + sec + `,"select_account_params":{"prompt":"","state":"evil"}}]}`,
		`{"providers":[{"name":"x","kind":"oauth2",` + sec + `,"authorize_url":"https://a.example/auth?state=evil&redirect_uri=https://evil.example/","token_url":"https://a.example/token"}]}`,
		`{"providers":[{"name":"x","kind":"oauth2",` + sec + `,"authorize_url":"javascript:alert(1)//","token_url":"https://a.example/token"}]}`,
		`{"providers":[{"name":"x","kind":"oauth2",` + sec + `,"authorize_url":"https://a.example@evil.example/","token_url":"https://a.example/token"}]}`,
		`{"providers":[{"name":"gl","template":"gitlab","base_url":"https://evil.example#@git.example.com",` + sec + `}]}`,
		`{"providers":[{"name":"k","kind":"api_key","verify":{"url":"https://api.example/me","header":"Authorization","value":"Bearer {key}"}}]}`,
		`{"providers":[{"name":"k","kind":"api_key","verify":{"url":"https://api.example/me?k={key}","header":"X","value":"{key}"}}]}`,
		`{"providers":[{"name":"a","template":"github",` + sec + `},{"name":"a","template":"github",` + sec + `}]}`,
		`{"providers":[{"name":"x","kind":"oauth2","client_id":"x","client_secret":"ghp_inline","authorize_url":"https://a","token_url":"https://a"}]}`,
		`{"providers":[{"name":"gl","template":"gitlab","base_url":"https://git.example.com","api_base_url":"{base_url}/api/v4?x#y",` + sec + `}]}`,
		`{"providers":[{"name":"z","template":"zendesk","subdomain":"acme","api_auth_header":"Host","api_auth_value":"{token}\r\n",` + sec + `}]}`,
		`{"providers":[{"name":"k","kind":"api_key","api_base_url":"https://u@api.example/v1/../x","api_auth_value":"Key {token_base64}"}]}`,
	} {
		f.Add([]byte(s))
	}
	opts := provider.ParseOptions{
		Getenv:   func(string) string { return "env-secret-value" },
		ReadFile: func(string) ([]byte, error) { return nil, fs.ErrNotExist }, // never the real file system
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := provider.ParseConfig(data, opts)
		if err != nil {
			var ce *provider.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("untyped error %v", err)
			}
			if strings.Contains(err.Error(), "env-secret-value") {
				t.Fatalf("error repeats a secret: %v", err)
			}
			return
		}
		for _, s := range cfg.Providers {
			urls := map[string]string{"issuer": s.Issuer, "authorize_url": s.AuthorizeURL, "token_url": s.TokenURL,
				"revocation_url": s.RevocationURL, "api_base_url": s.APIBaseURL}
			if s.Verify != nil {
				urls["verify.url"] = s.Verify.URL
			}
			for field, raw := range urls {
				if raw == "" {
					continue
				}
				u, err := url.Parse(raw)
				if err != nil || u.Scheme != "https" || u.Hostname() == "" || u.User != nil || u.Fragment != "" ||
					strings.Contains(raw, "#") {
					t.Fatalf("%s: accepted %s %q", s.Name, field, raw)
				}
			}
			// The proxy puts request paths under the API base and the
			// credential in one header, at one place.
			if strings.ContainsAny(s.APIBaseURL, "?{") {
				t.Fatalf("%s: accepted api_base_url %q", s.Name, s.APIBaseURL)
			}
			if a := s.APIAuth; a != (provider.APIAuth{}) && (strings.Count(a.Value, "{token")+strings.Count(a.Value, "{key") != 1 ||
				strings.ContainsAny(a.Header, "\r\n: ") || strings.ContainsFunc(a.Value, unicode.IsControl)) {
				t.Fatalf("%s: accepted APIAuth %+v", s.Name, a)
			}
			if s.Kind != provider.KindOAuth2 || s.Discovery {
				continue
			}
			p, err := provider.NewProvider(context.Background(), s, false, provider.Options{})
			if err != nil {
				t.Fatalf("%s: accepted but unusable: %v", s.Name, err)
			}
			const state, redirect = "the-state", "https://connect.example.com/oauth/callback"
			raw := p.(provider.OAuth).AuthCodeURL(state, "the-challenge", redirect, []string{"a"})
			u, err := url.Parse(raw)
			au, _ := url.Parse(s.AuthorizeURL)
			if err != nil || u.Scheme != "https" || u.Host != au.Host {
				t.Fatalf("%s: authorize URL %q", s.Name, raw)
			}
			q := u.Query()
			for k, v := range p.Info().SelectAccount { // as connect adds them for another account
				q.Set(k, v)
			}
			for name, want := range map[string]string{"state": state, "redirect_uri": redirect} {
				if !slices.Equal(q[name], []string{want}) {
					t.Fatalf("%s: %s is %q in %q", s.Name, name, q[name], raw)
				}
			}
			if s.PKCE && !slices.Equal(q["code_challenge"], []string{"the-challenge"}) {
				t.Fatalf("%s: code_challenge %q in %q", s.Name, q["code_challenge"], raw)
			}
		}
	})
}

// TestAuthorizeURLWithReservedParamsRefused: an authorize_url that already
// carries a parameter connectd sets (state, redirect_uri, the PKCE challenge,
// ...) is refused, in the file and from discovery: the browser would
// otherwise arrive with two of them, and which one the provider reads is
// anyone's guess. Found by FuzzParseConfig.
func TestAuthorizeURLWithReservedParamsRefused(t *testing.T) {
	t.Parallel()
	for _, q := range []string{"state=evil", "redirect_uri=https%3A%2F%2Fevil.example%2F", "code_challenge=x",
		"code_challenge_method=plain", "client_id=other", "response_type=token", "scope=admin"} {
		_, err := parse(`{"providers":[{"name":"x","kind":"oauth2","client_id":"x","client_secret_env":"S",`+
			`"authorize_url":"https://a.example/auth?`+q+`","token_url":"https://a.example/token"}]}`, false,
			map[string]string{"S": "s"})
		var ce *provider.ConfigError
		if !errors.As(err, &ce) || ce.Field != "authorize_url" {
			t.Errorf("authorize_url with %s: %v", q, err)
		}
	}
	if _, err := parse(`{"providers":[{"name":"x","kind":"oauth2","client_id":"x","client_secret_env":"S",`+
		`"authorize_url":"https://a.example/auth?tenant=acme","token_url":"https://a.example/token"}]}`, false,
		map[string]string{"S": "s"}); err != nil {
		t.Errorf("an ordinary query parameter is refused: %v", err)
	}
}
