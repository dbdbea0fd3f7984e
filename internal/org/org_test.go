package org_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/testkit"
)

const (
	testKeys  = "1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	appSecret = "acme-app-secret-0123456789"
)

// env is one test's database, catalog and store. The catalog has "fake"
// (a fake OAuth provider whose known client is the acme organization's app,
// not the deployment's) with the given shared_app, "shared" (shared_app
// all), and "key" (api_key).
type env struct {
	pool  *pgxpool.Pool
	srv   *providertest.Server
	cat   *provider.Catalog
	keys  *keyring.Keyring
	store *org.Store
	logs  *testkit.LogBuffer
}

func newEnv(t *testing.T, sharedApp string) *env {
	t.Helper()
	e := &env{pool: pgtest.Pool(t), logs: &testkit.LogBuffer{}}
	e.srv = providertest.New(t, providertest.Options{ClientID: "acme-app", ClientSecret: appSecret})
	fake := e.srv.ProviderConfig("fake", "DEPLOYMENT_SECRET")
	fake["client_id"] = "deployment-app"
	if sharedApp != "" {
		fake["shared_app"] = sharedApp
	}
	shared := e.srv.ProviderConfig("shared", "DEPLOYMENT_SECRET")
	shared["shared_app"] = "all"
	data, _ := json.Marshal(map[string]any{"providers": []map[string]any{fake, shared, {"name": "key", "kind": "api_key"}}})
	cfg, err := provider.ParseConfig(data, provider.ParseOptions{Dev: true,
		Getenv: func(string) string { return "deployment-secret" }})
	if err != nil {
		t.Fatal(err)
	}
	if e.cat, err = provider.New(context.Background(), cfg, provider.Options{HTTPClient: e.srv.Client()}); err != nil {
		t.Fatal(err)
	}
	if e.keys, err = keyring.Parse(testKeys); err != nil {
		t.Fatal(err)
	}
	e.store = e.newStore(t, e.pool, time.Hour)
	return e
}

