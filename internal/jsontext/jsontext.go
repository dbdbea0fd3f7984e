// Package jsontext holds the one rule for JSON text that decodes to
// something other than what it says: an escaped lone UTF-16 surrogate
// (\udc00), which encoding/json turns into U+FFFD, so alice\udc00 and
// alice\ufffd would name the same identity. User tokens' claims
// (mcpauth) and every request body (web.DecodeJSON) are refused with one.
//
// It must never import another connectd package.
package jsontext

// LoneSurrogate reports whether the JSON text b has a \u escape of a
// UTF-16 surrogate that is not half of a high-low pair. In valid JSON every
// backslash starts an escape, so reading escape by escape from the start
// never mistakes the u of an escaped backslash ("\\u") for one.
func LoneSurrogate(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		i++
		if i >= len(b) || b[i] != 'u' {
			continue
		}
		r, ok := hex4(b[i+1:])
		if !ok {
			return false // not JSON: the parser refuses it
		}
		i += 4
		switch {
		case r >= 0xD800 && r < 0xDC00: // high: a low must follow at once
			if i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
				if lo, ok := hex4(b[i+3:]); ok && lo >= 0xDC00 && lo < 0xE000 {
					i += 6
					continue
				}
			}
			return true
		case r >= 0xDC00 && r < 0xE000:
			return true
		}
	}
	return false
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
