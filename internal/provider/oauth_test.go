package provider_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/provider/providertest"
)

func callAPI(t *testing.T, srv *providertest.Server, accessToken string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.APIURL(), nil)
	req.Header.Set("Authorization", "Bearer "+accessToken)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestAuthorizationCodeFlowWithPKCE(t *testing.T) {
	t.Parallel()
	srv, p := fake(t, providertest.Options{RequirePKCE: true, RedirectURIs: []string{redirectURI}}, nil)

	verifier := oauth2.GenerateVerifier()
	u, err := url.Parse(p.AuthCodeURL("st4te", oauth2.S256ChallengeFromVerifier(verifier), redirectURI, []string{"files.read", "files.write"}))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for k, want := range map[string]string{
		"response_type": "code", "client_id": srv.ClientID, "redirect_uri": redirectURI, "state": "st4te",
		"code_challenge": oauth2.S256ChallengeFromVerifier(verifier), "code_challenge_method": "S256",
		"scope": "files.read files.write",
	} {
		if q.Get(k) != want {
			t.Errorf("authorize %s = %q, want %q", k, q.Get(k), want)
		}
	}
	if q.Has("code_verifier") || strings.Contains(u.String(), verifier) {
		t.Fatal("the verifier leaked into the authorize URL")
	}

	tok := connect(t, srv, p, []string{"files.read", "files.write"})
	if tok.AccessToken == "" || tok.RefreshToken == "" || tok.TokenType != "Bearer" {
		t.Fatalf("token %v", tok)
	}
	if d := time.Until(tok.Expiry); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("expiry in %s, want ~1h", d)
	}
	if !slices.Equal(tok.Scopes, []string{"files.read", "files.write"}) {
		t.Fatalf("scopes %v", tok.Scopes)
	}
	if code := callAPI(t, srv, tok.AccessToken); code != 200 {
		t.Fatalf("API with the exchanged token: %d", code)
	}
	if reqs := srv.TokenRequests(); len(reqs) != 1 || reqs[0].ClientAuth != "basic" {
		t.Fatalf("token requests %+v, want one with client_secret_basic", reqs)
	}

	ref, err := p.Refresh(context.Background(), tok.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	if ref.AccessToken == tok.AccessToken || ref.RefreshToken != tok.RefreshToken {
		t.Fatalf("refresh without rotation: %v", ref)
	}
	if c := srv.Counts(); c.Exchange != 1 || c.Refresh != 1 {
		t.Fatalf("counts %+v", c)
	}
}

func TestExchangeRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		run  func(t *testing.T, srv *providertest.Server, p provider.OAuth) error
	}{
		{"wrong PKCE verifier", func(t *testing.T, srv *providertest.Server, p provider.OAuth) error {
			q, _ := authorize(t, srv, p, nil)
			_, err := p.Exchange(context.Background(), q.Get("code"), oauth2.GenerateVerifier(), redirectURI)
			return err
		}},
		{"missing PKCE verifier", func(t *testing.T, srv *providertest.Server, p provider.OAuth) error {
			q, _ := authorize(t, srv, p, nil)
			_, err := p.Exchange(context.Background(), q.Get("code"), "", redirectURI)
			return err
		}},
		{"code used twice", func(t *testing.T, srv *providertest.Server, p provider.OAuth) error {
			q, v := authorize(t, srv, p, nil)
			if _, err := p.Exchange(context.Background(), q.Get("code"), v, redirectURI); err != nil {
				t.Fatal(err)
			}
			_, err := p.Exchange(context.Background(), q.Get("code"), v, redirectURI)
			return err
		}},
		{"other redirect URI", func(t *testing.T, srv *providertest.Server, p provider.OAuth) error {
			q, v := authorize(t, srv, p, nil)
			_, err := p.Exchange(context.Background(), q.Get("code"), v, redirectURI+"/x")
			return err
		}},
		{"unknown refresh token", func(t *testing.T, srv *providertest.Server, p provider.OAuth) error {
			_, err := p.Refresh(context.Background(), "rt_made_up")
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, p := fake(t, providertest.Options{}, nil)
			err := tt.run(t, srv, p)
			var pe *provider.Error
			if !errors.Is(err, provider.ErrInvalidGrant) || !errors.As(err, &pe) || pe.Code != "invalid_grant" || pe.Status != 400 {
				t.Fatalf("got %v, want invalid_grant (HTTP 400)", err)
			}
		})
	}
}

