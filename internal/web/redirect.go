package web

import "strings"

// SafeReturnTo reports whether s may be used as a post-login redirect target.
// It is an allow-list of shapes, not a block-list of tricks: s must be an
// absolute path on this site made only of URL-safe ASCII, and so it refuses
//
//   - anything not starting with exactly one '/': "//host", "/\host",
//     "https:host", "https://host", "javascript:...", "host/path";
//   - backslashes, whitespace, control characters, non-ASCII, '#', quotes;
//   - malformed percent-escapes and escapes of '/', '\', '.', '%', spaces or
//     control characters ("/%2F%2Fhost", "/%5Chost", "/%09/host", "%252F"),
//     which some browsers or proxies decode into one of the shapes above;
//   - dot segments ("/a/../b"), which no connectd URL needs.
func SafeReturnTo(s string) bool {
	if len(s) == 0 || len(s) > 1024 || s[0] != '/' {
		return false
	}
	if len(s) > 1 && (s[1] == '/' || s[1] == '\\') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-._~!$&'()*+,;=:@/?", c) >= 0:
		case c == '%':
			if i+2 >= len(s) || unhex(s[i+1]) < 0 || unhex(s[i+2]) < 0 {
				return false
			}
			b := byte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			if b <= ' ' || b >= 0x7f || strings.IndexByte(`/\.%`, b) >= 0 {
				return false
			}
			i += 2
		default:
			return false
		}
	}
	path, _, _ := strings.Cut(s, "?")
	for _, seg := range strings.Split(path, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
