package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/provider/providertest"
)

// TestWithAppSendsTheAppsCredentials (the attack: an organization's
// connection obtained, refreshed or revoked with the deployment's app): the
// fake knows only the organization's app, and the catalog's entry carries
// the deployment's client id and secret. The shared entry is refused at the
// token endpoint; the app WithApp builds exchanges, refreshes and revokes
// with its own client id and secret, every other property of the entry the
// same.
func TestWithAppSendsTheAppsCredentials(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := providertest.New(t, providertest.Options{ClientID: "acme-app", ClientSecret: "acme-secret"})
	entry := srv.ProviderConfig("fake", "DEPLOYMENT_SECRET")
	entry["client_id"] = "deployment-app"
	cat := catalog(t, map[string]string{"DEPLOYMENT_SECRET": "deployment-secret"}, srv, entry)
	shared, err := cat.OAuth("fake")
	if err != nil {
		t.Fatal(err)
	}
	app, err := cat.WithApp("fake", provider.AppCredentials{ID: "app_acme", ClientID: "acme-app", Secret: "acme-secret"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := app.Info(), shared.Info(); got.AuthorizeHost != want.AuthorizeHost || got.PKCE != want.PKCE ||
		got.Revocation != want.Revocation || got.APIBaseURL != want.APIBaseURL || got.Name != want.Name {
		t.Fatalf("the app's Info %+v differs from the entry's %+v", got, want)
	}

	// The deployment's app is not the one the provider knows: a code
	// issued to the organization's app does not exchange with it.
	q, verifier := authorize(t, srv, app, nil)
	if _, err := shared.Exchange(ctx, q.Get("code"), verifier, redirectURI); !errors.Is(err, provider.ErrRejected) {
		t.Fatalf("exchange with the deployment's app: %v, want ErrRejected (invalid_client)", err)
	}

	// The authorize URL names the app's client id, not the deployment's.
	u := app.AuthCodeURL("st", "ch", redirectURI, nil)
	if !strings.Contains(u, "client_id=acme-app") || strings.Contains(u, "deployment-app") {
		t.Fatalf("authorize URL %s does not name the app's client id alone", u)
	}
	tok := connect(t, srv, app, nil)
	if tok.AccessToken == "" || tok.RefreshToken == "" {
		t.Fatalf("exchange with the app: %v", tok)
	}
	if _, err := shared.Refresh(ctx, tok.RefreshToken); !errors.Is(err, provider.ErrRejected) {
		t.Fatalf("refresh with the deployment's app: %v, want ErrRejected", err)
	}
	tok2, err := app.Refresh(ctx, tok.RefreshToken)
	if err != nil {
		t.Fatalf("refresh with the app: %v", err)
	}
	if err := provider.RevokeGrant(ctx, app, tok2.AccessToken, tok2.RefreshToken); err != nil {
		t.Fatalf("revoke with the app: %v", err)
	}
	revs := srv.Revocations()
	if len(revs) == 0 {
		t.Fatal("no revocation reached the provider")
	}
	for _, r := range revs {
		if r.ClientID != "acme-app" {
			t.Fatalf("revocation authenticated as %q, want the app acme-app", r.ClientID)
		}
	}
	for _, r := range srv.TokenRequests() {
		if r.ClientAuth != "basic" {
			t.Fatalf("token request authenticated by %q, want basic", r.ClientAuth)
		}
	}
	// Unknown and api_key providers have no app.
	if _, err := cat.WithApp("nope", provider.AppCredentials{ID: "a", ClientID: "c"}); !errors.Is(err, provider.ErrUnknownProvider) {
		t.Fatalf("WithApp of an unknown provider: %v", err)
	}
	if _, err := cat.WithApp("fake", provider.AppCredentials{ID: "a"}); !errors.Is(err, provider.ErrAppCredentials) {
		t.Fatalf("WithApp without a client id: %v", err)
	}
}

// TestAppBulkheadsAreSeparate: "bulkheads are per (organization, provider
// app)" — an organization's app whose calls hang holds its own slots only:
// another app at the same provider, and the deployment's shared entry, are
// answered at once, while a second handle on the hung app (the same app id,
// built again after a secret rotation) shares its slots.
func TestAppBulkheadsAreSeparate(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var hung atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, _, _ := r.BasicAuth(); id == "slow-app" {
			hung.Add(1)
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "at", "token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	data, _ := json.Marshal(map[string]any{"providers": []map[string]any{{"name": "p", "kind": "oauth2",
		"client_id": "deployment", "client_secret_env": "S", "authorize_url": srv.URL + "/authorize", "token_url": srv.URL + "/token"}}})
	cfg, err := provider.ParseConfig(data, provider.ParseOptions{Dev: true, Getenv: func(string) string { return "s" }})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := provider.New(context.Background(), cfg, provider.Options{HTTPClient: srv.Client(), MaxConcurrent: 2})
	if err != nil {
		t.Fatal(err)
	}
	app := func(id, clientID string) provider.OAuth {
		p, err := cat.WithApp("p", provider.AppCredentials{ID: id, ClientID: clientID, Secret: "x"})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx := context.Background()
	slow := app("app_slow", "slow-app")
	for range 2 {
		go slow.Refresh(ctx, "rt")
	}
	for hung.Load() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The same app built again (its secret rotated): the same slots.
	if _, err := app("app_slow", "slow-app").Refresh(cctx, "rt"); !errors.Is(err, provider.ErrBusy) {
		t.Fatalf("a third call of the hung app: %v, want ErrBusy", err)
	}
	if _, err := app("app_other", "other-app").Refresh(cctx, "rt"); err != nil {
		t.Fatalf("another organization's app while one hangs: %v", err)
	}
	shared, _ := cat.OAuth("p")
	if _, err := shared.Refresh(cctx, "rt"); err != nil {
		t.Fatalf("the deployment's app while an organization's hangs: %v", err)
	}
}

// TestSharedAppPolicy: shared_app is "default" unless the file says "all";
// anything else, or on an api_key provider, is refused naming the field.
func TestSharedAppPolicy(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Options{})
	parse := func(entry map[string]any) (*provider.Config, error) {
		data, _ := json.Marshal(map[string]any{"providers": []map[string]any{entry}})
		return provider.ParseConfig(data, provider.ParseOptions{Dev: true, Getenv: func(string) string { return "s" }})
	}
	for _, tt := range []struct {
		value any
		want  provider.SharedAppPolicy
	}{{nil, provider.SharedDefault}, {"default", provider.SharedDefault}, {"all", provider.SharedAll}} {
		e := srv.ProviderConfig("fake", "S")
		if tt.value != nil {
			e["shared_app"] = tt.value
		}
		cfg, err := parse(e)
		if err != nil {
			t.Fatalf("shared_app %v: %v", tt.value, err)
		}
		cat, err := provider.New(context.Background(), cfg, provider.Options{HTTPClient: srv.Client()})
		if err != nil {
			t.Fatal(err)
		}
		if got := cat.SharedApp("fake"); got != tt.want {
			t.Errorf("shared_app %v: %q, want %q", tt.value, got, tt.want)
		}
	}
	e := srv.ProviderConfig("fake", "S")
	e["shared_app"] = "everyone"
	if _, err := parse(e); err == nil || !strings.Contains(err.Error(), "shared_app") {
		t.Errorf("shared_app everyone: %v, want an error naming shared_app", err)
	}
	if _, err := parse(map[string]any{"name": "k", "kind": "api_key", "shared_app": "all"}); err == nil ||
		!strings.Contains(err.Error(), "shared_app: does not apply") {
		t.Errorf("shared_app on an api_key provider: %v", err)
	}
}
