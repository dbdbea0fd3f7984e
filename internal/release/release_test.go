package release

import (
	"errors"
	"slices"
	"testing"

	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/vault"
)

var (
	home = vault.AccountHash("home")
	work = vault.AccountHash("work")
)

func held(account []byte, scopes ...string) vault.Held {
	return vault.Held{ID: "cn_home", Scopes: scopes, Account: account}
}

// heldIn is held for a connection of organization org.
func heldIn(org string, account []byte, scopes ...string) vault.Held {
	h := held(account, scopes...)
	h.Org = org
	return h
}

var (
	acme = Client{ID: "c", Org: "acme", Providers: []string{"github"}}
	beta = Client{ID: "c", Org: "beta", Providers: []string{"github"}}
)

func approval(account []byte, scopes ...string) *consent.Approval {
	return &consent.Approval{Scopes: scopes, Account: account, ConnectionID: "cn_home"}
}

// TestCredential: every release and every refusal of a credential (token
// read, token exchange, proxy), and what each caller may say of it. A
// connection of another organization than the client's is refused first,
// as no connection at all (not_connected), whatever its account and
// scopes.
func TestCredential(t *testing.T) {
	for _, tc := range []struct {
		name     string
		client   Client // zero: a client of the default organization
		h        vault.Held
		a        *consent.Approval
		narrows  bool
		required []string
		release  Release
		scopes   []string // released
		refusal  Kind     // 0: released
		// notConnected: refused as vault.ErrNotConnected (refusal is 0).
		notConnected bool
		visible      []string
		mayName      bool
	}{
		{name: "approved for all it holds", h: held(home, "read"), a: approval(home, "read"),
			release: Whole, scopes: []string{"read"}, visible: []string{"read"}, mayName: true},
		{name: "approved for more than it holds", h: held(home, "read"), a: approval(home, "read", "write"),
			release: Whole, scopes: []string{"read"}, visible: []string{"read"}, mayName: true},
		{name: "grown past the approval, cannot narrow", h: held(home, "read", "write"), a: approval(home, "read"),
			refusal: ConsentRequired, visible: []string{"read"}, mayName: true},
		{name: "grown past the approval, narrows", h: held(home, "read", "write"), a: approval(home, "read"), narrows: true,
			release: Narrowed, scopes: []string{"read"}, visible: []string{"read"}, mayName: true},
		{name: "narrowed, but requires what it was not approved for", h: held(home, "read", "write"), a: approval(home, "read"),
			narrows: true, required: []string{"write"}, refusal: ConsentRequired, visible: []string{"read"}, mayName: true},
		{name: "another account", h: held(work, "read"), a: approval(home, "read"),
			refusal: ConsentRequired, visible: []string{}},
		{name: "another account at a narrowing provider", h: held(work, "read"), a: approval(home, "read"), narrows: true,
			refusal: ConsentRequired, visible: []string{}},
		{name: "an approval from before accounts", h: held(home, "read"), a: approval(nil, "read"),
			refusal: ConsentRequired, visible: []string{}},
		{name: "a row that names no account", h: held(nil, "read"), a: approval(home, "read"),
			refusal: ConsentRequired, visible: []string{}},
		{name: "lacks a required scope", h: held(home, "read"), a: approval(home, "read"), required: []string{"admin"},
			refusal: InsufficientScope, visible: []string{"read"}, mayName: true},
		{name: "lacks a required scope, another account: says nothing of it", h: held(work, "read"), a: approval(home, "read"),
			required: []string{"admin"}, refusal: ConsentRequired, visible: []string{}},
		// Organizations (issue 34).
		{name: "the client's organization's connection", client: acme, h: heldIn("acme", home, "read"), a: approval(home, "read"),
			release: Whole, scopes: []string{"read"}, visible: []string{"read"}, mayName: true},
		{name: "another organization's connection, approved: not connected", client: beta, h: heldIn("acme", home, "read"),
			a: approval(home, "read"), notConnected: true, visible: []string{}},
		{name: "the default organization's connection, a client of another", client: acme, h: held(home, "read"),
			a: approval(home, "read"), notConnected: true, visible: []string{}},
		{name: "another organization's connection, a client of the default one", h: heldIn("acme", home, "read"),
			a: approval(home, "read"), notConnected: true, visible: []string{}},
		{name: "another organization's connection, narrows: not connected", client: beta, h: heldIn("acme", home, "read", "write"),
			a: approval(home, "read"), narrows: true, notConnected: true, visible: []string{}},
		{name: "another organization's: before its account and scopes", client: beta, h: heldIn("acme", work, "read"),
			a: approval(home, "read"), required: []string{"admin"}, notConnected: true, visible: []string{}},
		{name: "another organization's, no approval", client: beta, h: heldIn("acme", home, "read"),
			notConnected: true, visible: []string{}},
		{name: `"default" is the default organization`, client: Client{Org: vault.DefaultOrg}, h: held(home, "read"),
			a: approval(home, "read"), release: Whole, scopes: []string{"read"}, visible: []string{"read"}, mayName: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := tc.client.Credential("github", tc.h, tc.a, tc.narrows, tc.required)
			var r *Refusal
			switch {
			case tc.notConnected:
				// Exactly what a user with no connection gets: not a
				// refusal that says more.
				if !errors.Is(err, vault.ErrNotConnected) || errors.As(err, &r) || d.Release != Nothing || len(d.Scopes) != 0 {
					t.Fatalf("got %v (%+v), want not connected", err, d)
				}
			case tc.refusal == 0 && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refusal != 0 && (!errors.As(err, &r) || r.Kind != tc.refusal):
				t.Fatalf("got %v (%+v), want kind %d", err, d, tc.refusal)
			case tc.refusal == 0 && (d.Release != tc.release || !slices.Equal(d.Scopes, tc.scopes)):
				t.Fatalf("release %d %v, want %d %v", d.Release, d.Scopes, tc.release, tc.scopes)
			}
			if tc.client.Org == "" {
				// The package function is the default organization's client.
				d2, err2 := Credential("github", tc.h, tc.a, tc.narrows, tc.required)
				if d2.Release != d.Release || !slices.Equal(d2.Scopes, d.Scopes) || (err2 == nil) != (err == nil) ||
					errors.Is(err2, vault.ErrNotConnected) != errors.Is(err, vault.ErrNotConnected) {
					t.Fatalf("package Credential %+v %v, Client{}.Credential %+v %v", d2, err2, d, err)
				}
			}
			// What the listing, webhooks and the account page say of it.
			dd := tc.client.Decide(tc.h, tc.a, tc.narrows)
			if !slices.Equal(dd.Visible(), tc.visible) || dd.MayName() != tc.mayName {
				t.Fatalf("visible %v, may name %t; want %v, %t", dd.Visible(), dd.MayName(), tc.visible, tc.mayName)
			}
		})
	}
}

