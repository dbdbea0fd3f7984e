// Package scope holds the one set of rules connectd applies wherever OAuth
// scope lists are combined or compared (union, missing, intersection): each
// keeps the first occurrence of every scope, in order, and drops empty
// strings (which no RFC 6749 scope token can be).
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