func (e *env) newStore(t *testing.T, pool *pgxpool.Pool, ttl time.Duration) *org.Store {
	return org.New(org.Config{Pool: pool, Keyring: e.keys, Catalog: e.cat, CacheTTL: ttl,
		Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
}

func (e *env) create(t *testing.T, id string) {
	t.Helper()
	if _, err := e.store.Create(context.Background(), id, "Org "+id, "test"); err != nil {
		t.Fatal(err)
	}
}

func TestOrganizations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, "")
	s := e.store
	o, err := s.Create(ctx, "acme", "Acme Corp", "cli:ops")
	if err != nil || o.ID != "acme" || o.Name != "Acme Corp" || o.CreatedAt.IsZero() {
		t.Fatalf("Create: %+v, %v", o, err)
	}
	if _, err := s.Create(ctx, "acme", "Again", "cli:ops"); !errors.Is(err, org.ErrExists) || !errors.Is(err, problem.ErrConflict) {
		t.Fatalf("Create twice: %v, want ErrExists", err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "acme" || list[1].ID != "default" {
		t.Fatalf("List: %+v, %v", list, err)
	}
	name, color, logo := "Acme", "#1f6feb", "https://cdn.acme.example/logo.svg"
	o, err = s.Update(ctx, "acme", org.Update{Name: &name, BrandColor: &color, LogoURL: &logo}, "cli:ops")
	if err != nil || o.Name != name || o.BrandColor != color || o.LogoURL != logo {
		t.Fatalf("Update: %+v, %v", o, err)
	}
	if got, err := s.Get(ctx, "acme"); err != nil || got != o {
		t.Fatalf("Get after Update: %+v, %v; want %+v", got, err, o)
	}
	if _, err := s.Get(ctx, "nope"); !errors.Is(err, org.ErrNotFound) {
		t.Fatalf("Get unknown: %v", err)
	}
	var n int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE kind LIKE 'org.%' AND target = 'acme'`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("audit rows: %d, %v; want org.created and org.updated", n, err)
	}

	bad := []struct {
		name string
		err  error
	}{
		{"create bad id", func() error { _, err := s.Create(ctx, "Acme", "x", "t"); return err }()},
		{"create id ending in -", func() error { _, err := s.Create(ctx, "acme-", "x", "t"); return err }()},
		{"create blank name", func() error { _, err := s.Create(ctx, "beta", " ", "t"); return err }()},
		{"create long name", func() error { _, err := s.Create(ctx, "beta", strings.Repeat("n", 101), "t"); return err }()},
		{"create two-line name", func() error { _, err := s.Create(ctx, "beta", "a\nb", "t"); return err }()},
	}
	for _, c := range []string{"1f6feb", "#1F6FEB", "#1f6fe", "#1f6febx", "red", "#gggggg"} {
		c := c
		bad = append(bad, struct {
			name string
			err  error
		}{"brand color " + c, func() error { _, err := s.Update(ctx, "acme", org.Update{BrandColor: &c}, "t"); return err }()})
	}
	for _, u := range []string{"javascript:alert(1)", "data:image/svg+xml,<svg/>", "http://cdn.acme.example/logo.svg",
		"/logo.svg", "https://u:p@cdn.acme.example/l.svg", "JavaScript:alert(document.cookie)", "https://cdn.acme.example/x'onerror"} {
		u := u
		bad = append(bad, struct {
			name string
			err  error
		}{"logo " + u, func() error { _, err := s.Update(ctx, "acme", org.Update{LogoURL: &u}, "t"); return err }()})
	}
	for _, b := range bad {
		if !errors.Is(b.err, org.ErrInvalid) || !errors.Is(b.err, problem.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", b.name, b.err)
		}
	}
	// Nothing of the refused updates was written.
	if got, _ := s.Get(ctx, "acme"); got != o {
		t.Fatalf("a refused update changed the organization: %+v", got)
	}
	empty := ""
	if o, err = s.Update(ctx, "acme", org.Update{BrandColor: &empty, LogoURL: &empty}, "t"); err != nil || o.BrandColor != "" || o.LogoURL != "" {
		t.Fatalf("removing brand color and logo: %+v, %v", o, err)
	}
}

// TestJavascriptLogoRefused (attack): an organization admin sets a logo
// URL that would run script, or load from anywhere, where pages show it.
func TestJavascriptLogoRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, "")
	e.create(t, "acme")
	for _, u := range []string{"javascript:alert(1)", " javascript:alert(1)", "data:text/html,<script>alert(1)</script>",
		"vbscript:x", "https://cdn.example/\"><script>"} {
		if _, err := e.store.Update(ctx, "acme", org.Update{LogoURL: &u}, "t"); !errors.Is(err, org.ErrInvalid) {
			t.Errorf("logo %q: %v, want ErrInvalid", u, err)
		}
		if msg := fmt.Sprint(org.CheckLogoURL(u)); strings.Contains(msg, "alert") || strings.Contains(msg, "<script") {
			t.Errorf("the refusal of %q repeats the URL", u)
		}
	}
	if got, _ := e.store.Get(ctx, "acme"); got.LogoURL != "" {
		t.Fatalf("logo stored: %q", got.LogoURL)
	}
	// The column itself: nothing else writes it.
	var n int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM organizations WHERE logo_url LIKE '%script%'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows with a script logo (%v)", n, err)
	}
}

func TestDeleteRefusedWhileInUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, "")
	e.create(t, "acme")
	e.create(t, "beta")
	if _, _, err := e.store.SetApp(ctx, "beta", "fake", "beta-app", appSecret, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `INSERT INTO clients (id, name, resources, providers, created_at, org_id)
		VALUES ('cli_acme1', 'Acme MCP', '{https://mcp.acme.example}', '{}', now(), 'acme')`); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Delete(ctx, "acme", "t"); !errors.Is(err, org.ErrInUse) || !errors.Is(err, problem.ErrConflict) {
		t.Fatalf("Delete with a client: %v, want ErrInUse", err)
	}
	if _, err := e.store.Get(ctx, "acme"); err != nil {
		t.Fatalf("the refused delete removed it: %v", err)
	}
	if err := e.store.Delete(ctx, "default", "t"); !errors.Is(err, org.ErrDefault) {
		t.Fatalf("Delete default: %v, want ErrDefault", err)
	}
	if err := e.store.Delete(ctx, "nope", "t"); !errors.Is(err, org.ErrNotFound) {
		t.Fatalf("Delete unknown: %v, want ErrNotFound", err)
	}
	// Without clients or connections it goes, with its apps.
	if err := e.store.Delete(ctx, "beta", "t"); err != nil {
		t.Fatalf("Delete beta: %v", err)
	}
	var n int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM provider_apps WHERE org_id = 'beta'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("beta's apps: %d (%v)", n, err)
	}
}

func TestSetApp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, "")
	e.create(t, "acme")
	s := e.store
	a, replaced, err := s.SetApp(ctx, "acme", "fake", "acme-app", "first-secret", "cli:ops")
	if err != nil || replaced != "" || !strings.HasPrefix(a.ID, "app_") || a.Org != "acme" || a.Provider != "fake" ||
		a.ClientID != "acme-app" || !a.HasSecret {
		t.Fatalf("SetApp: %+v %q %v", a, replaced, err)
	}
	// The secret rotates: the same app.
	b, replaced, err := s.SetApp(ctx, "acme", "fake", "acme-app", appSecret, "cli:ops")
	if err != nil || b.ID != a.ID || replaced != "" {
		t.Fatalf("rotating the secret: %+v %q %v, want the same app %s", b, replaced, err, a.ID)
	}
	// A new client id: a new app, replacing the old.
	c, replaced, err := s.SetApp(ctx, "acme", "fake", "acme-app-2", appSecret, "cli:ops")
	if err != nil || c.ID == a.ID || replaced != a.ID {
		t.Fatalf("a new client id: %+v %q %v, want a new app replacing %s", c, replaced, err, a.ID)
	}
	if _, err := s.ByID(ctx, "acme", a.ID, "fake"); !errors.Is(err, org.ErrAppNotFound) {
		t.Fatalf("ByID of the replaced app: %v, want ErrAppNotFound (its refresh tokens are the old app's)", err)
	}
	apps, err := s.Apps(ctx, "acme")
	if err != nil || len(apps) != 1 || apps[0].ID != c.ID {
		t.Fatalf("Apps: %+v %v", apps, err)
	}
	if got, err := s.App(ctx, "acme", "fake"); err != nil || got != apps[0] {
		t.Fatalf("App: %+v %v", got, err)
	}

	for _, tt := range []struct {
		name           string
		org, prov, cid string
		secret         provider.Secret
		want           error
	}{
		{"unknown provider", "acme", "gitlab", "x", "s", org.ErrUnknownProvider},
		{"malformed provider", "acme", "Fake/../x", "x", "s", org.ErrUnknownProvider},
		{"api_key provider", "acme", "key", "x", "s", org.ErrAPIKeyProvider},
		{"unknown organization", "nope", "fake", "x", "s", org.ErrNotFound},
		{"bad organization id", "-x", "fake", "x", "s", org.ErrInvalid},
		{"empty client id", "acme", "fake", "", "s", org.ErrInvalid},
		{"client id with a space", "acme", "fake", "a b", "s", org.ErrInvalid},
		{"empty secret", "acme", "fake", "x", "", org.ErrInvalid},
		{"two-line secret", "acme", "fake", "x", "a\nb", org.ErrInvalid},
	} {
		if _, _, err := s.SetApp(ctx, tt.org, tt.prov, tt.cid, tt.secret, "t"); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	if _, err := s.RemoveApp(ctx, "acme", "fake", "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RemoveApp(ctx, "acme", "fake", "t"); !errors.Is(err, org.ErrAppNotFound) {
		t.Fatalf("RemoveApp twice: %v", err)
	}
	var kinds []string
	rows, _ := e.pool.Query(ctx, `SELECT kind FROM audit_events WHERE kind LIKE 'org.app%' ORDER BY id`)
	for rows.Next() {
		var k string
		rows.Scan(&k)
		kinds = append(kinds, k)
	}
	if strings.Join(kinds, ",") != "org.app_set,org.app_set,org.app_set,org.app_removed" {
		t.Fatalf("audit: %v", kinds)
	}
}

// TestAppSecretNeverShown (attack): whatever reads an app — App, Apps, its
// JSON, fmt, the log lines of SetApp, the audit trail, the errors of a
// refused SetApp — the secret is not there; and the stored bytes do not
// hold it either.
func TestAppSecretNeverShown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, "")
	e.create(t, "acme")
	a, _, err := e.store.SetApp(ctx, "acme", "fake", "acme-app", appSecret, "cli:ops")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	got, _ := e.store.App(ctx, "acme", "fake")
	apps, _ := e.store.Apps(ctx, "acme")
	j, _ := json.Marshal(apps)
	fmt.Fprintf(&out, "%v %+v %#v %s", a, got, apps, j)
	// Refusals that see the secret.
	_, _, err1 := e.store.SetApp(ctx, "acme", "key", "acme-app", appSecret, "t")
	_, _, err2 := e.store.SetApp(ctx, "acme", "fake", "", appSecret, "t")
	_, _, err3 := e.store.SetApp(ctx, "acme", "fake", "acme-app", appSecret+"\x00", "t")
	fmt.Fprint(&out, err1, err2, err3)
	var audit string
	if err := e.pool.QueryRow(ctx, `SELECT string_agg(detail::text, ' ') FROM audit_events`).Scan(&audit); err != nil {
		t.Fatal(err)
	}
	var stored []byte
	if err := e.pool.QueryRow(ctx, `SELECT secret FROM provider_apps WHERE id = $1`, a.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"values": out.String(), "logs": e.logs.String(), "audit": audit} {
		if strings.Contains(text, appSecret) {
			t.Errorf("the secret is in the %s: %s", what, text)
		}
	}
	if !strings.Contains(e.logs.String(), "provider app set") {
		t.Fatalf("no log line of SetApp (the scan looked at nothing): %s", e.logs.String())
	}
	if bytes.Contains(stored, []byte(appSecret)) || bytes.Contains(stored, []byte(appSecret[:8])) {
		t.Fatal("the stored bytes hold the secret")
	}
}

// TestCopiedSecretDoesNotOpen (attack): someone with write access to the
// table copies org A's sealed secret onto org B's app row (or onto a row
// of A's at another provider), hoping B's connections go out with A's
// secret. The secret is bound to the row: it does not open, and the
// resolve fails rather than use it.
func TestCopiedSecretDoesNotOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, "")
	e.create(t, "acme")
	e.create(t, "beta")
	a, _, err := e.store.SetApp(ctx, "acme", "fake", "acme-app", appSecret, "t")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := e.store.SetApp(ctx, "beta", "fake", "beta-app", "beta-secret", "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE provider_apps SET (key_version, secret) =
		(SELECT key_version, secret FROM provider_apps WHERE id = $1) WHERE id = $2`, a.ID, b.ID); err != nil {
		t.Fatal(err)
	}
	fresh := e.newStore(t, e.pool, -1) // nothing cached
	if _, err := fresh.Resolve(ctx, "beta", "fake"); !errors.Is(err, org.ErrAppSecret) {
		t.Fatalf("Resolve with a copied secret: %v, want ErrAppSecret", err)
	}
	if _, err := fresh.ByID(ctx, "beta", b.ID, "fake"); !errors.Is(err, org.ErrAppSecret) {
		t.Fatalf("ByID with a copied secret: %v, want ErrAppSecret", err)
	}
	// Also with the client id copied: the app id is bound too.
	if _, err := e.pool.Exec(ctx, `UPDATE provider_apps SET client_id = 'acme-app' WHERE id = $1`, b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.Resolve(ctx, "beta", "fake"); !errors.Is(err, org.ErrAppSecret) {
		t.Fatalf("Resolve with a copied secret and client id: %v, want ErrAppSecret", err)
	}
	// A's own still opens.
	if r, err := fresh.Resolve(ctx, "acme", "fake"); err != nil || r.AppID != a.ID {
		t.Fatalf("A's own app: %+v %v", r, err)
	}
}

// TestResolve: own app, the shared app for the default organization,
// shared_app all, ErrNoApp otherwise; and the app resolved is the one the
// provider's token endpoint accepts.
func TestResolve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, "")
	e.create(t, "acme")
	e.create(t, "beta")
	s := e.store
	acme, _, err := s.SetApp(ctx, "acme", "fake", "acme-app", appSecret, "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		org, prov string
		app       string // "" shared
		err       error
	}{
		{"acme", "fake", acme.ID, nil},
		{"default", "fake", "", nil}, // a single-team deployment sees no change
		{"beta", "fake", "", org.ErrNoApp},
		{"beta", "shared", "", nil}, // shared_app: all
		{"acme", "shared", "", nil},
		{"beta", "key", "", org.ErrAPIKeyProvider},
		{"beta", "nope", "", org.ErrUnknownProvider},
		{"gamma", "fake", "", org.ErrNotFound},
		{"Gamma", "fake", "", org.ErrInvalid},
	} {
		r, err := s.Resolve(ctx, tt.org, tt.prov)
		if !errors.Is(err, tt.err) || (err == nil && (r.AppID != tt.app || r.OAuth == nil)) {
			t.Errorf("Resolve(%s, %s) = %+v, %v; want app %q, %v", tt.org, tt.prov, r, err, tt.app, tt.err)
		}
	}
	_, err = s.Resolve(ctx, "beta", "fake")
	if d, _ := problem.Description(err); !strings.Contains(d, "beta") || !strings.Contains(d, "connectd orgs apps set beta fake") {
		t.Fatalf("ErrNoApp's description %q does not name the organization and the command", d)
	}
	// The resolved app is what the provider knows.
	r, _ := s.Resolve(ctx, "acme", "fake")
	if tok := connectWith(t, e.srv, r.OAuth); tok.RefreshToken == "" {
		t.Fatal("no refresh token")
	}
	byID, err := s.ByID(ctx, "acme", acme.ID, "fake")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := byID.Refresh(ctx, connectWith(t, e.srv, r.OAuth).RefreshToken); err != nil {
		t.Fatalf("refresh with ByID's app: %v", err)
	}
	// A connection of beta naming acme's app (a row moved, a bug) finds
	// nothing: an app is only ever its own organization's connections'.
	if _, err := s.ByID(ctx, "beta", acme.ID, "fake"); !errors.Is(err, org.ErrAppNotFound) {
		t.Fatalf("beta's connection naming acme's app: %v, want ErrAppNotFound", err)
	}
	if _, err := s.ByID(ctx, "acme", acme.ID, "shared"); !errors.Is(err, org.ErrAppNotFound) {
		t.Fatalf("ByID at another provider: %v", err)
	}
	if p, err := s.ByID(ctx, "acme", "", "fake"); err != nil || p.Info().Name != "fake" {
		t.Fatalf("ByID of the shared app: %v", err)
	}

	// shared_app all on fake: beta falls back.
	e2 := newEnv(t, "all")
	e2.create(t, "beta")
	if r, err := e2.store.Resolve(ctx, "beta", "fake"); err != nil || r.AppID != "" {
		t.Fatalf("shared_app all: %+v %v", r, err)
	}
}

