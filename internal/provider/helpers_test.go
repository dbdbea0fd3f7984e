package provider_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"maps"
	"net/url"
	"testing"

	"golang.org/x/oauth2"

	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/provider/providertest"
)

const redirectURI = "https://connect.example.test/oauth/callback"

// fake starts a fake provider and builds the catalog entry "fake" for it from
// a providers file (dev mode: the fake speaks http), with overrides applied.
func fake(t *testing.T, opts providertest.Options, overrides map[string]any) (*providertest.Server, provider.OAuth) {
	t.Helper()
	srv := providertest.New(t, opts)
	entry := srv.ProviderConfig("fake", "FAKE_SECRET")
	maps.Copy(entry, overrides)
	for k, v := range overrides {
		if v == nil {
			delete(entry, k)
		}
	}
	cat := catalog(t, map[string]string{"FAKE_SECRET": srv.ClientSecret}, srv, entry)
	p, err := cat.OAuth("fake")
	if err != nil {
		t.Fatal(err)
	}
	return srv, p
}

func catalog(t *testing.T, env map[string]string, srv *providertest.Server, entries ...map[string]any) *provider.Catalog {
	t.Helper()
	data, err := json.Marshal(map[string]any{"providers": entries})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := provider.ParseConfig(data, provider.ParseOptions{Dev: true, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	cat, err := provider.New(context.Background(), cfg, provider.Options{HTTPClient: srv.Client()})
	if err != nil {
		t.Fatalf("provider.New: %v", err)
	}
	return cat
}

// authorize runs the browser part of the flow against the fake and returns
// the callback query, after checking state and PKCE parameters went out.
func authorize(t *testing.T, srv *providertest.Server, p provider.OAuth, scopes []string) (callback url.Values, verifier string) {
	t.Helper()
	verifier = oauth2.GenerateVerifier()
	state := rand.Text()
	u := p.AuthCodeURL(state, oauth2.S256ChallengeFromVerifier(verifier), redirectURI, scopes)
	back, err := srv.Approve(u)
	if err != nil {
		t.Fatal(err)
	}
	q := back.Query()
	if q.Get("error") == "" && q.Get("state") != state {
		t.Fatalf("state not echoed: %v", q)
	}
	return q, verifier
}

// connect runs a whole authorization and returns the exchanged token.
func connect(t *testing.T, srv *providertest.Server, p provider.OAuth, scopes []string) *provider.Token {
	t.Helper()
	q, verifier := authorize(t, srv, p, scopes)
	if err := p.CheckIssuer(q.Get("iss")); err != nil {
		t.Fatalf("CheckIssuer: %v", err)
	}
	tok, err := p.Exchange(context.Background(), q.Get("code"), verifier, redirectURI)
	if err != nil {
		t.Fatalf("Exchange: %v", err)
	}
	return tok
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
