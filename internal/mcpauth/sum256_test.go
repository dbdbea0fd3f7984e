package mcpauth

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
)

func TestSum256(t *testing.T) {
	for _, n := range []int{0, 1, 32, 33, 700, 2048, 2049, 20000} {
		s := strings.Repeat("k", n)
		if sum256(s) != sha256.Sum256([]byte(s)) {
			t.Fatalf("sum256 of %d bytes differs from sha256.Sum256", n)
		}
	}
}

// BenchmarkTokenKey: hashing the user token on every /v1 request must not
// allocate (it did: 1 alloc of the token's size).
func BenchmarkTokenKey(b *testing.B) {
	raw := strings.Repeat("x", 700) // an ES256 access token is 500-900 bytes
	b.ReportAllocs()
	for b.Loop() {
		_ = tokenKey(raw)
	}
}

// TestWellFormedKey: the alphabet check accepts exactly what decoding would.
func TestWellFormedKey(t *testing.T) {
	key, _ := newKey()
	cases := map[string]bool{
		key:                              true,
		strings.TrimPrefix(key, "c"):     false,
		key + "A":                        false,
		key[:len(key)-1]:                 false,
		key[:10] + "+" + key[11:]:        false, // standard alphabet, not URL
		key[:10] + "=" + key[11:]:        false,
		"cks_" + strings.Repeat("_", 43): true,
	}
	for k, want := range cases {
		_, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(k, KeyPrefix))
		if got := wellFormedKey(k); got != want || (strings.HasPrefix(k, KeyPrefix) && len(k) == len(key) && got != (err == nil)) {
			t.Errorf("wellFormedKey(%q) = %v, want %v (decode error %v)", k, got, want, err)
		}
	}
}