// TestConsentRequiredSays: a consent_required says what to approve.
func TestConsentRequiredSays(t *testing.T) {
	_, err := Credential("github", held(home, "read", "write"), approval(home, "read"), false, nil)
	var r *Refusal
	if !errors.As(err, &r) || !slices.Equal(r.Unapproved, []string{"write"}) || r.AccountChanged {
		t.Fatalf("grown: %+v", r)
	}
	_, err = Credential("github", held(work, "read", "admin"), approval(home, "read"), false, nil)
	if !errors.As(err, &r) || !r.AccountChanged || len(r.Unapproved) != 0 {
		t.Fatalf("another account: %+v (its scopes are not the client's to know)", r)
	}
	_, err = Credential("github", held(home, "read", "write"), approval(home, "read"), true, []string{"write"})
	if !errors.As(err, &r) || !slices.Equal(r.Unapproved, []string{"write"}) {
		t.Fatalf("required beyond a narrowed approval: %+v", r)
	}
	_, err = Credential("github", held(home, "read"), approval(home, "read"), false, []string{"admin"})
	if !errors.As(err, &r) || !slices.Equal(r.Missing, []string{"admin"}) || r.Connection != "cn_home" {
		t.Fatalf("insufficient scope names what is missing and the connection to step up: %+v", r)
	}
}

