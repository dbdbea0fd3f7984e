package org_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/problem"
)

const issuerSecret = "acme-idp-secret-0123456789"

var deploymentIssuer = mcpauth.Issuer{ID: "main", URL: "https://idp.deployment.test"}

func (e *env) issuerStore(t *testing.T) *org.Store {
	return org.New(org.Config{Pool: e.pool, Keyring: e.keys, Catalog: e.cat, CacheTTL: time.Hour,
		DeploymentIssuers: []mcpauth.Issuer{deploymentIssuer}})
}

func acmeIssuer() mcpauth.Issuer {
	return mcpauth.Issuer{ID: "acme-idp", URL: "https://idp.acme.test", Login: true, ClientID: "connectd",
		ClientSecret: issuerSecret, Scopes: []string{"profile"}}
}

// TestIssuers: add, list (never the secret), look up by id and by URL (the
// secret opened), remove; what is refused, with its kind.
func TestIssuers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, "")
	e.create(t, "acme")
	e.create(t, "beta")
	s := e.issuerStore(t)

	added, err := s.AddIssuer(ctx, "acme", acmeIssuer(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if added.ClientSecret != "" || !added.HasSecret || added.Org != "acme" || added.URL != "https://idp.acme.test" {
		t.Fatalf("added: %+v", added)
	}
	list, err := s.Issuers(ctx, "acme")
	if err != nil || len(list) != 1 || list[0].ID != "acme-idp" || list[0].ClientSecret != "" || !list[0].HasSecret ||
		len(list[0].Scopes) != 1 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if list, err := s.Issuers(ctx, "beta"); err != nil || len(list) != 0 {
		t.Fatalf("beta's list: %+v %v", list, err)
	}
	if _, err := s.Issuers(ctx, "nope"); !errors.Is(err, org.ErrNotFound) {
		t.Fatalf("list of no organization: %v", err)
	}
	for _, key := range []string{"acme-idp", "https://idp.acme.test"} {
		is, owner, ok, err := s.LookupIssuer(ctx, key)
		if err != nil || !ok || owner != "acme" || is.ClientSecret != issuerSecret || is.ClientID != "connectd" || !is.Login {
			t.Fatalf("LookupIssuer(%s): %v %s %t %v", key, is, owner, ok, err)
		}
	}
	for _, key := range []string{"", "main", "https://idp.deployment.test", "https://idp.acme.test/", "ACME-IDP"} {
		if _, _, ok, err := s.LookupIssuer(ctx, key); ok || err != nil {
			t.Fatalf("LookupIssuer(%q) found one (%v)", key, err)
		}
	}
	var secretRows int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM org_issuers WHERE position($1 in encode(client_secret, 'escape')) > 0`,
		issuerSecret).Scan(&secretRows); err != nil || secretRows != 0 {
		t.Fatalf("the secret is stored in the clear (%d, %v)", secretRows, err)
	}
	var audited string
	if err := e.pool.QueryRow(ctx, `SELECT detail::text FROM audit_events WHERE kind = 'org.issuer_added'`).Scan(&audited); err != nil ||
		strings.Contains(audited, issuerSecret) || !strings.Contains(audited, "acme-idp") {
		t.Fatalf("audit: %s %v", audited, err)
	}

	for _, tc := range []struct {
		name string
		org  string
		is   func(*mcpauth.Issuer)
		want error
	}{
		{"deployment issuer's id", "beta", func(is *mcpauth.Issuer) { is.ID = "main"; is.URL = "https://other.test" }, org.ErrIssuerReserved},
		{"deployment issuer's URL", "beta", func(is *mcpauth.Issuer) { is.ID = "x"; is.URL = deploymentIssuer.URL }, org.ErrIssuerReserved},
		{"another organization's id", "beta", func(is *mcpauth.Issuer) { is.URL = "https://other.test" }, org.ErrIssuerExists},
		{"another organization's URL", "beta", func(is *mcpauth.Issuer) { is.ID = "beta-idp" }, org.ErrIssuerExists},
		{"no such organization", "nope", func(is *mcpauth.Issuer) { is.ID = "n"; is.URL = "https://n.test" }, org.ErrNotFound},
		{"bad id", "beta", func(is *mcpauth.Issuer) { is.ID = "Beta IdP"; is.URL = "https://b.test" }, org.ErrInvalid},
		{"http URL", "beta", func(is *mcpauth.Issuer) { is.ID = "b"; is.URL = "http://b.test" }, org.ErrInvalid},
		{"login without client id", "beta", func(is *mcpauth.Issuer) { is.ID = "b"; is.URL = "https://b.test"; is.ClientID = "" }, org.ErrInvalid},
		{"secret without login", "beta", func(is *mcpauth.Issuer) { is.ID = "b"; is.URL = "https://b.test"; is.Login = false }, org.ErrInvalid},
		{"secret with a newline", "beta", func(is *mcpauth.Issuer) { is.ID = "b"; is.URL = "https://b.test"; is.ClientSecret = "a\nb" }, org.ErrInvalid},
		{"bad scope", "beta", func(is *mcpauth.Issuer) { is.ID = "b"; is.URL = "https://b.test"; is.Scopes = []string{"a b"} }, org.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := acmeIssuer()
			tc.is(&is)
			_, err := s.AddIssuer(ctx, tc.org, is, "test")
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if d, _ := problem.Description(err); d == "" || strings.Contains(err.Error(), issuerSecret) {
				t.Fatalf("description %q of %v", d, err)
			}
		})
	}

	if _, err := s.RemoveIssuer(ctx, "beta", "acme-idp", "test"); !errors.Is(err, org.ErrIssuerNotFound) {
		t.Fatalf("beta removed acme's issuer: %v", err)
	}
	if _, err := s.RemoveIssuer(ctx, "acme", "acme-idp", "test"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := s.LookupIssuer(ctx, "acme-idp"); ok || err != nil {
		t.Fatalf("removed issuer still found (%v)", err)
	}
	// Deleting the organization takes its issuers with it.
	if _, err := s.AddIssuer(ctx, "beta", mcpauth.Issuer{ID: "beta-idp", URL: "https://idp.beta.test"}, "t"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "beta", "t"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, _ := s.LookupIssuer(ctx, "beta-idp"); ok {
		t.Fatal("a deleted organization's issuer is still found")
	}
}

// TestDeploymentIssuersFlag: on by default, off and on again, never off for
// the default organization (refused by the store and the schema).
func TestDeploymentIssuersFlag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, "")
	e.create(t, "acme")
	s := e.issuerStore(t)
	if on, err := s.DeploymentIssuers(ctx, "acme"); err != nil || !on {
		t.Fatalf("new organization: %t %v", on, err)
	}
	o, err := s.SetDeploymentIssuers(ctx, "acme", false, "t")
	if err != nil || o.DeploymentIssuers {
		t.Fatalf("off: %+v %v", o, err)
	}
	if on, err := s.DeploymentIssuers(ctx, "acme"); err != nil || on {
		t.Fatalf("after off: %t %v", on, err)
	}
	if got, _ := s.Get(ctx, "acme"); got.DeploymentIssuers {
		t.Fatal("Get says on")
	}
	if _, err := s.SetDeploymentIssuers(ctx, "default", false, "t"); !errors.Is(err, org.ErrDefault) {
		t.Fatalf("default off: %v", err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE organizations SET deployment_issuers = false WHERE id = 'default'`); err == nil {
		t.Fatal("the schema let the default organization lose the deployment's issuers")
	}
	if on, err := s.DeploymentIssuers(ctx, "default"); err != nil || !on {
		t.Fatalf("default: %t %v", on, err)
	}
	if _, err := s.DeploymentIssuers(ctx, "nope"); !errors.Is(err, org.ErrNotFound) {
		t.Fatalf("no such organization: %v", err)
	}
}