func TestRefreshRotationAndReuseDetection(t *testing.T) {
	t.Parallel()
	srv, p := fake(t, providertest.Options{RotateRefreshTokens: true}, nil)
	tok := connect(t, srv, p, []string{"files.read"})
	ref, err := p.Refresh(context.Background(), tok.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	if ref.RefreshToken == "" || ref.RefreshToken == tok.RefreshToken {
		t.Fatal("refresh token was not rotated")
	}
	_, err = p.Refresh(context.Background(), tok.RefreshToken)
	if !errors.Is(err, provider.ErrInvalidGrant) {
		t.Fatalf("reusing a rotated refresh token: %v, want ErrInvalidGrant", err)
	}
	if !srv.Revoked(ref.RefreshToken) || callAPI(t, srv, ref.AccessToken) != 401 {
		t.Fatal("reuse detection did not revoke the grant")
	}
}

// Quirks: one test each.

func TestQuirkGitHubFormEncoded(t *testing.T) {
	t.Parallel()
	gh, _ := provider.Template("github")
	if !gh.AcceptJSON {
		t.Fatal("github template must ask for JSON")
	}
	for _, acceptJSON := range []bool{true, false} {
		t.Run(fmt.Sprintf("accept_json=%v", acceptJSON), func(t *testing.T) {
			t.Parallel()
			srv, p := fake(t, providertest.Options{Quirks: providertest.Quirks{FormEncoded: true}},
				map[string]any{"accept_json": acceptJSON})
			tok := connect(t, srv, p, []string{"repo", "gist"})
			if !slices.Equal(tok.Scopes, []string{"repo", "gist"}) {
				t.Fatalf("scopes %q (GitHub answers comma-separated)", tok.Scopes)
			}
			if callAPI(t, srv, tok.AccessToken) != 200 {
				t.Fatal("token does not work")
			}
			reqs := srv.TokenRequests()
			if got := reqs[0].Accept == "application/json"; got != acceptJSON {
				t.Fatalf("Accept header %q", reqs[0].Accept)
			}
			// GitHub reports a dead code with HTTP 200 and its own error code.
			q, v := authorize(t, srv, p, nil)
			if _, err := p.Exchange(context.Background(), q.Get("code"), v, redirectURI); err != nil {
				t.Fatal(err)
			}
			_, err := p.Exchange(context.Background(), q.Get("code"), v, redirectURI)
			var pe *provider.Error
			if !errors.Is(err, provider.ErrInvalidGrant) || !errors.As(err, &pe) || pe.Code != "bad_verification_code" {
				t.Fatalf("reused code: %v", err)
			}
		})
	}
}

func TestQuirkSlackNestedUserToken(t *testing.T) {
	t.Parallel()
	srv, p := fake(t, providertest.Options{RotateRefreshTokens: true, Subject: "U0123", AccountLabel: "Acme",
		Quirks: providertest.Quirks{SlackNested: true}}, map[string]any{"scope_param": "user_scope"})
	u, _ := url.Parse(p.AuthCodeURL("s", "c", redirectURI, []string{"channels:read", "chat:write"}))
	if u.Query().Get("user_scope") != "channels:read,chat:write" || u.Query().Has("scope") {
		t.Fatalf("Slack scopes go comma-separated in user_scope: %s", u.RawQuery)
	}
	tok := connect(t, srv, p, []string{"channels:read", "chat:write"})
	if tok.AccessToken == "" || !srv.Valid(tok.AccessToken) {
		t.Fatal("the nested user token was not taken")
	}
	if tok.AccountID != "U0123" || tok.AccountLabel != "Acme" || tok.TokenType != "Bearer" || !slices.Equal(tok.Scopes, []string{"channels:read", "chat:write"}) {
		t.Fatalf("token %v", tok)
	}
	ref, err := p.Refresh(context.Background(), tok.RefreshToken)
	if err != nil || !srv.Valid(ref.AccessToken) {
		t.Fatalf("refresh: %v", err)
	}
	// Slack's errors are HTTP 200 {"ok":false,"error":"invalid_refresh_token"}.
	_, err = p.Refresh(context.Background(), tok.RefreshToken)
	var pe *provider.Error
	if !errors.Is(err, provider.ErrInvalidGrant) || !errors.As(err, &pe) || pe.Code != "invalid_refresh_token" {
		t.Fatalf("reused refresh token: %v", err)
	}
	sl, _ := provider.Template("slack")
	if sl.TokenResponse != provider.ResponseSlackUser || sl.ScopeParam != "user_scope" || sl.ScopeSeparator != "," {
		t.Fatalf("slack template: %+v", sl)
	}
}

func TestQuirkNotionBasicAuthOnly(t *testing.T) {
	t.Parallel()
	notion, _ := provider.Template("notion")
	if notion.AuthStyle != provider.AuthBasic {
		t.Fatal("notion template must use HTTP Basic")
	}
	srv, p := fake(t, providertest.Options{Quirks: providertest.Quirks{BasicAuthOnly: true}}, map[string]any{"auth_style": "basic"})
	tok := connect(t, srv, p, nil)
	if reqs := srv.TokenRequests(); reqs[0].ClientAuth != "basic" || !srv.Valid(tok.AccessToken) {
		t.Fatalf("token requests %+v", reqs)
	}
	// The same provider configured with client_secret_post is refused, and
	// the refusal is not mistaken for a dead grant.
	srv2, p2 := fake(t, providertest.Options{Quirks: providertest.Quirks{BasicAuthOnly: true}}, map[string]any{"auth_style": "params"})
	q, v := authorize(t, srv2, p2, nil)
	_, err := p2.Exchange(context.Background(), q.Get("code"), v, redirectURI)
	if !errors.Is(err, provider.ErrRejected) || errors.Is(err, provider.ErrInvalidGrant) {
		t.Fatalf("post auth against a Basic-only provider: %v", err)
	}
	if reqs := srv2.TokenRequests(); len(reqs) != 1 {
		t.Fatalf("%d token requests: the auth style must not be probed (a code is single-use)", len(reqs))
	}
}

func TestQuirkNoExpiresIn(t *testing.T) {
	t.Parallel()
	srv, p := fake(t, providertest.Options{Quirks: providertest.Quirks{NoExpiresIn: true}}, nil)
	tok := connect(t, srv, p, nil)
	if !tok.Expiry.IsZero() || !srv.Valid(tok.AccessToken) {
		t.Fatalf("expiry %v, want zero (unknown)", tok.Expiry)
	}
}

func TestQuirkNoRefreshTokenOnRefresh(t *testing.T) {
	t.Parallel()
	srv, p := fake(t, providertest.Options{RotateRefreshTokens: true,
		Quirks: providertest.Quirks{NoRefreshTokenOnRefresh: true}}, nil)
	tok := connect(t, srv, p, nil)
	for range 2 {
		ref, err := p.Refresh(context.Background(), tok.RefreshToken)
		if err != nil {
			t.Fatal(err)
		}
		if ref.RefreshToken != tok.RefreshToken || !srv.Valid(ref.AccessToken) {
			t.Fatalf("the old refresh token must be kept: %v", ref)
		}
	}
}

func TestQuirkServerError(t *testing.T) {
	t.Parallel()
	srv, p := fake(t, providertest.Options{}, nil)
	tok := connect(t, srv, p, nil)
	srv.SetQuirks(providertest.Quirks{ServerError: true})
	_, err := p.Refresh(context.Background(), tok.RefreshToken)
	var pe *provider.Error
	if !errors.Is(err, provider.ErrUnavailable) || !errors.As(err, &pe) || pe.Status != 503 {
		t.Fatalf("refresh during an outage: %v", err)
	}
	if strings.Contains(err.Error(), "html") || strings.Contains(err.Error(), tok.RefreshToken) {
		t.Fatalf("error text quotes the response or the token: %q", err)
	}
	if err := p.Revoke(context.Background(), tok.AccessToken, "access_token"); !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("revoke during an outage: %v", err)
	}
	srv.SetQuirks(providertest.Quirks{})
	if _, err := p.Refresh(context.Background(), tok.RefreshToken); err != nil {
		t.Fatalf("after the outage the refresh token still works: %v", err)
	}
}

