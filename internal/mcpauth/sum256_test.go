package mcpauth

import (
	"crypto/sha256"
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
