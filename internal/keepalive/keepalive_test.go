package keepalive_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keepalive"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/servertest"
	"github.com/connectd/connectd/internal/vault"
)

// TestRenewsEveryOrganization: the health job keeps alive the idle
// connections of every organization (issue 34), not only the default
// one's: a connection of acme, made through acme's own app, and one of the
// default organization are both renewed once idle for half the provider's
// refresh_idle_lifetime; a fresh one of either is left alone.
func TestRenewsEveryOrganization(t *testing.T) {
	t.Parallel()
	e := servertest.New(t, servertest.Options{FakeEntry: func(m map[string]any) { m["refresh_idle_lifetime"] = "48h" }})
	ctx := context.Background()
	if _, err := e.Server.Orgs().Create(ctx, "acme", "Acme", "test"); err != nil {
		t.Fatal(err)
	}
	app, _, err := e.Server.Orgs().SetApp(ctx, "acme", "fake", e.Fake.ClientID, provider.Secret(servertest.FakeSecret), "test")
	if err != nil {
		t.Fatal(err)
	}
	put := func(org, appID, subject string) *vault.Connection {
		t.Helper()
		tok := e.Fake.Grant([]string{"files.read"}, 0)
		c, err := e.Server.Vault().In(org).PutWith(ctx, identity.User{Issuer: e.IdPs[0].Issuer(), Subject: subject}, "fake",
			vault.Target{AppID: appID}, vault.Credential{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken,
				Scopes: []string{"files.read"}, AccountID: "acct-" + subject}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	idle := []*vault.Connection{put("acme", app.ID, "alice"), put(vault.DefaultOrg, "", "bob")}
	e.Clock.Advance(25 * time.Hour)
	fresh := []*vault.Connection{put("acme", app.ID, "carol"), put(vault.DefaultOrg, "", "dave")}

	w := keepalive.NewWorker(e.Server.Vault(), e.Server.Orgs(), e.Server.Catalog(), slog.New(slog.DiscardHandler), e.Clock.Now)
	if err := w.Work(ctx, nil); err != nil {
		t.Fatal(err)
	}
	refreshed := func(c *vault.Connection) bool {
		t.Helper()
		now, err := e.Server.Vault().In(c.Org).Lookup(ctx, c.User, "fake", c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return !now.RefreshedAt.IsZero()
	}
	for _, c := range idle {
		if !refreshed(c) {
			t.Errorf("the idle connection of %s (%s) was not renewed", c.Org, c.User.Subject)
		}
	}
	for _, c := range fresh {
		if refreshed(c) {
			t.Errorf("the fresh connection of %s (%s) was renewed", c.Org, c.User.Subject)
		}
	}
}
