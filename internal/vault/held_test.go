package vault_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/vault"
)

// TestTokenForDecidesOnWhatItReturns (security review of issue 33): the
// release decision is asked on the stored row before the credential is
// opened, and again on what a refresh returns. Here, between the two, a
// reconnect puts another account's credential (an unnamed one, with the
// same scopes) in the same connection, so the shared refresh hands that
// credential back: TokenFor must ask the decision about it, whose account
// is not the one the first answer was for, and refuse — never return it
// under the first account's approval.
func TestTokenForDecidesOnWhatItReturns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := pool(t)
	srv, oa := fakeProvider(t, providertest.Options{})
	s := newStore(t, p, mustParse(t, keyLine(t, 1)), oa, time.Minute)
	u := identity.User{Issuer: "https://idp.example", Subject: "alice"}

	first := credOf(srv.Grant([]string{"files.read"}, 30*time.Second)) // within the skew: the read refreshes
	first.AccountID = "home"
	conn, err := s.Put(ctx, u, "fake", first)
	if err != nil {
		t.Fatal(err)
	}
	other := credOf(srv.Grant([]string{"files.read"}, time.Hour))
	other.AccountID = vault.NewAccountID(vault.UnnamedAccount)

	home := vault.AccountHash("home")
	var asked [][]byte
	errOther := errors.New("another account than approved")
	decide := func(h vault.Held) error {
		asked = append(asked, h.Account)
		if len(asked) == 1 {
			// Meanwhile: the user reconnects this connection and the
			// provider names no account.
			if _, err := s.PutWith(ctx, u, "fake", vault.Target{ID: conn.ID, Unnamed: true}, other, nil); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(h.Account, home) {
			return errOther
		}
		return nil
	}
	got, err := s.TokenFor(ctx, u, "fake", conn.ID, nil, decide)
	if !errors.Is(err, errOther) {
		t.Fatalf("TokenFor returned %v, %v after the connection was replaced; the decision was asked about %d credentials",
			got, err, len(asked))
	}
}