// TestAdmit: refused before anything about the user is looked up.
func TestAdmit(t *testing.T) {
	gh := Client{ID: "c", Providers: []string{"github"}}
	proxyOnly := Client{ID: "c", Providers: []string{"github"}, ProxyOnly: true}
	any := Client{ID: "c", Providers: []string{AnyProvider}}
	for _, tc := range []struct {
		name string
		c    Client
		p    string
		use  Use
		want error
	}{
		{"registered", gh, "github", Read, nil},
		{"not registered", gh, "google", Read, ErrProviderNotAllowed},
		{"not registered, proxy", gh, "google", Proxy, ErrProviderNotAllowed},
		{"not registered, mint or listing", gh, "google", Describe, ErrProviderNotAllowed},
		{"every provider", any, "google", Read, nil},
		{"proxy-only reads a token", proxyOnly, "github", Read, ErrProxyOnly},
		{"proxy-only, another provider: proxy-only first", proxyOnly, "google", Read, ErrProxyOnly},
		{"proxy-only proxies", proxyOnly, "github", Proxy, nil},
		{"proxy-only mints", proxyOnly, "github", Describe, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Admit(tc.c, tc.p, tc.use); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestChoose: which approval a request is about; nothing is ever picked
// silently.
func TestChoose(t *testing.T) {
	a := consent.Approval{ConnectionID: "cn_a", Account: home}
	b := consent.Approval{ConnectionID: "cn_b", Account: work}
	for _, tc := range []struct {
		name      string
		approvals []consent.Approval
		account   string
		want      string
		err       error
	}{
		{"none", nil, "", "", ErrConsentRequired},
		{"the only one", []consent.Approval{a}, "", "cn_a", nil},
		{"the one named", []consent.Approval{a, b}, "cn_b", "cn_b", nil},
		{"several, none named", []consent.Approval{a, b}, "", "", ErrAccountRequired},
		{"named, not approved", []consent.Approval{a}, "cn_b", "", ErrConsentRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Choose("github", tc.approvals, tc.account)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if tc.want != "" && (got == nil || got.ConnectionID != tc.want) {
				t.Fatalf("chose %+v, want %s", got, tc.want)
			}
		})
	}
	conns := []vault.Connection{
		{ID: "cn_a", Provider: "github", AccountHash: home, DisplayName: "octocat", Status: vault.StatusActive},
		{ID: "cn_b", Provider: "github", AccountHash: home, DisplayName: "other", Status: vault.StatusActive}, // now another account than b was approved for
		{ID: "cn_c", Provider: "github", AccountHash: work, Status: vault.StatusActive},                       // not approved
		{ID: "cn_d", Provider: "google", AccountHash: home, Status: vault.StatusActive},
	}
	if got := Choosable("github", conns, []consent.Approval{a, b}); len(got) != 1 || got[0].ID != "cn_a" || got[0].DisplayName != "octocat" {
		t.Fatalf("choosable %+v, want only cn_a", got)
	}
	// Another organization's connections are never choosable, nor named.
	if got := acme.Choosable("github", conns, []consent.Approval{a, b}); len(got) != 0 {
		t.Fatalf("a client of acme may choose the default organization's %+v", got)
	}
	inAcme := slices.Clone(conns)
	inAcme[0].Org = "acme"
	if got := Choosable("github", inAcme, []consent.Approval{a, b}); len(got) != 0 {
		t.Fatalf("a client of the default organization may choose acme's %+v", got)
	}
	if got := acme.Choosable("github", inAcme, []consent.Approval{a, b}); len(got) != 1 || got[0].ID != "cn_a" {
		t.Fatalf("acme's own: %+v", got)
	}
}

// TestCompletes: a flow that named a connection ends on it.
func TestCompletes(t *testing.T) {
	for _, tc := range []struct {
		named, stored string
		err           error
	}{
		{"", "cn_a", nil},
		{"cn_a", "cn_a", nil},
		{"cn_a", "cn_b", ErrAccountMismatch},
	} {
		if err := Completes("github", tc.named, tc.stored, "octocat"); !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Fatalf("%s → %s: %v, want %v", tc.named, tc.stored, err, tc.err)
		}
	}
}

// TestMayEnd: an unlink needs an approval of the account held now.
func TestMayEnd(t *testing.T) {
	if err := MayEnd("github", held(home, "read", "write"), approval(home, "read")); err != nil {
		t.Fatalf("the same account, grown: %v", err)
	}
	if err := MayEnd("github", held(work, "read"), approval(home, "read")); !errors.Is(err, ErrConsentRequired) {
		t.Fatalf("another account: %v", err)
	}
	// Another organization's connection: not connected, even with an
	// approval of its account.
	for _, tc := range []struct {
		name string
		c    Client
		h    vault.Held
	}{
		{"another organization's", beta, heldIn("acme", home, "read")},
		{"the default organization's, a client of another", acme, held(home, "read")},
		{"another organization's, a client of the default one", Client{}, heldIn("acme", home, "read")},
	} {
		if err := tc.c.MayEnd("github", tc.h, approval(home, "read")); !errors.Is(err, vault.ErrNotConnected) {
			t.Fatalf("%s: %v, want not connected", tc.name, err)
		}
	}
	if err := acme.MayEnd("github", heldIn("acme", home, "read"), approval(home, "read")); err != nil {
		t.Fatalf("its own organization's: %v", err)
	}
}

// TestRefusalCarriesNoSecret: the words of every refusal name only the
// provider, scopes and ids.
func TestRefusalCarriesNoSecret(t *testing.T) {
	for k := ProxyOnly; k <= InsufficientScope; k++ {
		r := &Refusal{Kind: k, Provider: "github", Reason: reasonGrown, Missing: []string{"repo"}}
		if r.Describe() == "refused" || r.Error() == "" {
			t.Fatalf("kind %d has no words", k)
		}
		if !errors.Is(r, &Refusal{Kind: k}) || errors.Is(r, &Refusal{Kind: k%InsufficientScope + 1}) {
			t.Fatalf("kind %d: errors.Is by kind", k)
		}
	}
}
