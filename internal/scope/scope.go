// Package scope holds the one rule connectd applies wherever OAuth scope lists
// are combined: the union of two lists keeps the first occurrence of every
// scope, in order, and drops empty strings (which no RFC 6749 scope token can
// be).
package scope

import "slices"

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
