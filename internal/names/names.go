// Package names owns the shape of the provider name: the one rule the
// providers file, the /v1 API, the client registry, the admin filters and the
// vault all apply, so a name one of them admits is a name every other one
// admits too.
//
// It must never import another connectd package: it is a leaf that provider,
// vault, mcpauth, connect and admin all use.
package names

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
