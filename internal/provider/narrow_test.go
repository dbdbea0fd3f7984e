package provider_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/provider/providertest"
)

// TestRefreshScoped: a refresh-token grant with "scope" (RFC 6749 §6) gets
// an access token limited to that subset, through oauth2's own client
// authentication and error parsing, with the refresh token kept or rotated
// as the provider answers.
func TestRefreshScoped(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		opts   providertest.Options
		entry  map[string]any
		scopes []string
		want   error  // class of the error, nil for success
		code   string // OAuth error code of a failure
	}{
		{name: "subset", scopes: []string{"files.read"}},
		{name: "subset rotating", opts: providertest.Options{RotateRefreshTokens: true}, scopes: []string{"files.read"}},
		{name: "client_secret_post", entry: map[string]any{"auth_style": "params"}, scopes: []string{"files.read"}},
		{name: "comma separator", entry: map[string]any{"scope_separator": ","}, scopes: []string{"files.read", "files.write"}},
		{name: "beyond the grant", scopes: []string{"files.read", "admin"}, want: provider.ErrRejected, code: "invalid_scope"},
		{name: "no scopes", scopes: nil, want: provider.ErrRejected, code: "no_scope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, p := fake(t, tc.opts, tc.entry)
			tok := connect(t, srv, p, []string{"files.read", "files.write", "admin.all"})
			ref, err := p.RefreshScoped(context.Background(), tok.RefreshToken, tc.scopes)
			if tc.want != nil {
				var pe *provider.Error
				if !errors.Is(err, tc.want) || !errors.As(err, &pe) || pe.Code != tc.code {
					t.Fatalf("RefreshScoped: %v, want %v (%s)", err, tc.want, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := srv.TokenScopes(ref.AccessToken); !slices.Equal(got, tc.scopes) || !slices.Equal(ref.Scopes, tc.scopes) {
				t.Fatalf("narrowed token carries %v (answer says %v), want %v", got, ref.Scopes, tc.scopes)
			}
			reqs := srv.TokenRequests()
			if last := reqs[len(reqs)-1]; last.GrantType != "refresh_token" || last.Scope == "" {
				t.Fatalf("last token request %+v", last)
			}
			rotated := ref.RefreshToken != tok.RefreshToken
			if ref.RefreshToken == "" || rotated != tc.opts.RotateRefreshTokens {
				t.Fatalf("refresh token rotated %v, want %v", rotated, tc.opts.RotateRefreshTokens)
			}
			// The grant keeps everything: a plain refresh with the refresh
			// token the answer left us has all three scopes again.
			full, err := p.Refresh(context.Background(), ref.RefreshToken)
			if err != nil {
				t.Fatal(err)
			}
			if len(full.Scopes) != 3 {
				t.Fatalf("the grant after narrowing: %v", full.Scopes)
			}
			if reqs := srv.TokenRequests(); reqs[len(reqs)-1].Scope != "" {
				t.Fatal("a plain refresh sent scope")
			}
		})
	}
}

// TestRefreshScopedRefusals: a dead refresh token is invalid_grant (the
// user must connect again), an outage is retryable, and a provider that
// ignores scope answers with the whole grant, which the caller sees in
// Scopes.
func TestRefreshScopedRefusals(t *testing.T) {
	t.Parallel()
	srv, p := fake(t, providertest.Options{RotateRefreshTokens: true}, nil)
	tok := connect(t, srv, p, []string{"files.read", "files.write"})
	if _, err := p.RefreshScoped(context.Background(), "rt_unknown", []string{"files.read"}); !errors.Is(err, provider.ErrInvalidGrant) {
		t.Fatalf("unknown refresh token: %v", err)
	}
	if _, err := p.RefreshScoped(context.Background(), "", []string{"files.read"}); !errors.Is(err, provider.ErrNotSupported) {
		t.Fatalf("no refresh token: %v", err)
	}
	srv.SetQuirks(providertest.Quirks{ServerError: true})
	if _, err := p.RefreshScoped(context.Background(), tok.RefreshToken, []string{"files.read"}); !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("outage: %v", err)
	}
	srv.SetQuirks(providertest.Quirks{IgnoreRefreshScope: true})
	ref, err := p.RefreshScoped(context.Background(), tok.RefreshToken, []string{"files.read"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ref.Scopes, []string{"files.read", "files.write"}) {
		t.Fatalf("a provider that ignores scope: answer says %v", ref.Scopes)
	}
	// The rotated-away refresh token is dead (and its reuse kills the grant).
	if _, err := p.RefreshScoped(context.Background(), tok.RefreshToken, []string{"files.read"}); !errors.Is(err, provider.ErrInvalidGrant) {
		t.Fatalf("reused refresh token: %v", err)
	}
}

// TestNarrowOnRefreshProperty: on for the templates of providers documented
// to narrow (Google's and Microsoft's), off for every other template and for a
// provider configured by hand or by discovery unless the file sets it.
func TestNarrowOnRefreshProperty(t *testing.T) {
	t.Parallel()
	for _, name := range provider.Templates() {
		spec, _ := provider.Template(name)
		narrows := []string{"google", "google-drive", "gmail", "google-calendar", "microsoft"}
		if want := slices.Contains(narrows, name); spec.NarrowOnRefresh != want {
			t.Errorf("template %s: NarrowOnRefresh %v, want %v", name, spec.NarrowOnRefresh, want)
		}
	}
	for _, tc := range []struct {
		entry string
		want  bool
	}{
		{`{"name":"p","template":"google","client_id":"c","client_secret_env":"S"}`, true},
		{`{"name":"p","template":"google","client_id":"c","client_secret_env":"S","narrow_on_refresh":false}`, false},
		{`{"name":"p","template":"github","client_id":"c","client_secret_env":"S","narrow_on_refresh":true}`, true},
		{`{"name":"p","kind":"oauth2","issuer":"https://idp.example","discovery":true,"client_id":"c","client_secret_env":"S"}`, false},
		{`{"name":"p","kind":"oauth2","issuer":"https://idp.example","discovery":true,"client_id":"c","client_secret_env":"S","narrow_on_refresh":true}`, true},
	} {
		cfg, err := parse(`{"providers":[`+tc.entry+`]}`, false, map[string]string{"S": "s"})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Providers[0].NarrowOnRefresh != tc.want {
			t.Errorf("%s: NarrowOnRefresh %v, want %v", tc.entry, cfg.Providers[0].NarrowOnRefresh, tc.want)
		}
	}
	if _, err := parse(`{"providers":[{"name":"k","kind":"api_key","narrow_on_refresh":true}]}`, false, nil); err == nil {
		t.Error("narrow_on_refresh accepted on an api_key provider")
	}
	_, p := fake(t, providertest.Options{}, map[string]any{"narrow_on_refresh": true})
	if !p.Info().NarrowOnRefresh {
		t.Error("Info does not say the provider narrows")
	}
}
