package vault_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/vault"
)

// TestDefaultHandleIgnoresOtherOrganizations: the handle every caller has
// today (New's) is the default organization's. A connection of another
// organization (here moved there behind the vault's back, as another
// organization's handle would have stored it) is not found, read,
// refreshed, labelled or deleted through it, nor listed: ErrNotConnected,
// as for an id that does not exist. It uses only the API from before
// organizations, so it runs on the code before them too (which fails it).
func TestDefaultHandleIgnoresOtherOrganizations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, p := fakeProvider(t, providertest.Options{RotateRefreshTokens: true})
	db := pool(t)
	s := newStore(t, db, mustParse(t, keyLine(t, 1)), p, time.Minute)
	tok := srv.Grant([]string{"read"}, 30*time.Second) // within the skew: a read that found it would refresh it
	conn, err := s.Put(ctx, alice, "fake", credOf(tok))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO organizations (id, name) VALUES ('acme', 'Acme')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `UPDATE connections SET org_id = 'acme' WHERE id = $1`, conn.ID); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"Token", func() error { _, err := s.Token(ctx, alice, "fake", conn.ID, nil); return err }},
		{"Token, the only one", func() error { _, err := s.Token(ctx, alice, "fake", "", nil); return err }},
		{"Get", func() error { _, _, err := s.Get(ctx, alice, "fake", conn.ID); return err }},
		{"Lookup", func() error { _, err := s.Lookup(ctx, alice, "fake", conn.ID); return err }},
		{"Narrowed", func() error { _, err := s.Narrowed(ctx, alice, "fake", conn.ID, []string{"read"}, ""); return err }},
		{"SetLabel", func() error { return s.SetLabel(ctx, alice, "fake", conn.ID, "mine") }},
		{"Delete", func() error { _, err := s.Delete(ctx, alice, "fake", conn.ID); return err }},
	} {
		if err := tc.do(); !errors.Is(err, vault.ErrNotConnected) {
			t.Errorf("%s of another organization's connection: %v, want ErrNotConnected", tc.name, err)
		}
	}
	if list, err := s.List(ctx, alice); err != nil || len(list) != 0 {
		t.Errorf("List shows %d connections of another organization (%v)", len(list), err)
	}
	if ok, err := s.Exists(ctx, alice, "fake"); err != nil || ok {
		t.Errorf("Exists: %t %v", ok, err)
	}
	if n := srv.Counts(); n.Refresh != 0 || n.Revoke != 0 {
		t.Errorf("the provider saw %d refreshes and %d revocations", n.Refresh, n.Revoke)
	}
	var label string
	if err := db.QueryRow(ctx, `SELECT label FROM connections WHERE id = $1`, conn.ID).Scan(&label); err != nil || label != "" {
		t.Fatalf("the connection is gone or relabelled: %q %v", label, err)
	}
}
