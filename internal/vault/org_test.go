package vault_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/vault"
)

// Organizations (issue 34): a connection is made through one organization's
// provider app and belongs to it. These tests are the attacks: an
// organization's handle naming another's connection, the same provider
// account connected through two organizations, a warm cache answering
// another organization, a refresh through the wrong app.

// apps records the app each provider call was made for.
type apps struct {
	mu                      sync.Mutex
	refresh, scoped, revoke []vault.App
}

func (a *apps) add(to *[]vault.App, app vault.App) {
	a.mu.Lock()
	defer a.mu.Unlock()
	*to = append(*to, app)
}

func (a *apps) get(of *[]vault.App) []vault.App {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(*of)
}

// orgStore is newStore whose provider calls (the production wiring) are
// recorded with the app they were made for; cacheTTL > 0 caches, kept
// fresh by a listener like a replica's.
func orgStore(t *testing.T, pool *pgxpool.Pool, keys *keyring.Keyring, p provider.OAuth, cacheTTL time.Duration) (*vault.Store, *apps) {
	t.Helper()
	log := &apps{}
	refresh, scoped, revoke := refresher(p), scopedRefresher(p), revoker(p)
	cfg := vault.Config{Pool: pool, Keyring: keys, Skew: time.Minute, CacheTTL: cacheTTL,
		Refresh: func(ctx context.Context, app vault.App, rt string) (*vault.Refreshed, error) {
			log.add(&log.refresh, app)
			return refresh(ctx, app, rt)
		},
		RefreshScoped: func(ctx context.Context, app vault.App, rt string, scopes []string) (*vault.Refreshed, error) {
			log.add(&log.scoped, app)
			return scoped(ctx, app, rt, scopes)
		},
		Revoke: func(ctx context.Context, app vault.App, c *vault.Credential) error {
			log.add(&log.revoke, app)
			return revoke(ctx, app, c)
		},
	}
	s, err := vault.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cacheTTL > 0 {
		pgtest.Listen(t, pool, s.CacheSubscriber())
	}
	return s, log
}

// addOrgs creates the organizations acme and beta.
func addOrgs(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(context.Background(),
		`INSERT INTO organizations (id, name) VALUES ('acme', 'Acme'), ('beta', 'Beta')`); err != nil {
		t.Fatal(err)
	}
}

// credFor is a credential for provider account account.
func credFor(tok providertest.Tokens, account string) vault.Credential {
	c := credOf(tok)
	c.AccountID, c.AccountLabel = account, "octocat"
	return c
}

