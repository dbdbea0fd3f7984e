package admin_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/admin"
)

func TestAdminKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noAdminLogin: true})
	ctx := context.Background()
	by := admin.Actor{Name: "cli:ops"}

	k, secret, err := e.keys.Create(ctx, "nightly report", 0, by)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^cka_[A-Za-z0-9_-]{43}$`).MatchString(secret) || !strings.HasPrefix(k.ID, "akey_") ||
		k.CreatedBy != "cli:ops" || !k.ExpiresAt.IsZero() {
		t.Fatalf("created %+v", k)
	}
	// Only the hash is stored.
	sum := sha256.Sum256([]byte(secret))
	if e.count(`SELECT count(*) FROM admin_keys WHERE key_hash = $1`, sum[:]) != 1 ||
		e.count(`SELECT count(*) FROM admin_keys WHERE position($1 in key_hash::text || name || created_by) > 0`, secret[4:]) != 0 {
		t.Fatal("the key is not stored by its hash alone")
	}
	got, err := e.keys.Authenticate(ctx, secret)
	if err != nil || got.ID != k.ID {
		t.Fatalf("authenticate: %+v %v", got, err)
	}
	for _, bad := range []string{"", "cka_", secret[:len(secret)-1], secret + "A", "cks_" + secret[4:],
		admin.KeyPrefix + strings.Repeat("A", 43), strings.ToUpper(secret)} {
		if _, err := e.keys.Authenticate(ctx, bad); !errors.Is(err, admin.ErrInvalidKey) {
			t.Errorf("authenticate %q: %v", bad, err)
		}
	}

	e.clock.Advance(time.Second)
	short, shortSecret, err := e.keys.Create(ctx, "one hour", time.Hour, by)
	if err != nil || short.ExpiresAt.IsZero() {
		t.Fatalf("create with a lifetime: %+v %v", short, err)
	}
	e.clock.Advance(61 * time.Minute)
	if _, err := e.keys.Authenticate(ctx, shortSecret); !errors.Is(err, admin.ErrInvalidKey) {
		t.Fatalf("expired key: %v", err)
	}
	if err := e.keys.Revoke(ctx, k.ID, by); err != nil {
		t.Fatal(err)
	}
	if _, err := e.keys.Authenticate(ctx, secret); !errors.Is(err, admin.ErrInvalidKey) {
		t.Fatalf("revoked key: %v", err)
	}
	if err := e.keys.Revoke(ctx, k.ID, by); !errors.Is(err, admin.ErrNotFound) {
		t.Fatalf("revoking twice: %v", err)
	}
	list, err := e.keys.List(ctx)
	if err != nil || len(list) != 2 || list[0].ID != k.ID || list[0].RevokedAt.IsZero() || list[0].LastUsedAt.IsZero() ||
		list[1].Active(e.clock.Now()) {
		t.Fatalf("list: %+v %v", list, err)
	}
	for _, bad := range []string{"", " ", strings.Repeat("x", 201), "a\nb"} {
		if _, _, err := e.keys.Create(ctx, bad, 0, by); !errors.Is(err, admin.ErrInvalid) {
			t.Errorf("create %q: %v", bad, err)
		}
	}
	if e.auditCount("admin.key_created") != 2 || e.auditCount("admin.key_revoked") != 1 {
		t.Fatal("key changes not audited")
	}
}

func TestAuditRetentionSweep(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noAdminLogin: true})
	ctx := context.Background()
	now := e.clock.Now()
	for _, age := range []time.Duration{100 * 24 * time.Hour, 91 * 24 * time.Hour, 89 * 24 * time.Hour, time.Hour} {
		if _, err := e.pool.Exec(ctx, `INSERT INTO audit_events (occurred_at, kind) VALUES ($1, 'test.event')`, now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := e.store.SweepAudit(ctx, admin.DefaultRetention)
	if err != nil || n != 2 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if left := e.auditCount("test.event"); left != 2 {
		t.Fatalf("%d events left, want the 2 younger than 90 days", left)
	}
	if _, err := e.store.SweepAudit(ctx, 0); !errors.Is(err, admin.ErrInvalid) {
		t.Fatalf("zero retention: %v", err)
	}
}
