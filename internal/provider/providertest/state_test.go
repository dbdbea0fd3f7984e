package providertest

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestSaveLoad: tokens issued by one server are valid at another that loaded
// the first one's state, with their scopes; a revoked one stays revoked.
func TestSaveLoad(t *testing.T) {
	t.Parallel()
	a := New(t, Options{})
	tok := a.Grant([]string{"files.read"}, time.Hour)
	gone := a.Grant([]string{"files.read"}, time.Hour)
	a.RevokeAccessToken(gone.AccessToken)
	var buf bytes.Buffer
	if err := a.Save(&buf); err != nil {
		t.Fatal(err)
	}
	b := New(t, Options{})
	if err := b.Load(&buf); err != nil {
		t.Fatal(err)
	}
	if !b.Valid(tok.AccessToken) || b.Valid(gone.AccessToken) {
		t.Fatalf("after Load: valid %v, revoked one valid %v", b.Valid(tok.AccessToken), b.Valid(gone.AccessToken))
	}
	if s, ok := b.TokenScopes(tok.AccessToken); !ok || len(s) != 1 || s[0] != "files.read" {
		t.Fatalf("scopes after Load: %v %v", s, ok)
	}
}

// TestSaveLoadApp: a grant issued to one of the Apps (an organization's own
// client) is still that client's after Save and Load: its refresh token
// refreshes for it, and is refused to the provider's main client (the demo
// restarts with connections made through its second organization's app).
func TestSaveLoadApp(t *testing.T) {
	t.Parallel()
	opts := Options{ClientID: "main", ClientSecret: "main-secret", Apps: map[string]string{"org-app": "org-secret"}}
	a := New(t, opts)
	a.mu.Lock()
	tok := a.issueLocked(&grant{client: "org-app", scopes: []string{"files.read"}, subject: "alice"}, time.Hour, true)
	a.mu.Unlock()
	var buf bytes.Buffer
	if err := a.Save(&buf); err != nil {
		t.Fatal(err)
	}
	b := New(t, opts)
	if err := b.Load(&buf); err != nil {
		t.Fatal(err)
	}
	refresh := func(id, secret string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, b.TokenURL(), strings.NewReader(url.Values{
			"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(id, secret)
		resp, err := b.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := refresh("main", "main-secret"); st != http.StatusBadRequest {
		t.Fatalf("the main client refreshing the app's grant after Load: %d, want 400", st)
	}
	if st := refresh("org-app", "org-secret"); st != http.StatusOK {
		t.Fatalf("the app refreshing its own grant after Load: %d, want 200", st)
	}
}
