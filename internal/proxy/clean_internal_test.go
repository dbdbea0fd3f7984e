package proxy

import (
	"math/rand/v2"
	"testing"
)

// TestPlainAgreesWithTheRule: whatever Clean's fast path answers as it is,
// the whole rule answers the same way, unchanged: over every path of up to
// four characters of an alphabet holding each class the rule tells apart,
// and random longer ones.
func TestPlainAgreesWithTheRule(t *testing.T) {
	t.Parallel()
	const alphabet = "a./%2eE;\\:~ ?"
	check := func(p string) {
		if !plain(p) {
			return
		}
		if got, err := cleanAll(p); err != nil || got != p {
			t.Fatalf("plain(%q) but the rule answers %q, %v", p, got, err)
		}
	}
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		check(prefix)
		if n == 0 {
			return
		}
		for i := range len(alphabet) {
			gen(prefix+alphabet[i:i+1], n-1)
		}
	}
	gen("", 4)
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, 1+r.IntN(24))
		for i := range b {
			b[i] = byte(r.IntN(128))
		}
		check(string(b))
	}
}