// TestOrganizationsNeverMeet: the same provider account (the same account
// hash) connected through acme's app and beta's is two connections with two
// ids; reading, refreshing, narrowing and deleting one never touches the
// other, each refresh, narrowing and revocation goes through its own
// connection's app, and a handle lists only its organization's.
func TestOrganizationsNeverMeet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, p := fakeProvider(t, providertest.Options{RotateRefreshTokens: true})
	db := pool(t)
	addOrgs(t, db)
	s, log := orgStore(t, db, mustParse(t, keyLine(t, 1)), p, 0)
	acme, beta := s.In("acme"), s.In("beta")

	tokA := srv.Grant([]string{"read", "write"}, 30*time.Second) // within the skew: refreshed on read
	tokB := srv.Grant([]string{"read", "write"}, time.Hour)
	ca, err := acme.PutWith(ctx, alice, "fake", vault.Target{AppID: "app_acme"}, credFor(tokA, "42"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := beta.PutWith(ctx, alice, "fake", vault.Target{AppID: "app_beta"}, credFor(tokB, "42"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ca.ID == cb.ID || !bytes.Equal(ca.AccountHash, cb.AccountHash) {
		t.Fatalf("one account through two organizations: %s and %s, want two connections of one account", ca.ID, cb.ID)
	}
	if ca.Org != "acme" || ca.AppID != "app_acme" || cb.Org != "beta" || cb.AppID != "app_beta" || ca.Held().Org != "acme" {
		t.Fatalf("stored as %s/%s and %s/%s", ca.Org, ca.AppID, cb.Org, cb.AppID)
	}

	// Each handle lists its own; the default organization's none; the
	// user's own view, both, with their organizations and apps.
	for _, tc := range []struct {
		name string
		s    *vault.Store
		want []string
	}{{"acme", acme, []string{ca.ID}}, {"beta", beta, []string{cb.ID}}, {"default", s, nil}} {
		list, err := tc.s.List(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range list {
			ids = append(ids, c.ID)
		}
		if !slices.Equal(ids, tc.want) {
			t.Fatalf("%s lists %v, want %v", tc.name, ids, tc.want)
		}
	}
	all, err := s.ListAll(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].ID != ca.ID || all[0].Org != "acme" || all[0].AppID != "app_acme" ||
		all[1].ID != cb.ID || all[1].Org != "beta" || all[1].AppID != "app_beta" {
		t.Fatalf("ListAll: %+v", all)
	}

	// Reading acme's refreshes it, through acme's app; beta's stays as it
	// was. The decision sees acme's row as acme's.
	var seen vault.Held
	got, err := acme.TokenFor(ctx, alice, "fake", "", nil, func(h vault.Held) error { seen = h; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if got.AccessToken == tokA.AccessToken || seen.Org != "acme" || seen.ID != ca.ID {
		t.Fatalf("acme's read: refreshed %t, decided on %+v", got.AccessToken != tokA.AccessToken, seen)
	}
	if want := []vault.App{{Provider: "fake", Org: "acme", AppID: "app_acme"}}; !slices.Equal(log.get(&log.refresh), want) {
		t.Fatalf("refreshed through %v, want %v", log.get(&log.refresh), want)
	}
	conn, cred, err := beta.Get(ctx, alice, "fake", "")
	if err != nil {
		t.Fatal(err)
	}
	if conn.ID != cb.ID || cred.AccessToken != tokB.AccessToken || cred.RefreshToken != tokB.RefreshToken || !conn.RefreshedAt.IsZero() {
		t.Fatal("acme's refresh touched beta's connection")
	}

	// Narrowing beta's goes through beta's app and leaves acme's alone.
	if _, err := beta.Narrowed(ctx, alice, "fake", cb.ID, []string{"read"}, "42"); err != nil {
		t.Fatal(err)
	}
	if want := []vault.App{{Provider: "fake", Org: "beta", AppID: "app_beta"}}; !slices.Equal(log.get(&log.scoped), want) {
		t.Fatalf("narrowed through %v, want %v", log.get(&log.scoped), want)
	}
	var narrowedOfA int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM narrowed_tokens WHERE connection_id = $1`, ca.ID).Scan(&narrowedOfA); err != nil {
		t.Fatal(err)
	}
	if narrowedOfA != 0 {
		t.Fatalf("beta's narrowing stored %d tokens for acme's connection", narrowedOfA)
	}

	// Deleting acme's revokes through acme's app; beta's stays.
	d, err := acme.Delete(ctx, alice, "fake", ca.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Revocation != vault.Revoked || d.Connection.Org != "acme" {
		t.Fatalf("deletion %+v", d)
	}
	if want := []vault.App{{Provider: "fake", Org: "acme", AppID: "app_acme"}}; !slices.Equal(log.get(&log.revoke), want) {
		t.Fatalf("revoked through %v, want %v", log.get(&log.revoke), want)
	}
	if c, err := beta.Token(ctx, alice, "fake", cb.ID, nil); err != nil || c.AccessToken != tokB.AccessToken {
		t.Fatalf("beta's connection after acme's was deleted: %v", err)
	}
}

// TestAnotherOrganizationsHandleFindsNothing: a handle of beta (or of the
// default organization) naming acme's connection id gets ErrNotConnected
// from every entry point, exactly as for an id that does not exist; no
// decision is asked, nothing is refreshed, narrowed, revoked, labelled or
// deleted, and acme's connection is as it was.
func TestAnotherOrganizationsHandleFindsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, p := fakeProvider(t, providertest.Options{RotateRefreshTokens: true})
	db := pool(t)
	addOrgs(t, db)
	s, log := orgStore(t, db, mustParse(t, keyLine(t, 1)), p, 0)
	acme := s.In("acme")
	tok := srv.Grant([]string{"read", "write"}, 30*time.Second) // within the skew: any read that found it would refresh it
	ca, err := acme.PutWith(ctx, alice, "fake", vault.Target{AppID: "app_acme"}, credFor(tok, "42"), nil)
	if err != nil {
		t.Fatal(err)
	}
	id := ca.ID
	before, err := acme.Lookup(ctx, alice, "fake", id)
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []struct {
		name string
		s    *vault.Store
	}{{"beta", s.In("beta")}, {"default", s}, {`In("")`, s.In("")}} {
		o := other.s
		for _, tc := range []struct {
			name string
			do   func() error
		}{
			{"TokenFor", func() error {
				_, err := o.TokenFor(ctx, alice, "fake", id, nil, func(vault.Held) error {
					t.Errorf("%s: a decision was asked about acme's connection", other.name)
					return nil
				})
				return err
			}},
			{"Token, the only one", func() error { _, err := o.Token(ctx, alice, "fake", "", nil); return err }},
			{"Get", func() error { _, _, err := o.Get(ctx, alice, "fake", id); return err }},
			{"Lookup", func() error { _, err := o.Lookup(ctx, alice, "fake", id); return err }},
			{"Account", func() error { _, err := o.Account(ctx, alice, "fake", id); return err }},
			{"HeldOf", func() error { _, err := o.HeldOf(ctx, alice, *ca); return err }},
			{"Narrowed", func() error { _, err := o.Narrowed(ctx, alice, "fake", id, []string{"read"}, "42"); return err }},
			{"NarrowedRefused", func() error {
				_, err := o.NarrowedRefused(ctx, alice, "fake", id, []string{"read"}, "42", tok.AccessToken)
				return err
			}},
			{"Refused", func() error { return o.Refused(ctx, alice, "fake", id, tok.AccessToken) }},
			{"Renew", func() error { return o.Renew(ctx, alice, "fake", id, time.Now().Add(time.Hour)) }},
			{"SetLabel", func() error { return o.SetLabel(ctx, alice, "fake", id, "mine now") }},
			{"DeleteWith", func() error {
				_, err := o.DeleteWith(ctx, alice, "fake", id, func(context.Context, pgx.Tx, vault.Connection) error {
					t.Errorf("%s: the delete hook ran for acme's connection", other.name)
					return nil
				})
				return err
			}},
			{"Delete, the only one", func() error { _, err := o.Delete(ctx, alice, "fake", ""); return err }},
		} {
			if err := tc.do(); !errors.Is(err, vault.ErrNotConnected) {
				t.Errorf("%s %s of acme's connection: %v, want ErrNotConnected", other.name, tc.name, err)
			}
		}
		if ok, err := o.Exists(ctx, alice, "fake"); err != nil || ok {
			t.Errorf("%s: Exists %t %v", other.name, ok, err)
		}
		if refs, err := o.Idle(ctx, "fake", time.Now().Add(time.Hour), 10); err != nil || len(refs) != 0 {
			t.Errorf("%s: Idle lists %v %v", other.name, refs, err)
		}
	}
	if n := srv.Counts(); n.Refresh != 0 || n.Revoke != 0 {
		t.Fatalf("the provider saw %d refreshes and %d revocations", n.Refresh, n.Revoke)
	}
	if n := len(log.get(&log.refresh)) + len(log.get(&log.scoped)) + len(log.get(&log.revoke)); n != 0 {
		t.Fatalf("%d provider calls", n)
	}
	conn, cred, err := acme.Get(ctx, alice, "fake", id)
	if err != nil {
		t.Fatal(err)
	}
	if cred.AccessToken != tok.AccessToken || cred.RefreshToken != tok.RefreshToken || conn.Label != "" ||
		conn.Status != vault.StatusActive || !conn.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("acme's connection changed: %+v", conn)
	}
	// And acme's own handle still refreshes it, through acme's app.
	if _, err := acme.Token(ctx, alice, "fake", id, nil); err != nil {
		t.Fatal(err)
	}
	if want := []vault.App{{Provider: "fake", Org: "acme", AppID: "app_acme"}}; !slices.Equal(log.get(&log.refresh), want) {
		t.Fatalf("refreshed through %v, want %v", log.get(&log.refresh), want)
	}
}

// TestCacheKeyedByOrganization: a warm read through acme's handle does not
// answer beta's (or the default organization's) for the same user,
// provider and id; a deletion through acme's handle on another replica
// reaches this replica's cached copy (the notification names the
// organization's key).
func TestCacheKeyedByOrganization(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, p := fakeProvider(t, providertest.Options{})
	dbURL := pgtest.URL(t)
	keys := mustParse(t, keyLine(t, 1))
	db := pgtest.NewPool(t, dbURL)
	addOrgs(t, db)
	s, _ := orgStore(t, db, keys, p, time.Minute)
	other, _ := orgStore(t, pgtest.NewPool(t, dbURL), keys, p, time.Minute)
	acme := s.In("acme")
	tok := srv.Grant([]string{"read"}, time.Hour)
	ca, err := acme.Put(ctx, alice, "fake", credFor(tok, "42"))
	if err != nil {
		t.Fatal(err)
	}
	// Warm: read until a read is answered from the cache (the Put's own
	// notification may drop the first copy).
	eventually(t, "a warm read", func() error {
		if c, err := acme.Token(ctx, alice, "fake", ca.ID, nil); err != nil || c.AccessToken != tok.AccessToken {
			t.Fatalf("acme's read: %v", err)
		}
		if st := s.CacheStats(); st.Hits == 0 {
			return errors.New("not from the cache")
		}
		return nil
	})
	for name, o := range map[string]*vault.Store{"beta": s.In("beta"), "default": s} {
		if _, err := o.Token(ctx, alice, "fake", ca.ID, nil); !errors.Is(err, vault.ErrNotConnected) {
			t.Fatalf("%s's handle, acme's connection warm in the cache: %v, want ErrNotConnected", name, err)
		}
	}
	if _, err := other.In("acme").Delete(ctx, alice, "fake", ca.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deletion on the other replica", func() error {
		if _, err := acme.Token(ctx, alice, "fake", ca.ID, nil); !errors.Is(err, vault.ErrNotConnected) {
			return errors.New("still answered from the cache")
		}
		return nil
	})
}

// TestReconnectThroughAnotherApp: the same account connected again through
// another app of the same organization stays one connection, whose
// credential and app are replaced: what the old app was granted does not
// carry over, and the next refresh goes through the new app.
func TestReconnectThroughAnotherApp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, p := fakeProvider(t, providertest.Options{RotateRefreshTokens: true})
	db := pool(t)
	addOrgs(t, db)
	s, log := orgStore(t, db, mustParse(t, keyLine(t, 1)), p, 0)
	acme := s.In("acme")
	first, err := acme.PutWith(ctx, alice, "fake", vault.Target{AppID: "app_old"},
		credFor(srv.Grant([]string{"read", "write"}, time.Hour), "42"), nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := acme.PutWith(ctx, alice, "fake", vault.Target{AppID: "app_new"},
		credFor(srv.Grant([]string{"read"}, 30*time.Second), "42"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || again.AppID != "app_new" || !slices.Equal(again.Scopes, []string{"read"}) {
		t.Fatalf("reconnected through another app: %s %s %v, want %s app_new [read]", again.ID, again.AppID, again.Scopes, first.ID)
	}
	if _, err := acme.Token(ctx, alice, "fake", first.ID, nil); err != nil {
		t.Fatal(err)
	}
	if want := []vault.App{{Provider: "fake", Org: "acme", AppID: "app_new"}}; !slices.Equal(log.get(&log.refresh), want) {
		t.Fatalf("refreshed through %v, want %v", log.get(&log.refresh), want)
	}
	// Through the shared app: app_id NULL.
	if _, err := acme.Put(ctx, alice, "fake", credFor(srv.Grant([]string{"read"}, time.Hour), "42")); err != nil {
		t.Fatal(err)
	}
	var app *string
	if err := db.QueryRow(ctx, `SELECT app_id FROM connections WHERE id = $1`, first.ID).Scan(&app); err != nil || app != nil {
		t.Fatalf("the shared app is stored as %v (%v), want NULL", app, err)
	}
}

// TestConcurrentOrganizations: the same user connecting, reading,
// reconnecting and disconnecting the same provider account in two
// organizations at once, with the credential cache on: no read in one
// organization ever returns a credential stored in the other, and each
// ends with at most its own one connection of the account.
func TestConcurrentOrganizations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, p := fakeProvider(t, providertest.Options{})
	db := pool(t)
	addOrgs(t, db)
	s, _ := orgStore(t, db, mustParse(t, keyLine(t, 1)), p, time.Minute)
	orgs := []string{"acme", "beta"}
	var mu sync.Mutex
	stored := map[string]string{} // access token → the organization it was stored in
	errc := make(chan error, 64)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			o := orgs[w%2]
			h := s.In(o)
			for i := range 15 {
				tok := srv.Grant([]string{"read"}, time.Hour)
				mu.Lock()
				stored[tok.AccessToken] = o
				mu.Unlock()
				if _, err := h.PutWith(ctx, alice, "fake", vault.Target{AppID: "app_" + o}, credFor(tok, "42"), nil); err != nil {
					errc <- err
					return
				}
				c, err := h.Token(ctx, alice, "fake", "", nil)
				switch {
				case errors.Is(err, vault.ErrNotConnected): // another writer of this organization deleted it
				case err != nil:
					errc <- err
					return
				default:
					mu.Lock()
					got := stored[c.AccessToken]
					mu.Unlock()
					if got != o {
						errc <- errors.New(o + " read a credential stored in " + got)
						return
					}
				}
				if i%5 == 4 {
					if list, err := h.List(ctx, alice); err == nil && len(list) == 1 {
						_, _ = h.Delete(ctx, alice, "fake", list[0].ID)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for _, o := range orgs {
		list, err := s.In(o).List(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) > 1 {
			t.Fatalf("%s ends with %d connections of one account", o, len(list))
		}
		for _, c := range list {
			if c.Org != o || c.AppID != "app_"+o {
				t.Fatalf("%s lists a connection of %s/%s", o, c.Org, c.AppID)
			}
		}
	}
}
