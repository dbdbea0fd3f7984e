package mcpauth_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/pgtest"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClients(t *testing.T, clk *clock) (*mcpauth.Clients, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.Pool(t)
	return mcpauth.NewClients(mcpauth.ClientsConfig{Pool: pool, Now: clk.Now}), pool
}

var keyShape = regexp.MustCompile(`^cks_[A-Za-z0-9_-]{43}$`)

func TestClientKeyStoredOnlyAsHash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clients, pool := newClients(t, newClock())
	c, key, err := clients.Create(ctx, "Demo", []string{resource}, []string{"github"})
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
	c, key, err := clients.Create(ctx, "Demo", []string{resource, otherResource}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := clients.Create(ctx, "Other", []string{otherResource}, nil)
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
		if _, err := clients.Authenticate(ctx, k); !errors.Is(err, mcpauth.ErrInvalidClientKey) {
			t.Errorf("%s: got %v, want ErrInvalidClientKey", name, err)
		}
	}
	if err := clients.SetDisabled(ctx, c.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := clients.Authenticate(ctx, key); !errors.Is(err, mcpauth.ErrClientDisabled) {
		t.Fatalf("disabled client: %v", err)
	}
	if err := clients.SetDisabled(ctx, c.ID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := clients.Authenticate(ctx, key); err != nil {
		t.Fatalf("re-enabled client: %v", err)
	}
	if err := clients.SetDisabled(ctx, "cli_nope", true); !errors.Is(err, mcpauth.ErrClientNotFound) {
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
	c, key1, err := clients.Create(ctx, "Demo", []string{resource}, nil)
	if err != nil {
		t.Fatal(err)
	}
	works := func(k string) bool {
		_, err := clients.Authenticate(ctx, k)
		if err != nil && !errors.Is(err, mcpauth.ErrInvalidClientKey) {
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
	if _, err := clients.RotateKey(ctx, "cli_nope", time.Hour); !errors.Is(err, mcpauth.ErrClientNotFound) {
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
	c, key, err := clients.Create(ctx, "Demo", []string{resource}, nil)
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
		{"no name", " ", []string{resource}, nil},
		{"no resource", "x", nil, nil},
		{"http resource outside dev", "x", []string{"http://mcp.example.com"}, nil},
		{"javascript resource", "x", []string{"javascript:alert(1)"}, nil},
		{"file resource", "x", []string{"file:///etc/passwd"}, nil},
		{"relative resource", "x", []string{"/mcp"}, nil},
		{"resource with fragment", "x", []string{"https://mcp.example.com/#x"}, nil},
		{"resource with user info", "x", []string{"https://u:p@mcp.example.com/"}, nil},
		{"bad provider id", "x", []string{resource}, []string{"Git Hub"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, _, err := clients.Create(ctx, tt.cname, tt.resources, tt.providers); !errors.Is(err, mcpauth.ErrInvalidClient) {
				t.Fatalf("got %v, want ErrInvalidClient", err)
			}
		})
	}
}