// TestIssuerCache: a warm lookup (found or not) and a warm flag read answer
// from memory; a change on one replica reaches the other's cache through
// the notification.
func TestIssuerCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, "")
	e.create(t, "acme")
	poolB := pgtest.NewPool(t, e.pool.Config().ConnString())
	cfg := func(p *org.Config) *org.Store {
		p.Keyring, p.CacheTTL, p.DeploymentIssuers = e.keys, time.Hour, []mcpauth.Issuer{deploymentIssuer}
		return org.New(*p)
	}
	a, b := cfg(&org.Config{Pool: e.pool}), cfg(&org.Config{Pool: poolB})
	pgtest.Listen(t, e.pool, a.CacheSubscriber())
	pgtest.Listen(t, poolB, b.CacheSubscriber())

	// b learns there is no such issuer, and remembers it.
	warm := func(what string, f func() bool) {
		t.Helper()
		for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
			h := b.TrustCacheStats().Hits
			if !f() {
				t.Fatalf("%s: wrong answer", what)
			}
			if b.TrustCacheStats().Hits > h {
				return
			}
			if time.Since(start) > time.Second {
				t.Fatalf("%s: never answered from memory", what)
			}
		}
	}
	absent := func() bool { _, _, ok, err := b.LookupIssuer(ctx, "https://idp.acme.test"); return !ok && err == nil }
	warm("absent", absent)
	if _, err := a.AddIssuer(ctx, "acme", acmeIssuer(), "t"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b finds the added issuer", func() bool {
		_, owner, ok, err := b.LookupIssuer(ctx, "https://idp.acme.test")
		return ok && err == nil && owner == "acme"
	})
	warm("present", func() bool {
		_, owner, ok, _ := b.LookupIssuer(ctx, "https://idp.acme.test")
		return ok && owner == "acme"
	})
	warm("flag", func() bool { on, err := b.DeploymentIssuers(ctx, "acme"); return on && err == nil })
	hits := b.TrustCacheStats().Hits
	for range 10 {
		b.LookupIssuer(ctx, "https://idp.acme.test")
		b.DeploymentIssuers(ctx, "acme")
	}
	if got := b.TrustCacheStats().Hits - hits; got != 20 {
		t.Fatalf("%d of 20 warm reads answered from memory", got)
	}
	if _, err := a.SetDeploymentIssuers(ctx, "acme", false, "t"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b sees the flag off", func() bool { on, err := b.DeploymentIssuers(ctx, "acme"); return !on && err == nil })
	if _, err := a.RemoveIssuer(ctx, "acme", "acme-idp", "t"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b forgets the removed issuer", absent)
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); !f(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 2s", what)
		}
	}
}

