package clientauth

import (
	"encoding/base64"
	"strings"
	"testing"
)

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
