package providertest

import (
	"bytes"
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
