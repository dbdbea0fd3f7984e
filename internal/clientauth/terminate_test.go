package clientauth_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/internal/pgtest"
)

// TestKeyReadUnderTerminations (issue 35, a restart's dead connections):
// without a cache every Authenticate looks its key up; a lookup whose
// backend the server ends under it (pg_terminate_backend: 8 callers on 4
// connections, one ended every 20 ms) is answered from a second try.
func TestKeyReadUnderTerminations(t *testing.T) {
	t.Parallel()
	kill := pgtest.NewTerminator(t, pgtest.URL(t))
	clients := clientauth.NewClients(clientauth.ClientsConfig{Pool: kill.Pool(t, 4), Logger: slog.New(slog.DiscardHandler)})
	req := db.WithDeadlines(context.Background(), db.Deadlines{Acquire: 5 * time.Second})
	cl, key, err := clients.Create(req, "terminated", []string{"https://mcp.terminate.example/"}, []string{"github"})
	if err != nil {
		t.Fatal(err)
	}
	got := kill.ReadsUnderTerminations(t, req, 8, 40, func(ctx context.Context) error {
		c, err := clients.Authenticate(ctx, key)
		if err == nil && c.ID != cl.ID {
			return fmt.Errorf("authenticated as %s, want %s", c.ID, cl.ID)
		}
		return err
	})
	got.Check(t, "key reads")
}
