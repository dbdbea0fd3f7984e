package vault_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/vault"
)

// The purpose labels connectd seals under (DESIGN invariant 13). Repeated
// here on purpose: changing a label makes everything sealed under it
// unreadable, so a change must show up as a failing test.
const (
	credentialLabel = "connectd/vault/credential/v1"
	verifierLabel   = "connectd/connect/pkce-verifier/v1"
	stateLabel      = "connectd/connect/request-state/v1"
)

// TestPurposeKeys: each purpose seals under its own key, derived from the
// configured key of the same version with HKDF-SHA256 and the label, so a
// ciphertext sealed for one purpose opens under no other (nor under the
// configured key), even with the same associated data; what the configured
// keys sealed before per-purpose keys still opens.
func TestPurposeKeys(t *testing.T) {
	t.Parallel()
	l1, l2 := keyLine(t, 1), keyLine(t, 2)
	root := mustParse(t, l1+",*"+l2)
	aad := keyring.Binding("test", "row-1")
	creds, verifiers, states := root.Purpose(credentialLabel), root.Purpose(verifierLabel), root.Purpose(stateLabel)
	sealed, err := creds.Seal([]byte("gho_secret"), aad)
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := root.Seal([]byte("gho_secret"), aad) // as connectd sealed before per-purpose keys
	if err != nil {
		t.Fatal(err)
	}
	sameConfig := mustParse(t, l1+",*"+l2).Purpose(credentialLabel) // another replica
	oldConfig := mustParse(t, "*"+l1).Purpose(credentialLabel)      // lacks the primary
	otherBytes := mustParse(t, l1+",*"+keyLine(t, 2)).Purpose(credentialLabel)
	tests := []struct {
		name string
		keys *keyring.Keyring
		ct   []byte
		ok   bool
	}{
		{"same purpose", creds, sealed, true},
		{"same purpose on another replica", sameConfig, sealed, true},
		{"another purpose: PKCE verifiers", verifiers, sealed, false},
		{"another purpose: request_state", states, sealed, false},
		{"the configured keys", root, sealed, false},
		{"a purpose of the purpose", creds.Purpose(credentialLabel), sealed, false},
		{"same label, key version missing", oldConfig, sealed, false},
		{"same label, other key bytes", otherBytes, sealed, false},
		{"legacy, under the credential purpose", creds, legacy, true},
		{"legacy, under the configured keys", root, legacy, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pt, err := tt.keys.Open(tt.ct, aad)
			switch {
			case tt.ok && (err != nil || string(pt) != "gho_secret"):
				t.Fatalf("got %q, %v; want it to open", pt, err)
			case !tt.ok && (!errors.Is(err, keyring.ErrDecrypt) || pt != nil):
				t.Fatalf("got %q, %v; want ErrDecrypt", pt, err)
			}
		})
	}

	t.Run("same versions and primary, derived once", func(t *testing.T) {
		t.Parallel()
		if creds.Primary() != 2 || fmt.Sprint(creds.Versions()) != "[1 2]" || !creds.Has(1) {
			t.Fatalf("purpose keyring %v", creds)
		}
		if root.Purpose(credentialLabel) != creds {
			t.Fatal("Purpose derived the same label twice")
		}
		if v, err := keyring.KeyVersion(sealed); err != nil || v != 2 {
			t.Fatalf("key version %d %v", v, err)
		}
		if sealed[0] != 2 || legacy[0] != 1 {
			t.Fatalf("format bytes %d (purpose) and %d (configured key), want 2 and 1", sealed[0], legacy[0])
		}
	})

	// The derivation is pinned: HKDF-SHA256, the configured key as the
	// secret, no salt, the label as info. Changing it would lose every
	// stored credential, so it is checked against an independent computation.
	t.Run("derivation is HKDF-SHA256 of the configured key and label", func(t *testing.T) {
		t.Parallel()
		_, b64, _ := strings.Cut(l2, ":")
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			t.Fatal(err)
		}
		key, err := hkdf.Key(sha256.New, raw, nil, credentialLabel, 32)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := aes.NewCipher(key)
		gcm, _ := cipher.NewGCM(block)
		pt, err := gcm.Open(nil, sealed[5:17], sealed[17:], append(bytes.Clone(sealed[:17]), aad...))
		if err != nil || string(pt) != "gho_secret" {
			t.Fatalf("independent HKDF key: %q %v", pt, err)
		}
		if _, err := (mustGCM(t, raw)).Open(nil, sealed[5:17], sealed[17:], append(bytes.Clone(sealed[:17]), aad...)); err == nil {
			t.Fatal("the configured key itself opens a purpose ciphertext")
		}
	})

	t.Run("formatting names the purpose, never a key", func(t *testing.T) {
		t.Parallel()
		_, b64, _ := strings.Cut(l2, ":")
		out := fmt.Sprintf("%v %+v %s", creds, creds, creds)
		if strings.Contains(out, b64[:12]) || !strings.Contains(out, credentialLabel) || !strings.Contains(out, "*2") {
			t.Fatalf("formatted: %s", out)
		}
	})
}