// TestResolveNeverCrossesOrganizations (attack): org A resolves, again and
// again, warm and cold, while org B sets, rotates and replaces its app at
// the same provider; A never gets B's app (nor B A's), and a stored
// connection of B's app named by id is never built with A's credentials.
func TestResolveNeverCrossesOrganizations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, "")
	pgtest.Listen(t, e.pool, e.store.CacheSubscriber()) // warm answers too
	e.create(t, "acme")
	e.create(t, "beta")
	a, _, _ := e.store.SetApp(ctx, "acme", "fake", "acme-app", appSecret, "t")
	check := func(step string) {
		t.Helper()
		ra, err := e.store.Resolve(ctx, "acme", "fake")
		if err != nil || ra.AppID != a.ID {
			t.Fatalf("%s: acme resolved %q (%v), want its own %s", step, ra.AppID, err, a.ID)
		}
		rb, err := e.store.Resolve(ctx, "beta", "fake")
		if err == nil && rb.AppID == a.ID {
			t.Fatalf("%s: beta resolved acme's app", step)
		}
	}
	check("before beta has an app")
	for i := range 3 {
		b, _, err := e.store.SetApp(ctx, "beta", "fake", fmt.Sprintf("beta-app-%d", i), "beta-secret", "t")
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("beta's app %d", i))
		rb, err := e.store.Resolve(ctx, "beta", "fake")
		if err != nil || rb.AppID != b.ID {
			t.Fatalf("beta resolved %q (%v), want %s", rb.AppID, err, b.ID)
		}
		// beta's app by id, built: its client id is beta's, not acme's.
		p, err := e.store.ByID(ctx, "beta", b.ID, "fake")
		if err != nil {
			t.Fatal(err)
		}
		if u := p.AuthCodeURL("s", "c", "https://x.example/cb", nil); strings.Contains(u, "client_id=acme-app") {
			t.Fatalf("beta's app authorizes as acme's: %s", u)
		}
	}
	if _, err := e.store.RemoveApp(ctx, "beta", "fake", "t"); err != nil {
		t.Fatal(err)
	}
	check("after beta's app went")
	if _, err := e.store.Resolve(ctx, "beta", "fake"); !errors.Is(err, org.ErrNoApp) {
		t.Fatalf("beta after removing its app: %v, want ErrNoApp (never acme's)", err)
	}
}

