package consent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/vault"
)

// TestApprovalStaysInItsOrganization: clients and connections belong to
// organizations (issue 34). A client of beta cannot be granted an approval
// of acme's connection (nothing is written, announced or audited), and an
// approval of that kind written behind the package's back (an older
// replica) is found through nobody: not the client's approvals (cached or
// not), not the user's listing, not the holders of the connection. The
// acme client's own approval is untouched throughout.
func TestApprovalStaysInItsOrganization(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	alice := identity.User{Issuer: "https://idp.example", Subject: "alice"}
	for _, q := range []string{
		`INSERT INTO organizations (id, name) VALUES ('acme', 'Acme'), ('beta', 'Beta')`,
		`INSERT INTO clients (id, name, resources, providers, org_id)
			VALUES ('cl_acme', 'Acme files', '{https://mcp.acme.example/}', '{github}', 'acme'),
			       ('cl_beta', 'Beta files', '{https://mcp.beta.example/}', '{github}', 'beta')`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	line, err := keyring.GenerateKey(1)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := keyring.Parse(line)
	if err != nil {
		t.Fatal(err)
	}
	v, err := vault.New(vault.Config{Pool: pool, Keyring: keys})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := v.In("acme").Put(ctx, alice, "github", vault.Credential{AccessToken: "gho_acme", Scopes: []string{"repo"},
		AccountID: "42"})
	if err != nil {
		t.Fatal(err)
	}
	grant := func(client string) error {
		return consent.Record(ctx, pool, consent.Grant{User: alice, ClientID: client, Provider: "github",
			Scopes: []string{"repo"}, AccountID: "42", ConnectionID: conn.ID, Elicitation: "el_" + client, At: time.Now()})
	}
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// The attack: beta's client granted acme's connection.
	if err := grant("cl_beta"); !errors.Is(err, vault.ErrNotConnected) {
		t.Fatalf("an approval of acme's connection for beta's client: %v, want ErrNotConnected", err)
	}
	if n := count(`SELECT count(*) FROM consents WHERE client_id = 'cl_beta'`); n != 0 {
		t.Fatalf("%d approvals written for beta's client", n)
	}
	if n := count(`SELECT count(*) FROM audit_events WHERE kind = 'consent.granted' AND client_id = 'cl_beta'`); n != 0 {
		t.Fatalf("%d consent.granted rows for a grant that was refused", n)
	}
	// Nor for a connection id that is not the user's at the provider.
	if err := consent.Record(ctx, pool, consent.Grant{User: alice, ClientID: "cl_acme", Provider: "google",
		Scopes: []string{"repo"}, AccountID: "42", ConnectionID: conn.ID, At: time.Now()}); !errors.Is(err, vault.ErrNotConnected) {
		t.Fatalf("an approval naming the connection at another provider: %v", err)
	}
	// acme's own client: granted.
	if err := grant("cl_acme"); err != nil {
		t.Fatal(err)
	}

	// Written behind the package's back: found through nobody.
	if _, err := pool.Exec(ctx, `INSERT INTO consents (issuer, subject, client_id, provider, scopes, account_hash, granted_at,
		updated_at, connection_id) VALUES ($1, $2, 'cl_beta', 'github', '{repo}', $3, now(), now(), $4)`,
		alice.Issuer, alice.Subject, vault.AccountHash("42"), conn.ID); err != nil {
		t.Fatal(err)
	}
	cached := consent.NewStore(pool, time.Minute, 100, nil)
	pgtest.Listen(t, pool, cached.CacheSubscriber())
	for name, s := range map[string]*consent.Store{"uncached": consent.NewStore(pool, 0, 0, nil), "cached": cached} {
		if a, err := s.For(ctx, alice, "cl_beta", "github"); !errors.Is(err, consent.ErrNotGiven) {
			t.Fatalf("%s: beta's client finds %+v (%v)", name, a, err)
		}
		if _, err := s.Get(ctx, alice, "cl_beta", "github", conn.ID); !errors.Is(err, consent.ErrNotGiven) {
			t.Fatalf("%s: Get: %v", name, err)
		}
		if a, err := s.For(ctx, alice, "cl_acme", "github"); err != nil || len(a) != 1 || a[0].ConnectionID != conn.ID {
			t.Fatalf("%s: acme's client: %+v %v", name, a, err)
		}
		if m, err := s.OfClient(ctx, alice, "cl_beta"); err != nil || len(m) != 0 {
			t.Fatalf("%s: OfClient: %+v %v", name, m, err)
		}
		listed, err := s.OfUser(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		if len(listed) != 1 || listed[0].ClientID != "cl_acme" {
			t.Fatalf("%s: the user's listing: %+v", name, listed)
		}
	}
	holders, err := consent.HolderApprovals(ctx, pool, alice, "github", conn.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := holders["cl_beta"]; ok || len(holders) != 1 {
		t.Fatalf("holders of acme's connection: %+v", holders)
	}
	// In a deletion's transaction, the connection gone: its holders are
	// still told (acme's client), and HolderApprovalsIn, which knows the
	// connection's organization, leaves beta's out.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `DELETE FROM connections WHERE id = $1`, conn.ID); err != nil {
		t.Fatal(err)
	}
	if holders, err := consent.HolderApprovals(ctx, tx, alice, "github", conn.ID); err != nil || holders["cl_acme"].ConnectionID != conn.ID {
		t.Fatalf("holders of the deleted connection: %+v %v", holders, err)
	}
	holders, err = consent.HolderApprovalsIn(ctx, tx, conn.Org, alice, "github", conn.ID)
	if _, ok := holders["cl_beta"]; err != nil || ok || len(holders) != 1 {
		t.Fatalf("holders in acme of the deleted connection: %+v %v", holders, err)
	}
}