func TestQuirkAccessDenied(t *testing.T) {
	t.Parallel()
	srv, p := fake(t, providertest.Options{Quirks: providertest.Quirks{AccessDenied: true}}, nil)
	q, _ := authorize(t, srv, p, nil)
	if err := provider.CallbackError("fake", q); !errors.Is(err, provider.ErrAccessDenied) {
		t.Fatalf("callback %v: %v", q, err)
	}
	if q.Get("code") != "" {
		t.Fatal("a code came back with access_denied")
	}
	if provider.CallbackError("fake", url.Values{"code": {"x"}}) != nil {
		t.Fatal("no error parameter must be no error")
	}
}

func TestQuirkIssParameter(t *testing.T) {
	t.Parallel()
	srv, p := fake(t, providertest.Options{Quirks: providertest.Quirks{IssParameter: true}}, nil)
	q, _ := authorize(t, srv, p, nil)
	if q.Get("iss") != srv.Issuer() || p.CheckIssuer(q.Get("iss")) != nil {
		t.Fatalf("iss %q", q.Get("iss"))
	}
	tests := []struct {
		name      string
		supported bool
		iss       string
		ok        bool
	}{
		{"matching", true, "self", true},
		{"another issuer (mix-up)", true, "https://evil.example", false},
		{"missing though supported", true, "", false},
		{"missing, not supported", false, "", true},
		{"another issuer, not supported", false, "https://evil.example", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, p := fake(t, providertest.Options{}, map[string]any{"iss_parameter_supported": tt.supported})
			iss := tt.iss
			if iss == "self" {
				iss = srv.Issuer()
			}
			err := p.CheckIssuer(iss)
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, provider.ErrIssuerMismatch)) {
				t.Fatalf("CheckIssuer(%q) = %v", tt.iss, err)
			}
		})
	}
}

