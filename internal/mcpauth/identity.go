package mcpauth

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	"github.com/connectd/connectd/internal/jsontext"
)

// A user identity (issuer, subject) is used byte for byte as the issuer
// signed it — as a database key, in the vault's associated data, in audit
// rows and on admin pages — or it is refused. These are the limits; they are
// documented in docs/identity.md and apply alike to access tokens (/v1 API)
// and ID tokens (browser login), so a browser session never holds an
// identity the API would refuse.
const (
	// MaxSubjectBytes bounds sub. OpenID Connect Core §2: sub "MUST NOT
	// exceed 255 ASCII characters"; counted here in bytes of UTF-8, which is
	// what storage and index keys pay for.
	MaxSubjectBytes = 255
	// MaxIssuerBytes bounds iss, an https URL that must also equal a
	// configured issuer byte for byte.
	MaxIssuerBytes = 1024
)

// CheckSubject reports whether s is acceptable as a subject: 1–255 bytes of
// valid UTF-8 without control characters (C0, DEL, C1) or line and paragraph
// separators (U+2028, U+2029). Any other printable Unicode, right-to-left
// text and its marks included, is kept as is. Errors wrap ErrIdentity and
// never contain s.
func CheckSubject(s string) error { return checkIdentityText("sub", s, MaxSubjectBytes) }

// CheckIssuer reports whether s is acceptable as an issuer identifier, by the
// rules of CheckSubject with a limit of MaxIssuerBytes.
func CheckIssuer(s string) error { return checkIdentityText("iss", s, MaxIssuerBytes) }

// CheckIdentity applies CheckIssuer and CheckSubject to a user identity.
func CheckIdentity(issuer, subject string) error {
	if err := CheckIssuer(issuer); err != nil {
		return err
	}
	return CheckSubject(subject)
}

func checkIdentityText(claim, s string, limit int) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s is empty", ErrIdentity, claim)
	case len(s) > limit:
		return fmt.Errorf("%w: %s is longer than %d bytes", ErrIdentity, claim, limit)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrIdentity, claim)
	}
	// Control characters end up in log lines, CSV exports and terminals (and
	// NUL cannot be stored in Postgres text at all); the separators break
	// lines in the same places.
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }) >= 0 {
		return fmt.Errorf("%w: %s contains a control character", ErrIdentity, claim)
	}
	return nil
}

// claimsJSON returns a token's decoded header and payload segments and refuses
// JSON that encoding/json would not read byte for byte: invalid UTF-8, and
// \u escapes of unpaired UTF-16 surrogates. The decoder silently turns both
// into U+FFFD, which would make a different identity out of the one the
// issuer signed. Segments that do not decode are left to the parser to
// refuse (nil, nil).
func claimsJSON(raw string) ([]byte, error) {
	segs := strings.Split(raw, ".")
	if len(segs) != 3 {
		return nil, nil
	}
	p := jwt.NewParser() // the same decoding the verifying parser uses
	for i, seg := range segs[:2] {
		b, err := p.DecodeSegment(seg)
		if err != nil {
			return nil, nil
		}
		if !utf8.Valid(b) || jsontext.LoneSurrogate(b) {
			return nil, fmt.Errorf("%w: JSON is not valid UTF-8 (or escapes a lone surrogate)", ErrMalformedToken)
		}
		if i == 1 {
			return b, nil
		}
	}
	return nil, nil
}

// signedIdentity checks that iss and sub, as the struct decoding read them,
// are exactly the "iss" and "sub" members of the signed payload, and that
// they are an acceptable identity. encoding/json matches struct fields case
// insensitively, so a claim named "Sub" or "SUB" (a custom claim some issuers
// fill from user attributes) would otherwise overwrite sub.
func signedIdentity(payload []byte, iss, sub string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(payload, &m); err != nil {
		return fmt.Errorf("%w: claims are not a JSON object", ErrMalformedToken)
	}
	var rawIss, rawSub string
	if json.Unmarshal(m["iss"], &rawIss) != nil || json.Unmarshal(m["sub"], &rawSub) != nil ||
		rawIss != iss || rawSub != sub {
		return fmt.Errorf("%w: iss or sub is not the signed claim of that exact name", ErrIdentity)
	}
	return CheckIdentity(iss, sub)
}
