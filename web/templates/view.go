package templates

import (
	"slices"
	"strings"
	"unicode"
)

// initial is the letter shown in a name's badge: its first letter or digit,
// upper-cased, or "?" when it has none.
func initial(name string) string {
	for _, r := range name {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return strings.ToUpper(string(r))
		}
	}
	return "?"
}

// errorKind picks the error page's styling: a refusal, or a passing problem
// (expired link, too many requests, an outage) worth retrying.
func errorKind(status int) string {
	switch status {
	case 410, 429, 502, 503, 504:
		return "expired"
	default:
		return "refused"
	}
}

// contains reports whether list holds s.
func contains(list []string, s string) bool { return slices.Contains(list, s) }