func TestRevoke(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		authStyle string
		wantAuth  string
	}{
		{"client_secret_basic", "basic", "basic"},
		{"client_secret_post", "params", "post"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, p := fake(t, providertest.Options{}, map[string]any{"auth_style": tt.authStyle})
			tok := connect(t, srv, p, nil)
			if err := provider.RevokeGrant(context.Background(), p, tok.AccessToken, tok.RefreshToken); err != nil {
				t.Fatal(err)
			}
			revs := srv.Revocations()
			if len(revs) != 2 {
				t.Fatalf("revocations %+v", revs)
			}
			want := []providertest.Revocation{
				{Token: tok.RefreshToken, Hint: "refresh_token", ClientAuth: tt.wantAuth, ClientID: srv.ClientID, Known: true},
				{Token: tok.AccessToken, Hint: "access_token", ClientAuth: tt.wantAuth, ClientID: srv.ClientID, Known: true},
			}
			if !slices.Equal(revs, want) {
				t.Fatalf("revocations\n got %+v\nwant %+v", revs, want)
			}
			if !srv.Revoked(tok.RefreshToken) || callAPI(t, srv, tok.AccessToken) != 401 {
				t.Fatal("not revoked at the provider")
			}
		})
	}
	t.Run("bearer", func(t *testing.T) {
		t.Parallel()
		srv, p := fake(t, providertest.Options{}, map[string]any{"revocation": "bearer"})
		tok := connect(t, srv, p, nil)
		if err := provider.RevokeGrant(context.Background(), p, tok.AccessToken, tok.RefreshToken); err != nil {
			t.Fatal(err)
		}
		revs := srv.Revocations()
		if len(revs) != 1 || revs[0].Token != tok.AccessToken || revs[0].ClientAuth != "bearer" {
			t.Fatalf("revocations %+v", revs)
		}
	})
	t.Run("no endpoint", func(t *testing.T) {
		t.Parallel()
		_, p := fake(t, providertest.Options{}, map[string]any{"revocation_url": nil})
		if err := provider.RevokeGrant(context.Background(), p, "at", "rt"); !errors.Is(err, provider.ErrNotSupported) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("wrong client secret", func(t *testing.T) {
		t.Parallel()
		srv := providertest.New(t, providertest.Options{})
		entry := srv.ProviderConfig("fake", "FAKE_SECRET")
		p, _ := catalog(t, map[string]string{"FAKE_SECRET": "not-the-secret"}, srv, entry).OAuth("fake")
		err := p.Revoke(context.Background(), "at_x", "access_token")
		if !errors.Is(err, provider.ErrRejected) || strings.Contains(err.Error(), "not-the-secret") {
			t.Fatalf("got %v", err)
		}
	})
}

func TestDiscovery(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Options{RequirePKCE: true,
		Quirks: providertest.Quirks{BasicAuthOnly: true, IssParameter: true}})
	entry := map[string]any{"name": "generic", "kind": "oauth2", "issuer": srv.Issuer(), "discovery": true,
		"client_id": srv.ClientID, "client_secret_env": "S"}
	p, err := catalog(t, map[string]string{"S": srv.ClientSecret}, srv, entry).OAuth("generic")
	if err != nil {
		t.Fatal(err)
	}
	info := p.Info()
	if !info.PKCE || !info.IssParameterSupported || info.Revocation != provider.RevokeRFC7009 || info.Issuer != srv.Issuer() {
		t.Fatalf("discovered %+v", info)
	}
	if srv.Counts().Discovery != 1 {
		t.Fatalf("counts %+v", srv.Counts())
	}
	tok := connect(t, srv, p, []string{"files.read"}) // PKCE required, Basic only, iss checked
	if err := provider.RevokeGrant(context.Background(), p, tok.AccessToken, tok.RefreshToken); err != nil {
		t.Fatal(err)
	}
}

