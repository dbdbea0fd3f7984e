package clientauth_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/mcpauth/mcpauthtest"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/testkit"
	"github.com/connectd/connectd/migrations"
)

func newClock() *testkit.Clock {
	return testkit.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
}

func newClients(t *testing.T, clk *testkit.Clock) (*clientauth.Clients, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.Pool(t)
	return clientauth.NewClients(clientauth.ClientsConfig{Pool: pool, Now: clk.Now}), pool
}

var keyShape = regexp.MustCompile(`^cks_[A-Za-z0-9_-]{43}$`)

func TestClientKeyStoredOnlyAsHash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clients, pool := newClients(t, newClock())
	c, key, err := clients.Create(ctx, "Demo", []string{mcpauthtest.Resource}, []string{"github"})
	if err != nil {
		t.Fatal(err)
	}
	if !keyShape.MatchString(key) {
		t.Fatalf("key %q is not cks_ + 256 bits of base64url", key)
	}
	if raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(key, "cks_")); err != nil || len(raw) != 32 {
		t.Fatalf("key body: %d bytes, %v", len(raw), err)
	}
	rotated, err := clients.RotateKey(ctx, c.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Every row of both tables, as text: neither key (nor its secret part) may appear.
	var dump string
	err = pool.QueryRow(ctx, `SELECT (SELECT string_agg(row_to_json(c)::text, ' ') FROM clients c) || ' ' ||
		(SELECT string_agg(row_to_json(k)::text || encode(k.key_hash, 'escape'), ' ') FROM client_keys k)`).Scan(&dump)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{key, rotated} {
		if strings.Contains(dump, strings.TrimPrefix(k, "cks_")) {
			t.Fatal("a client key is stored in clear")
		}
	}
	rows, err := pool.Query(ctx, `SELECT key_hash FROM client_keys WHERE client_id = $1`, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[[32]byte]bool{sha256.Sum256([]byte(key)): true, sha256.Sum256([]byte(rotated)): true}
	n := 0
	for rows.Next() {
		var h []byte
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		if !want[[32]byte(h)] {
			t.Fatalf("stored %x is not the SHA-256 of an issued key", h)
		}
		n++
	}
	if rows.Err() != nil || n != 2 {
		t.Fatalf("%d keys stored, %v", n, rows.Err())
	}
}

func TestAuthenticateClientKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clients, _ := newClients(t, newClock())
	c, key, err := clients.Create(ctx, "Demo", []string{mcpauthtest.Resource, mcpauthtest.OtherResource}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := clients.Create(ctx, "Other", []string{"https://third-mcp.example.com/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := clients.Authenticate(ctx, key)
	if err != nil || got.ID != c.ID || got.Name != "Demo" || len(got.Resources) != 2 {
		t.Fatalf("right key: %+v %v", got, err)
	}
	if got, err := clients.Authenticate(ctx, otherKey); err != nil || got.ID == c.ID {
		t.Fatalf("another client's key authenticates %+v %v", got, err)
	}
	for name, k := range map[string]string{
		"wrong key":           "cks_" + base64.RawURLEncoding.EncodeToString(make([]byte, 32)),
		"one character off":   key[:len(key)-1] + flip(key[len(key)-1]),
		"no prefix":           strings.TrimPrefix(key, "cks_"),
		"truncated":           key[:20],
		"with trailing space": key + " ",
		"empty":               "",
	} {
		if _, err := clients.Authenticate(ctx, k); !errors.Is(err, clientauth.ErrInvalidClientKey) {
			t.Errorf("%s: got %v, want ErrInvalidClientKey", name, err)
		}
	}
	if err := clients.SetDisabled(ctx, c.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := clients.Authenticate(ctx, key); !errors.Is(err, clientauth.ErrClientDisabled) {
		t.Fatalf("disabled client: %v", err)
	}
	if err := clients.SetDisabled(ctx, c.ID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := clients.Authenticate(ctx, key); err != nil {
		t.Fatalf("re-enabled client: %v", err)
	}
	if err := clients.SetDisabled(ctx, "cli_nope", true); !errors.Is(err, clientauth.ErrClientNotFound) {
		t.Fatalf("unknown client: %v", err)
	}
}

func flip(b byte) string {
	if b == 'A' {
		return "B"
	}
	return "A"
}

func TestRotateKeyOverlap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := newClock()
	clients, _ := newClients(t, clk)
	c, key1, err := clients.Create(ctx, "Demo", []string{mcpauthtest.Resource}, nil)
	if err != nil {
		t.Fatal(err)
	}
	works := func(k string) bool {
		_, err := clients.Authenticate(ctx, k)
		if err != nil && !errors.Is(err, clientauth.ErrInvalidClientKey) {
			t.Fatal(err)
		}
		return err == nil
	}
	key2, err := clients.RotateKey(ctx, c.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(59 * time.Minute)
	if !works(key1) || !works(key2) {
		t.Fatal("within the overlap both keys must work")
	}
	clk.Advance(2 * time.Minute)
	if works(key1) {
		t.Fatal("the old key still works after the overlap")
	}
	if !works(key2) {
		t.Fatal("the new key stopped working")
	}
	// A second rotation shortens the open overlap; zero overlap ends it now.
	key3, err := clients.RotateKey(ctx, c.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if works(key2) || !works(key3) {
		t.Fatal("zero overlap: the old key must stop at once, the new one work")
	}
	if _, err := clients.RotateKey(ctx, "cli_nope", time.Hour); !errors.Is(err, clientauth.ErrClientNotFound) {
		t.Fatalf("unknown client: %v", err)
	}
}

// TestLastUsedThrottled: last_used_at is written at most once a minute, not on
// every request.
func TestLastUsedThrottled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := newClock()
	clients, pool := newClients(t, clk)
	c, key, err := clients.Create(ctx, "Demo", []string{mcpauthtest.Resource}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lastUsed := func() *time.Time {
		var at *time.Time
		if err := pool.QueryRow(ctx, `SELECT last_used_at FROM clients WHERE id = $1`, c.ID).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	if _, err := clients.Authenticate(ctx, key); err != nil {
		t.Fatal(err)
	}
	if at := lastUsed(); at == nil || !at.Equal(clk.Now()) {
		t.Fatalf("last_used_at %v after first use, want %v", at, clk.Now())
	}
	// Clear it behind the store's back: a write within the minute would restore it.
	if _, err := pool.Exec(ctx, `UPDATE clients SET last_used_at = NULL`); err != nil {
		t.Fatal(err)
	}
	clk.Advance(30 * time.Second)
	for range 5 {
		if _, err := clients.Authenticate(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	if at := lastUsed(); at != nil {
		t.Fatal("last_used_at written again within a minute")
	}
	clk.Advance(31 * time.Second)
	if _, err := clients.Authenticate(ctx, key); err != nil {
		t.Fatal(err)
	}
	if at := lastUsed(); at == nil || !at.Equal(clk.Now()) {
		t.Fatalf("last_used_at %v after a minute, want %v", at, clk.Now())
	}
}

func TestCreateClientValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clients, _ := newClients(t, newClock())
	tests := []struct {
		name      string
		cname     string
		resources []string
		providers []string
	}{
		{"no name", " ", []string{mcpauthtest.Resource}, nil},
		{"no resource", "x", nil, nil},
		{"http resource outside dev", "x", []string{"http://mcp.example.com"}, nil},
		{"javascript resource", "x", []string{"javascript:alert(1)"}, nil},
		{"file resource", "x", []string{"file:///etc/passwd"}, nil},
		{"relative resource", "x", []string{"/mcp"}, nil},
		{"resource with fragment", "x", []string{"https://mcp.example.com/#x"}, nil},
		{"resource with user info", "x", []string{"https://u:p@mcp.example.com/"}, nil},
		{"bad provider id", "x", []string{mcpauthtest.Resource}, []string{"Git Hub"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, _, err := clients.Create(ctx, tt.cname, tt.resources, tt.providers); !errors.Is(err, clientauth.ErrInvalidClient) {
				t.Fatalf("got %v, want ErrInvalidClient", err)
			}
		})
	}
}

// TestResourcesUnique: a resource URI belongs to one client (DESIGN invariant
// 14), disabled clients included, trailing-slash variants included; the refusal
// names the resource and its holder and creates nothing. The schema enforces
// it, so a write that bypasses Create is refused too.
func TestResourcesUnique(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clients, pool := newClients(t, newClock())
	holder, holderKey, err := clients.Create(ctx, "A", []string{mcpauthtest.Resource}, nil)
	if err != nil {
		t.Fatal(err)
	}
	off, _, err := clients.Create(ctx, "Off", []string{mcpauthtest.OtherResource + "/"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := clients.SetDisabled(ctx, off.ID, true); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		resources []string
		want      error  // nil: created
		holder    string // the client the error must name
	}{
		{"same resource", []string{mcpauthtest.Resource}, clientauth.ErrResourceTaken, holder.ID},
		{"with a trailing slash", []string{mcpauthtest.Resource + "/"}, clientauth.ErrResourceTaken, holder.ID},
		{"one of several", []string{"https://new.example.com/mcp", mcpauthtest.Resource}, clientauth.ErrResourceTaken, holder.ID},
		{"a disabled client's", []string{mcpauthtest.OtherResource + "/"}, clientauth.ErrResourceTaken, off.ID},
		{"a disabled client's, without the slash", []string{mcpauthtest.OtherResource}, clientauth.ErrResourceTaken, off.ID},
		{"listed twice", []string{"https://twice.example.com/mcp", "https://twice.example.com/mcp/"}, clientauth.ErrInvalidClient, ""},
		{"another path on the same host", []string{mcpauthtest.Resource + "2"}, nil, ""},
		{"another host", []string{"https://b.example.com/mcp"}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, err := clients.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			c, _, err := clients.Create(ctx, tt.name, tt.resources, nil)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if tt.holder != "" && !strings.Contains(err.Error(), tt.holder) {
				t.Errorf("error %q does not name the holder %s", err, tt.holder)
			}
			if !strings.Contains(err.Error(), strings.TrimRight(tt.resources[len(tt.resources)-1], "/")) {
				t.Errorf("error %q does not name the resource", err)
			}
			after, err := clients.List(ctx)
			if err != nil || len(after) != len(before) || c.ID != "" {
				t.Fatalf("a refused registration left a client: %d → %d clients, %v", len(before), len(after), err)
			}
		})
	}
	// Writes that do not go through Create: the schema refuses them.
	for name, sql := range map[string]string{
		"insert": `INSERT INTO clients (id, name, resources, org_id) VALUES ('cli_raw', 'raw', ARRAY['` + mcpauthtest.Resource + `'], 'default')`,
		"update": `UPDATE clients SET resources = ARRAY['https://b.example.com/mcp/'] WHERE id = '` + off.ID + `'`,
	} {
		if _, err := pool.Exec(ctx, sql); err == nil || !strings.Contains(err.Error(), "client_resources_pkey") {
			t.Errorf("%s bypassing Create: %v, want a unique violation", name, err)
		}
	}
	// A client may change its own resources, and what it drops is free again.
	if _, err := pool.Exec(ctx, `UPDATE clients SET resources = ARRAY['https://moved.example.com/mcp'] WHERE id = $1`, off.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := clients.Create(ctx, "Reuse", []string{mcpauthtest.OtherResource}, nil); err != nil {
		t.Fatalf("a dropped resource is still held: %v", err)
	}
	// The holder is untouched by all this.
	if got, err := clients.Authenticate(ctx, holderKey); err != nil || !slices.Equal(got.Resources, []string{mcpauthtest.Resource}) {
		t.Fatalf("holder after refusals: %+v %v", got, err)
	}
}

// TestUniqueResourcesMigration: upgrading a database whose clients already
// share a resource stops with an error naming the resource and the clients
// (which one keeps it is the operator's call); once resolved, it applies and
// indexes the existing resources.
func TestUniqueResourcesMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const version = 7 // migrations/00007_unique_resources.sql
	db, err := sql.Open("pgx", pgtest.EmptyURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := migrations.NewProvider(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, version-1); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO clients (id, name, resources) VALUES
		('cli_a', 'A', ARRAY['https://a.example/mcp']), ('cli_b', 'B', ARRAY['https://b.example/mcp', 'https://a.example/mcp/'])`); err != nil {
		t.Fatal(err)
	}
	_, err = p.UpTo(ctx, version)
	if err == nil || !strings.Contains(err.Error(), "https://a.example/mcp (clients cli_a, cli_b)") {
		t.Fatalf("migrating over duplicates: %v, want an error naming them", err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE clients SET resources = ARRAY['https://b.example/mcp'] WHERE id = 'cli_b'`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		t.Fatalf("migrating once resolved: %v", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM client_resources`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d resources indexed, %v; want 2", n, err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO clients (id, name, resources) VALUES ('cli_c', 'C', ARRAY['https://b.example/mcp'])`); err == nil {
		t.Fatal("an existing resource can be registered again after the upgrade")
	}
}
