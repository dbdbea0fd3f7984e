package admin_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/admin"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/servertest"
)

// TestOrgAdminsSignInWithTheirOwnIssuer (issue 34): an organization's
// admins sign in with the organization's own identity provider (its SSO,
// an issuer of its own: package org), at /admin/login?org=ORG, with the
// role an assignment at that issuer gives — and that issuer speaks for
// that organization alone. The attacks: a role another organization holds
// for an identity at acme's issuer (acme runs it and can mint any subject
// there) gives nothing, and cannot be granted; an identity at acme's issuer
// is never an operator; naming an organization without an issuer of its
// own, or none at all, signs in at the admin issuer (the answer tells
// nothing of which organizations exist).
func TestOrgAdminsSignInWithTheirOwnIssuer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{spareIdP: true})
	ctx := context.Background()
	acmeIdP := e.IdPs[1]
	orgs := e.server.Orgs()
	for _, o := range []string{"acme", "globex"} {
		if _, err := orgs.Create(ctx, o, strings.ToUpper(o), "test"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := orgs.AddIssuer(ctx, "acme", mcpauth.Issuer{ID: "acme-sso", URL: acmeIdP.Server.URL, Login: true,
		ClientID: "connectd", ClientSecret: servertest.IdPSecret}, "test"); err != nil {
		t.Fatal(err)
	}
	operator := admin.Actor{Name: "cli:test"}
	// bob at acme's issuer is acme's admin.
	if _, err := e.store.Grant(ctx, admin.Assignment{Org: "acme", Issuer: acmeIdP.Server.URL, Subject: "bob",
		Role: admin.RoleAdmin}, operator); err != nil {
		t.Fatal(err)
	}
	// globex cannot make acme's issuer vouch for its admins...
	_, err := e.store.Grant(ctx, admin.Assignment{Org: "globex", Issuer: acmeIdP.Server.URL, Subject: "bob",
		Role: admin.RoleOwner}, operator)
	if !errors.Is(err, admin.ErrInvalid) {
		t.Fatalf("a role in globex at acme's issuer: %v, want ErrInvalid", err)
	}
	if _, err := e.store.MapClaim(ctx, admin.ClaimMapping{Org: "globex", Issuer: acmeIdP.Server.URL, Claim: "sub",
		Value: "bob", Role: admin.RoleOwner}, operator); !errors.Is(err, admin.ErrInvalid) {
		t.Fatalf("a claim mapping of globex at acme's issuer: %v, want ErrInvalid", err)
	}
	// ...and a row that says so anyway (written before the issuer was
	// acme's, or behind the store's back) counts for nothing.
	if _, err := e.pool.Exec(ctx, `INSERT INTO org_admins (org_id, issuer, subject, role, created_by)
		VALUES ('globex', $1, 'bob', 'owner', 'test')`, acmeIdP.Server.URL); err != nil {
		t.Fatal(err)
	}

	// ?org=acme starts at acme's own issuer.
	b := e.browser()
	authorize := e.StartLogin(b.Browser, admin.LoginPath+"?org=acme")
	if !strings.HasPrefix(authorize, acmeIdP.Server.URL+"/") {
		t.Fatalf("?org=acme went to %s, want acme's issuer %s", authorize, acmeIdP.Server.URL)
	}
	if r := b.get(e.pick(b, authorize, "bob", admin.CallbackPath)); r.status != http.StatusSeeOther || !r.setsAdminSession() {
		t.Fatalf("bob's sign-in at acme's issuer: %d %.300s", r.status, r.body)
	}
	if r := b.get(e.srv.URL + "/admin/connections"); r.status != http.StatusOK {
		t.Fatalf("bob's connections page: %d %.300s", r.status, r.body)
	}
	for _, path := range []string{"/admin/connections?org=globex", "/admin/clients?org=globex", "/admin/admins?org=globex",
		"/admin/events?org=default"} {
		if r := b.get(e.srv.URL + path); r.status != http.StatusNotFound {
			t.Errorf("bob (acme's issuer) on %s: %d, want 404: %.200s", path, r.status, r.body)
		}
	}
	// An admin, not an owner, in acme: the assignment's role, nothing more.
	if r := b.get(e.srv.URL + "/admin/admins?org=acme"); r.status != http.StatusForbidden || e.code(r) != "role_insufficient" {
		t.Errorf("bob's admins page in acme: %d %q", r.status, e.code(r))
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE kind = 'admin.login' AND org_id = 'acme' AND actor = 'admin:bob'`); n != 1 {
		t.Errorf("acme's trail has %d sign-ins of bob, want 1", n)
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE kind = 'admin.login' AND org_id = 'globex'`); n != 0 {
		t.Errorf("globex's trail has %d sign-ins: acme's issuer signed someone in there", n)
	}

	// alice at acme's issuer is not the operator alice of the admin issuer,
	// and has no role: refused.
	b2 := e.browser()
	r := b2.get(e.pick(b2, e.StartLogin(b2.Browser, admin.LoginPath+"?org=acme"), "alice", admin.CallbackPath))
	if r.status != http.StatusForbidden || r.setsAdminSession() {
		t.Fatalf("alice at acme's issuer: %d %.300s", r.status, r.body)
	}

	// Without an issuer of its own, or without existing: the admin issuer.
	for _, o := range []string{"globex", "no-such-org"} {
		if got := e.StartLogin(e.browser().Browser, admin.LoginPath+"?org="+o); !strings.HasPrefix(got, e.IdPs[0].Server.URL+"/") {
			t.Errorf("?org=%s went to %s, want the admin issuer", o, got)
		}
	}
	if r := e.browser().get(e.srv.URL + admin.LoginPath + "?org=Not%20An%20Org"); r.status != http.StatusBadRequest || e.code(r) != "bad_org" {
		t.Errorf("?org=Not An Org: %d %q", r.status, e.code(r))
	}
}