// TestInfoSelectAccount: Info().SelectAccount carries the template's
// select-account parameters (or, discovered, OIDC's prompt=select_account),
// as a copy; nil where there are none. Set over an AuthCodeURL answer as
// Info documents (each replacing its namesake), they reach the provider
// once each.
func TestInfoSelectAccount(t *testing.T) {
	t.Parallel()
	selectAccount := map[string]string{"prompt": "select_account"}
	google := map[string]string{"prompt": "consent select_account"}
	for _, tt := range []struct {
		entry string
		want  map[string]string
	}{
		{`"template":"google"`, google},
		{`"template":"gmail"`, google},
		{`"template":"google-calendar"`, google},
		{`"template":"google-drive"`, google},
		{`"template":"microsoft"`, selectAccount},
		{`"template":"github"`, selectAccount},
		{`"template":"notion"`, nil},
		{`"kind":"oauth2","authorize_url":"https://a.example/auth","token_url":"https://a.example/token"`, nil},
	} {
		cfg, err := parse(`{"providers":[{"name":"p",`+tt.entry+`,"client_id":"cid","client_secret_env":"S"}]}`,
			false, map[string]string{"S": "s"})
		if err != nil {
			t.Fatal(err)
		}
		p, err := provider.NewProvider(context.Background(), cfg.Providers[0], false, provider.Options{})
		if err != nil {
			t.Fatal(err)
		}
		o := p.(provider.OAuth)
		got := o.Info().SelectAccount
		if !maps.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
			t.Fatalf("%s: SelectAccount %#v, want %#v", tt.entry, got, tt.want)
		}
		if got == nil {
			continue
		}
		got["prompt"] = "none"
		if o.Info().SelectAccount["prompt"] == "none" {
			t.Fatalf("%s: Info hands out the provider's own map", tt.entry)
		}
		u, err := url.Parse(o.AuthCodeURL("st", "ch", redirectURI, nil))
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		for k, v := range o.Info().SelectAccount {
			q.Set(k, v)
		}
		for k, v := range tt.want {
			if !slices.Equal(q[k], []string{v}) {
				t.Fatalf("%s: %s is %q", tt.entry, k, q[k])
			}
		}
		if q.Get("state") != "st" || q.Get("redirect_uri") != redirectURI || q.Get("code_challenge") != "ch" {
			t.Fatalf("%s: select-account parameters displaced connectd's own: %v", tt.entry, q)
		}
		if tt.entry == `"template":"google"` && q.Get("access_type") != "offline" {
			t.Fatalf("google: access_type %q", q.Get("access_type"))
		}
	}

	// A discovered OpenID Connect provider (the fake's metadata): OIDC's
	// prompt=select_account, which the fake hears when it is added.
	srv := providertest.New(t, providertest.Options{})
	entry := map[string]any{"name": "oidc", "kind": "oauth2", "issuer": srv.Issuer(), "discovery": true,
		"client_id": srv.ClientID, "client_secret_env": "S"}
	p, err := catalog(t, map[string]string{"S": srv.ClientSecret}, srv, entry).OAuth("oidc")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Info().SelectAccount; !maps.Equal(got, selectAccount) {
		t.Fatalf("discovered: SelectAccount %#v", got)
	}
	authorize(t, srv, p, nil) // an ordinary connection: no prompt
	u, err := url.Parse(p.AuthCodeURL("st", "ch", redirectURI, nil))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for k, v := range p.Info().SelectAccount {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	if back, err := srv.Approve(u.String()); err != nil || back.Query().Get("code") == "" {
		t.Fatalf("approve with select_account: %v %v", back, err)
	}
	if got := srv.Prompts(); !slices.Equal(got, []string{"", "select_account"}) {
		t.Fatalf("prompts the fake heard: %q", got)
	}

	// The fake's own entry asks like an OIDC provider; without the field,
	// a generic entry has none.
	if _, p := fake(t, providertest.Options{}, nil); !maps.Equal(p.Info().SelectAccount, selectAccount) {
		t.Fatalf("fake: SelectAccount %#v", p.Info().SelectAccount)
	}
	if _, p := fake(t, providertest.Options{}, map[string]any{"select_account_params": nil}); p.Info().SelectAccount != nil {
		t.Fatalf("fake without select_account_params: %#v", p.Info().SelectAccount)
	}
}