// TestResolveCache: a warm Resolve does not query the database (the pool
// is closed under it); a SetApp on another replica reaches this one's
// cache within a second by notification, not after the TTL.
func TestResolveCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, "")
	e.create(t, "acme")
	// Two replicas on two pools of the same database.
	poolA := e.pool
	poolB := pgtest.NewPool(t, e.pool.Config().ConnString())
	a := e.newStore(t, poolA, time.Hour)
	b := e.newStore(t, poolB, time.Hour)
	pgtest.Listen(t, poolA, a.CacheSubscriber())
	pgtest.Listen(t, poolB, b.CacheSubscriber())

	first, _, err := a.SetApp(ctx, "acme", "fake", "acme-app", appSecret, "t")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := b.Resolve(ctx, "acme", "fake"); err != nil || r.AppID != first.ID {
		t.Fatalf("b: %+v %v", r, err)
	}
	// Warm: once the notification of a's write has reached b (it drops
	// what b read before it), b answers from memory.
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		h := b.CacheStats().Hits
		b.Resolve(ctx, "acme", "fake")
		if b.CacheStats().Hits > h {
			break
		}
		if time.Since(start) > time.Second {
			t.Fatal("b never answered from memory")
		}
	}
	hits := b.CacheStats().Hits
	for range 10 {
		if r, err := b.Resolve(ctx, "acme", "fake"); err != nil || r.AppID != first.ID {
			t.Fatalf("b warm: %+v %v", r, err)
		}
	}
	if got := b.CacheStats().Hits - hits; got != 10 {
		t.Fatalf("%d of 10 warm resolves were answered from memory", got)
	}
	second, _, err := a.SetApp(ctx, "acme", "fake", "acme-app-2", appSecret, "t")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for {
		r, err := b.Resolve(ctx, "acme", "fake")
		if err == nil && r.AppID == second.ID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b still resolves %q (%v) a second after a replaced it with %s", r.AppID, err, second.ID)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// This replica's own write is seen at once.
	if _, err := a.RemoveApp(ctx, "acme", "fake", "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Resolve(ctx, "acme", "fake"); !errors.Is(err, org.ErrNoApp) {
		t.Fatalf("a after its own RemoveApp: %v", err)
	}
}

