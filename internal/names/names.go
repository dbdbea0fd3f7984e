// Package names owns the shape of the provider name — the one rule the
// providers file, the /v1 API, the client registry, the admin filters and the
// vault all apply, so a name one of them admits is a name every other one
// admits too — of the client id, which the admin filters and the account
// page's forms take from requests, and of the organization id, which the
// organization store, the CLI and the HTTP surfaces take.
//
// It must never import another connectd package: it is a leaf that provider,
// vault, mcpauth, connect and admin all use.
package names

import "strings"

// MaxProviderBytes is the longest provider name.
const MaxProviderBytes = 64

// ValidProvider reports whether n has the shape of a provider name: 1–64 of
// a-z 0-9 _ . -, starting with a letter or digit. Callers check names from
// requests with it before any lookup.
func ValidProvider(n string) bool {
	if n == "" || len(n) > MaxProviderBytes {
		return false
	}
	for i, r := range n {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case (r == '_' || r == '-' || r == '.') && i > 0:
		default:
			return false
		}
	}
	return true
}

// MaxClientIDBytes is the longest client id a request may name.
const MaxClientIDBytes = 68

// ValidClientID reports whether id has the shape of a client id: "cli_" and
// 1–64 of a-z 0-9 (mcpauth mints "cli_" and 16 of them). Callers check ids
// from requests with it before any lookup.
func ValidClientID(id string) bool {
	rest, ok := strings.CutPrefix(id, "cli_")
	if !ok || rest == "" || len(id) > MaxClientIDBytes {
		return false
	}
	for _, r := range rest {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// MaxOrgBytes is the longest organization id.
const MaxOrgBytes = 40

// DefaultOrg is the organization every deployment starts with (migration
// 00028), which owns every row made before organizations existed.
const DefaultOrg = "default"

// ValidOrg reports whether id has the shape of an organization id: 1–40 of
// a-z 0-9 -, neither starting nor ending with '-' (the CHECK on
// organizations.id in migrations/00028_organizations.sql, which a test holds
// this to). Callers check ids from requests and the command line with it
// before any lookup.
func ValidOrg(id string) bool {
	if id == "" || len(id) > MaxOrgBytes || id[0] == '-' || id[len(id)-1] == '-' {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
		default:
			return false
		}
	}
	return true
}