func TestDiscoveryRefusals(t *testing.T) {
	t.Parallel()
	otherIssuer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"issuer":"https://someone-else.example","authorization_endpoint":"https://a.example/auth","token_endpoint":"https://a.example/token"}`)
	}))
	t.Cleanup(otherIssuer.Close)
	badEndpoint := httptest.NewServer(nil)
	t.Cleanup(badEndpoint.Close)
	badEndpoint.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"issuer":%q,"authorization_endpoint":"javascript:alert(1)","token_endpoint":"https://a.example/token"}`, badEndpoint.URL)
	})
	tests := []struct {
		name, issuer, want string
	}{
		{"metadata names another issuer", otherIssuer.URL, "another issuer"},
		{"javascript endpoint", badEndpoint.URL, "authorization_endpoint scheme \"javascript\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := fmt.Sprintf(`{"providers":[{"name":"g","kind":"oauth2","issuer":%q,"discovery":true,"client_id":"c","client_secret_env":"S"}]}`, tt.issuer)
			cfg, err := provider.ParseConfig([]byte(data), provider.ParseOptions{Dev: true, Getenv: func(string) string { return "s" }})
			if err != nil {
				t.Fatal(err)
			}
			_, err = provider.New(context.Background(), cfg, provider.Options{})
			var ce *provider.ConfigError
			if !errors.As(err, &ce) || ce.Provider != "g" || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want a ConfigError for g mentioning %q", err, tt.want)
			}
		})
	}
}

func TestResponseLimits(t *testing.T) {
	t.Parallel()
	var followed atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { followed.Add(1) }))
	t.Cleanup(func() {
		elsewhere.Close()
		if followed.Load() != 0 {
			t.Error("a redirect from the token endpoint was followed")
		}
	})
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    error
	}{
		{"huge body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"access_token":"%s"}`, strings.Repeat("a", 2<<20))
		}, provider.ErrBadResponse},
		{"redirect not followed", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elsewhere.URL, http.StatusTemporaryRedirect)
		}, provider.ErrRejected},
		{"no access token", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"token_type":"Bearer"}`)
		}, provider.ErrBadResponse},
		{"timeout", func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body) // lets the server notice the client going away
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}, provider.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(tt.handler)
			t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
			spec := provider.Spec{Name: "x", Kind: provider.KindOAuth2, ClientID: "c", ClientSecret: "s",
				AuthorizeURL: ts.URL + "/auth", TokenURL: ts.URL + "/token", AuthStyle: provider.AuthBasic,
				ScopeSeparator: " ", ScopeParam: "scope", InvalidGrantErrors: []string{"invalid_grant"}}
			p, err := provider.NewProvider(context.Background(), spec, true, provider.Options{
				HTTPClient: &http.Client{Timeout: 2 * time.Second}}) // the timeout case waits it out; a loaded machine must not turn the others into timeouts
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.(provider.OAuth).Refresh(context.Background(), "rt")
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSecretsDoNotFormat(t *testing.T) {
	t.Parallel()
	tok := provider.Token{AccessToken: "at-SECRET-1", RefreshToken: "rt-SECRET-2", TokenType: "Bearer"}
	spec := provider.Spec{Name: "x", ClientSecret: "cs-SECRET-3"}
	for _, out := range []string{
		fmt.Sprintf("%v %+v %#v %s %q", tok, tok, tok, tok, tok),
		fmt.Sprintf("%v %+v %#v %s", &tok, spec, spec, spec.ClientSecret),
	} {
		if strings.Contains(out, "SECRET") {
			t.Fatalf("a secret was formatted: %s", out)
		}
	}
}
