package vault_test

import (
	"context"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/vault"
)

// TestTokenReadUnderTerminations (issue 35, a restart's dead connections):
// with the cache off, Token reads the connection's row each time; when the
// server ends the backend under that read (8 readers, a pool of 4, one
// backend ended every 20 ms), the read runs once more on a live one.
func TestTokenReadUnderTerminations(t *testing.T) {
	t.Parallel()
	kill := pgtest.NewTerminator(t, pgtest.URL(t))
	s := newStore(t, kill.Pool(t, 4), mustParse(t, keyLine(t, 1)), nil, 0)
	req := db.WithDeadlines(context.Background(), db.Deadlines{Acquire: 5 * time.Second})
	conn, err := s.Put(req, alice, "github", vault.Credential{AccessToken: "gho_1", RefreshToken: "ghr_1", TokenType: "bearer",
		Expiry: time.Now().Add(time.Hour), Scopes: []string{"repo"}})
	if err != nil {
		t.Fatal(err)
	}
	got := kill.ReadsUnderTerminations(t, req, 8, 40, func(ctx context.Context) error {
		_, err := s.Token(ctx, alice, "github", conn.ID, nil)
		return err
	})
	got.Check(t, "token reads")
}
