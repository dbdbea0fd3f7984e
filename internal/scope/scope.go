// Package scope holds the one set of rules connectd applies to OAuth scopes:
// what a scope may look like (Valid, the same for the providers file and the
// /v1 API), and how scope lists are combined or compared (union, missing,
// intersection): each keeps the first occurrence of every scope, in order,
// and drops empty strings (which no scope token can be).
//
// It must never import another connectd package: it is a leaf used by
// provider, vault and connect.
package scope

import "slices"

// MaxBytes is the longest scope connectd accepts, from a client or from the
// providers file.
const MaxBytes = 256

// Valid reports whether s is a scope connectd accepts: an RFC 6749 §3.3
// scope-token (printable ASCII except space, '"' and '\') of 1 to MaxBytes
// bytes, without a comma. The comma is refused because some providers (and
// the API's ?scopes=) separate scopes with it: "a,b" would be one scope to
// connectd and the user's consent but two to the provider.
func Valid(s string) bool {
	if s == "" || len(s) > MaxBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' || c == ',' {
			return false
		}
	}
	return true
}

// Union returns the scopes of a followed by those of b that are not already
// there, without empty strings; a fresh slice, never nil.
func Union(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	for _, list := range [][]string{a, b} {
		for _, s := range list {
			if s != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// Missing returns the scopes of want that have lacks, each once, in want's
// order; nil when none.
func Missing(want, have []string) []string {
	var out []string
	for _, s := range want {
		if s != "" && !slices.Contains(have, s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// Intersect returns the scopes of a that b also has, each once, in a's
// order; nil when none.
func Intersect(a, b []string) []string {
	var out []string
	for _, s := range a {
		if s != "" && slices.Contains(b, s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
