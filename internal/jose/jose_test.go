package jose_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"

	"github.com/connectd/connectd/internal/jose"
)

// TestPublicKeys: a JWK Set the cache or a registration takes holds public
// keys the allow-list verifies with, and nothing else: a private or
// symmetric key, or a weak RSA key, refuses the whole set.
func TestPublicKeys(t *testing.T) {
	t.Parallel()
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	weak, _ := rsa.GenerateKey(rand.Reader, 1024)
	marshal := func(key any, private bool) jwkset.JWKMarshal {
		k, err := jwkset.NewJWKFromKey(key, jwkset.JWKOptions{Marshal: jwkset.JWKMarshalOptions{Private: private}})
		if err != nil {
			t.Fatal(err)
		}
		return k.Marshal()
	}
	set := func(keys ...any) []byte {
		raw, _ := json.Marshal(map[string]any{"keys": keys})
		return raw
	}
	for _, tt := range []struct {
		name string
		raw  []byte
		n    int // keys kept; 0: refused
	}{
		{"a public EC key", set(marshal(&ec.PublicKey, false)), 1},
		{"the private EC key", set(marshal(ec, true)), 0},
		{"a symmetric key beside a public one", set(marshal(&ec.PublicKey, false), map[string]string{"kty": "oct", "k": "c2VjcmV0"}), 0},
		{"RSA 1024", set(marshal(&weak.PublicKey, false)), 0},
		{"no key", set(), 0},
		{"not JSON", []byte("nope"), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := jose.PublicKeys(tt.raw)
			if tt.n == 0 && err == nil || tt.n > 0 && (err != nil || len(keys) != tt.n) {
				t.Fatalf("got %d keys, %v; want %d", len(keys), err, tt.n)
			}
		})
	}
}

// TestNoCrit: any crit is refused, even an empty one.
func TestNoCrit(t *testing.T) {
	t.Parallel()
	for _, h := range []map[string]any{{"crit": []string{"b64"}}, {"crit": []string{}}, {"crit": nil}} {
		if jose.NoCrit(h) == nil {
			t.Fatalf("%v accepted", h)
		}
	}
	if err := jose.NoCrit(map[string]any{"alg": "ES256"}); err != nil {
		t.Fatal(err)
	}
}

// TestUnavailable: the 503 error says when to retry, and is ErrUnavailable.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	err := jose.Unavailable(7*time.Second, "x %s", "y")
	if d, ok := jose.RetryAfter(err); !ok || d != 7*time.Second || !errors.Is(err, jose.ErrUnavailable) {
		t.Fatalf("%v: %s %t", err, d, ok)
	}
	if _, ok := jose.RetryAfter(errors.New("other")); ok {
		t.Fatal("a plain error says when to retry")
	}
}