// TestRewrapSecrets: after a key rotation, vault status counts the app
// secrets under the old key, rewrap moves them to the new primary, and the
// app still resolves (with the old key gone from the keyring).
func TestRewrapSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, "")
	e.create(t, "acme")
	if _, _, err := e.store.SetApp(ctx, "acme", "fake", "acme-app", appSecret, "t"); err != nil {
		t.Fatal(err)
	}
	two, err := keyring.GenerateKey(2)
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := keyring.Parse(testKeys + "\n*" + two)
	if err != nil {
		t.Fatal(err)
	}
	counts, err := org.SecretKeyStatus(ctx, e.pool, rotated)
	if err != nil || len(counts) != 1 || counts[0].KeyVersion != 1 || counts[0].Primary || !counts[0].InKeyring || counts[0].Count != 1 {
		t.Fatalf("status before rewrap: %+v %v", counts, err)
	}
	n, failed, err := org.RewrapSecrets(ctx, e.pool, rotated)
	if err != nil || n != 1 || len(failed) != 0 {
		t.Fatalf("rewrap: %d %v %v", n, failed, err)
	}
	onlyTwo, err := keyring.Parse(two)
	if err != nil {
		t.Fatal(err)
	}
	e.keys = onlyTwo
	if r, err := e.newStore(t, e.pool, -1).Resolve(ctx, "acme", "fake"); err != nil || r.AppID == "" {
		t.Fatalf("resolve with only the new key: %+v %v", r, err)
	}
}