// TestRewrapIssuerSecrets: after a key rotation, the issuers' login secrets
// under the old key are counted, moved to the new primary, and still open
// (with the old key gone).
func TestRewrapIssuerSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, "")
	e.create(t, "acme")
	if _, err := e.issuerStore(t).AddIssuer(ctx, "acme", acmeIssuer(), "t"); err != nil {
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
	counts, err := org.IssuerSecretKeyStatus(ctx, e.pool, rotated)
	if err != nil || len(counts) != 1 || counts[0].KeyVersion != 1 || counts[0].Primary || counts[0].Count != 1 {
		t.Fatalf("status before rewrap: %+v %v", counts, err)
	}
	n, failed, err := org.RewrapIssuerSecrets(ctx, e.pool, rotated)
	if err != nil || n != 1 || len(failed) != 0 {
		t.Fatalf("rewrap: %d %v %v", n, failed, err)
	}
	onlyTwo, err := keyring.Parse(two)
	if err != nil {
		t.Fatal(err)
	}
	s := org.New(org.Config{Pool: e.pool, Keyring: onlyTwo})
	if is, _, ok, err := s.LookupIssuer(ctx, "acme-idp"); !ok || err != nil || is.ClientSecret != issuerSecret || !is.Login {
		t.Fatalf("with only the new key: %v %t %v", is, ok, err)
	}
	// A secret whose key is gone: the issuer is still found (its tokens
	// verify), its login is off.
	s = org.New(org.Config{Pool: e.pool, Keyring: e.keys})
	if is, _, ok, err := s.LookupIssuer(ctx, "acme-idp"); !ok || err != nil || is.ClientSecret != "" || is.Login {
		t.Fatalf("with only the old key: %v %t %v", is, ok, err)
	}
}