func mustGCM(t *testing.T, key []byte) cipher.AEAD {
	t.Helper()
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	return gcm
}

// TestLegacyCredentialsOpenAndRewrap: credentials sealed directly under the
// configured keys (every row written before per-purpose keys, under the old
// key version and under the primary one) still open, KeyStatus counts them
// as legacy, and Rewrap moves every one of them, those already under the
// primary version included, to the credential key; the store seals new
// credentials under the credential key only.
func TestLegacyCredentialsOpenAndRewrap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	p := pgtest.NewPool(t, dbURL)
	l1, l2 := keyLine(t, 1), keyLine(t, 2)
	root := mustParse(t, l1+",*"+l2)
	s := newStore(t, p, root, nil, 0)
	under1 := newStore(t, pgtest.NewPool(t, dbURL), mustParse(t, l1), nil, 0)

	type conn struct {
		user identity.User
		id   string
	}
	var conns []conn
	put := func(st *vault.Store, name string) conn {
		u := identity.User{Issuer: alice.Issuer, Subject: name}
		c, err := st.Put(ctx, u, "github", vault.Credential{AccessToken: "token-" + name, Expiry: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn{u, c.ID})
		return conn{u, c.ID}
	}
	// makeLegacy re-seals a row's credential as connectd did before
	// per-purpose keys: directly under the configured key of the version.
	makeLegacy := func(c conn, keys *keyring.Keyring) {
		aad := keyring.Binding("connectd/vault/connection-credential/v1", c.id, c.user.Issuer, c.user.Subject, "github")
		pt, err := keys.Purpose(credentialLabel).Open(storedCiphertext(t, p, c.id), aad)
		if err != nil {
			t.Fatal(err)
		}
		ct, err := keys.Seal(pt, aad)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Exec(ctx, `UPDATE connections SET ciphertext = $2, key_version = $3 WHERE id = $1`,
			c.id, ct, int32(keys.Primary())); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		makeLegacy(put(under1, fmt.Sprint("old-", i)), mustParse(t, l1)) // legacy, key 1
	}
	for i := range 3 {
		makeLegacy(put(s, fmt.Sprint("primary-", i)), root) // legacy, key 2 (the primary)
	}
	put(under1, "derived-1") // per-purpose, key 1
	put(s, "derived-2")      // per-purpose, key 2: nothing to do

	for _, c := range conns {
		if tok, err := s.Token(ctx, c.user, "github", "", nil); err != nil || tok.AccessToken != "token-"+c.user.Subject {
			t.Fatalf("%s before rewrap: %v", c.user.Subject, err)
		}
	}
	st, err := s.KeyStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []vault.KeyCount{
		{KeyVersion: 1, Status: vault.StatusActive, Rows: 1, InKeyring: true},
		{KeyVersion: 1, Status: vault.StatusActive, Rows: 3, Legacy: true, InKeyring: true},
		{KeyVersion: 2, Status: vault.StatusActive, Rows: 1, Primary: true, InKeyring: true},
		{KeyVersion: 2, Status: vault.StatusActive, Rows: 3, Legacy: true, InKeyring: true},
	}
	if fmt.Sprint(st) != fmt.Sprint(want) {
		t.Fatalf("status before rewrap\n got %+v\nwant %+v", st, want)
	}

	res, err := s.Rewrap(ctx, vault.RewrapOptions{Batch: 2, Wait: 200 * time.Millisecond})
	if err != nil || res.Rewrapped != 7 || res.Remaining != 0 || len(res.Failed) != 0 {
		t.Fatalf("rewrap: %+v %v", res, err)
	}
	for _, c := range conns {
		ct := storedCiphertext(t, p, c.id)
		if v, err := keyring.KeyVersion(ct); err != nil || v != 2 || ct[0] != 2 {
			t.Fatalf("%s after rewrap: format %d, key version %d, %v", c.user.Subject, ct[0], v, err)
		}
		if _, cred, err := s.Get(ctx, c.user, "github", ""); err != nil || cred.AccessToken != "token-"+c.user.Subject {
			t.Fatalf("%s after rewrap: %v", c.user.Subject, err)
		}
		// The configured key no longer opens it: it is under the credential key.
		aad := keyring.Binding("connectd/vault/connection-credential/v1", c.id, c.user.Issuer, c.user.Subject, "github")
		if _, err := root.Open(ct, aad); !errors.Is(err, keyring.ErrDecrypt) {
			t.Fatalf("%s after rewrap opens under the configured key: %v", c.user.Subject, err)
		}
	}
	st, err = s.KeyStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []vault.KeyCount{{KeyVersion: 2, Status: vault.StatusActive, Rows: 8, Primary: true, InKeyring: true}}; fmt.Sprint(st) != fmt.Sprint(want) {
		t.Fatalf("status after rewrap %+v", st)
	}
	if res, err := s.Rewrap(ctx, vault.RewrapOptions{}); err != nil || res.Rewrapped != 0 {
		t.Fatalf("second rewrap: %+v %v", res, err)
	}
}
