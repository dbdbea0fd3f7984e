package mcpauth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/mcpauth/mcpauthtest"
	"github.com/connectd/connectd/internal/web"
)

// claimsWith returns a JSON claims set for an access token (kind "at") or an
// ID token (kind "id") with iss and sub spliced in verbatim: each is the
// inside of a JSON string exactly as a (hostile) issuer wrote it, escapes,
// bad bytes and all.
func claimsWith(kind, issLiteral, subLiteral string) []byte {
	now := time.Now().Unix()
	aud, extra := mcpauthtest.Resource, `"client_id":"mcp-client","scope":"tools:read"`
	if kind == "id" {
		aud, extra = "connectd", `"nonce":"n-1"`
	}
	return fmt.Appendf(nil, `{"iss":"%s","sub":"%s","aud":"%s",%s,"iat":%d,"exp":%d}`,
		issLiteral, subLiteral, aud, extra, now, now+3600)
}

// literal writes s as the inside of a JSON string, escaping only '"' and '\':
// everything else (control characters, invalid UTF-8) goes in raw.
func literal(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

func TestCheckSubject(t *testing.T) {
	for _, tc := range []struct {
		name string
		sub  string
		ok   bool
	}{
		{"ascii", "alice", true},
		{"uuid", "248289761001", true},
		{"auth0 style", "auth0|5f7c8ec7c33c6c004bbafe82", true},
		{"255 bytes", strings.Repeat("a", 255), true},
		{"256 bytes", strings.Repeat("a", 256), false},
		{"2049 bytes", strings.Repeat("a", 2049), false},
		{"85 three-byte runes (255 bytes)", strings.Repeat("€", 85), true},
		{"86 three-byte runes (258 bytes)", strings.Repeat("€", 86), false},
		{"spaces kept as is", " alice ", true},
		{"right-to-left override", "alice\u202Egnp.exe", true},
		{"hebrew", "משתמש", true},
		{"emoji", "🦊", true},
		{"U+FFFD as such", "a\uFFFDb", true},
		{"empty", "", false},
		{"NUL", "alice\x00", false},
		{"tab", "al\tice", false},
		{"newline", "alice\nadmin", false},
		{"carriage return", "alice\r", false},
		{"escape", "\x1b[31malice", false},
		{"DEL", "alice\x7f", false},
		{"C1 NEL", "alice\u0085", false},
		{"C1 CSI", "alice\u009b", false},
		{"line separator", "alice\u2028bob", false},
		{"paragraph separator", "alice\u2029", false},
		{"invalid UTF-8", "alice\xff", false},
		{"truncated UTF-8", "alice\xe2\x82", false},
		{"overlong NUL", "alice\xc0\x80", false},
		{"UTF-8 surrogate", "alice\xed\xb0\x80", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := mcpauth.CheckSubject(tc.sub)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckSubject(%q) = %v, want ok=%v", tc.sub, err, tc.ok)
			}
			if err != nil && (!errors.Is(err, mcpauth.ErrIdentity) || !errors.Is(err, mcpauth.ErrInvalidToken)) {
				t.Fatalf("error %v does not wrap ErrIdentity and ErrInvalidToken", err)
			}
			if err != nil && tc.sub != "" && strings.Contains(err.Error(), tc.sub) {
				t.Fatalf("error repeats the value: %v", err)
			}
			// The same characters are refused in an issuer (lengths differ).
			if len(tc.sub) <= 255 {
				if err := mcpauth.CheckIssuer("https://idp.example/" + tc.sub); (err == nil) != tc.ok && tc.sub != "" {
					t.Fatalf("CheckIssuer(.../%q) = %v", tc.sub, err)
				}
			}
		})
	}
	if err := mcpauth.CheckIssuer("https://idp.example/" + strings.Repeat("a", 1004)); err != nil {
		t.Fatalf("1024-byte issuer refused: %v", err)
	}
	if err := mcpauth.CheckIssuer("https://idp.example/" + strings.Repeat("a", 1005)); !errors.Is(err, mcpauth.ErrIdentity) {
		t.Fatalf("1025-byte issuer: %v", err)
	}
}

// TestVerifyHostileIdentity: a token signed by the trusted issuer whose sub
// (or iss) is hostile is refused with ErrInvalidToken (never used rewritten,
// never passed on to storage to fail there), for access tokens and ID tokens
// alike; acceptable ones come out byte for byte.
func TestVerifyHostileIdentity(t *testing.T) {
	a := mcpauthtest.NewIDP(t, devidp.Config{})
	v := mcpauthtest.NewVerifier(t, mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{a.TrustedIssuer("a")}})
	iss := literal(a.Issuer())
	for _, tc := range []struct {
		name       string
		iss, sub   string // JSON string contents, verbatim
		want       string // the subject accepted; "" = refused
		wantErr    error
		idTokenToo bool
	}{
		{name: "plain", iss: iss, sub: "alice", want: "alice"},
		{name: "escaped ascii", iss: iss, sub: `\u0061lice`, want: "alice"},
		{name: "right-to-left override", iss: iss, sub: "alice\u202Egnp.exe", want: "alice\u202Egnp.exe"},
		{name: "escaped surrogate pair", iss: iss, sub: `\ud83e\udd8a`, want: "🦊"},
		{name: "escaped backslash then u", iss: iss, sub: `a\\udc00`, want: `a\udc00`},
		{name: "255 bytes", iss: iss, sub: strings.Repeat("b", 255), want: strings.Repeat("b", 255)},

		{name: "NUL escaped", iss: iss, sub: `alice\u0000`, wantErr: mcpauth.ErrIdentity},
		{name: "newline escaped", iss: iss, sub: `alice\nadmin`, wantErr: mcpauth.ErrIdentity},
		{name: "C1 escaped", iss: iss, sub: `alice\u0085`, wantErr: mcpauth.ErrIdentity},
		{name: "DEL raw", iss: iss, sub: "alice\x7f", wantErr: mcpauth.ErrIdentity},
		{name: "line separator", iss: iss, sub: `alice\u2028`, wantErr: mcpauth.ErrIdentity},
		{name: "256 bytes", iss: iss, sub: strings.Repeat("b", 256), wantErr: mcpauth.ErrIdentity},
		{name: "2049 bytes", iss: iss, sub: strings.Repeat("b", 2049), wantErr: mcpauth.ErrIdentity},
		{name: "invalid UTF-8", iss: iss, sub: "alice\xff", wantErr: mcpauth.ErrMalformedToken},
		{name: "invalid UTF-8 elsewhere", iss: iss, sub: "alice\",\"x\":\"\xc3", wantErr: mcpauth.ErrMalformedToken},
		{name: "lone low surrogate", iss: iss, sub: `alice\udc00`, wantErr: mcpauth.ErrMalformedToken},
		{name: "lone high surrogate", iss: iss, sub: `alice\uD800`, wantErr: mcpauth.ErrMalformedToken},
		{name: "high surrogate then high", iss: iss, sub: `\ud83e\ud83e`, wantErr: mcpauth.ErrMalformedToken},
		{name: "reversed pair", iss: iss, sub: `\udd8a\ud83e`, wantErr: mcpauth.ErrMalformedToken},
		{name: "claim Sub overrides sub", iss: iss, sub: `alice","Sub":"mallory`, wantErr: mcpauth.ErrIdentity},
		{name: "claim SUB overrides sub", iss: iss, sub: `alice","SUB":"mallory`, wantErr: mcpauth.ErrIdentity},
		{name: "claim ISS overrides iss", iss: `https://evil.example","ISS":"` + iss, sub: "alice", wantErr: mcpauth.ErrIdentity},
		{name: "iss with NUL", iss: iss + `\u0000`, sub: "alice", wantErr: mcpauth.ErrUntrustedIssuer},
		{name: "iss with invalid UTF-8", iss: iss + "\xff", sub: "alice", wantErr: mcpauth.ErrMalformedToken},
		{name: "iss with lone surrogate", iss: iss + `\udc00`, sub: "alice", wantErr: mcpauth.ErrMalformedToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			at, err := a.SignJSON("at+jwt", claimsWith("at", tc.iss, tc.sub))
			if err != nil {
				t.Fatal(err)
			}
			idt, err := a.SignJSON("JWT", claimsWith("id", tc.iss, tc.sub))
			if err != nil {
				t.Fatal(err)
			}
			id, atErr := v.VerifyAccessToken(ctx, at, []string{mcpauthtest.Resource})
			tok, idErr := v.VerifyIDToken(ctx, a.Issuer(), idt, "connectd", "n-1")
			for kind, got := range map[string]struct {
				sub string
				err error
			}{"access token": {id.Subject, atErr}, "ID token": {tok.Subject, idErr}} {
				switch {
				case tc.want != "" && (got.err != nil || got.sub != tc.want):
					t.Errorf("%s: got %.60q, %v; want %.60q", kind, got.sub, got.err, tc.want)
				case tc.want == "" && !errors.Is(got.err, tc.wantErr):
					t.Errorf("%s: got %.60q, %v; want %v", kind, got.sub, got.err, tc.wantErr)
				}
			}
			if tc.wantErr != nil {
				var we *web.Error
				if !errors.As(web.AsError(atErr), &we) || we.Status != http.StatusUnauthorized || we.Code != "invalid_token" &&
					!(errors.Is(tc.wantErr, mcpauth.ErrUntrustedIssuer) && we.Code == "untrusted_issuer") {
					t.Errorf("APIError = %v", web.AsError(atErr))
				}
			}
		})
	}
}

// TestIssuerConfigFollowsTheIdentityRule: an issuer whose URL no token could
// carry (CheckIssuer) is refused at configuration time.
func TestIssuerConfigFollowsTheIdentityRule(t *testing.T) {
	long := mcpauth.Issuer{ID: "long", URL: "https://idp.example/" + strings.Repeat("a", 1100)}
	if err := long.Validate(false); err == nil {
		t.Fatal("a 1120-byte issuer URL was accepted")
	}
	ok := mcpauth.Issuer{ID: "ok", URL: "https://idp.example/realms/\u05e9"}
	if err := ok.Validate(false); err != nil {
		t.Fatal(err)
	}
}

// FuzzUserIdentity: whatever an issuer puts inside the JSON string of sub,
// a token it signed is either refused with ErrInvalidToken or verified with
// exactly the subject a strict JSON reader (strictString, written apart from
// the production check) finds there, and that subject passes CheckSubject;
// it is accepted exactly when both hold. Modes: escaped=false writes the
// fuzzed bytes raw (only '"' and '\' escaped); escaped=true splices them in
// verbatim, escapes and all. Run longer with
//
//	go test -run '^$' -fuzz FuzzUserIdentity -fuzztime 1m ./internal/mcpauth
func FuzzUserIdentity(f *testing.F) {
	a := mcpauthtest.NewIDP(f, devidp.Config{})
	v := mcpauthtest.NewVerifier(f, mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{a.TrustedIssuer("a")}})
	for _, seed := range []struct {
		sub     string
		escaped bool
	}{
		{"alice", false}, {"alice", true}, {"alice\x00", false}, {`alice\u0000`, true}, {"alice\xff", false},
		{`\udc00`, true}, {`\ud800\udc00`, true}, {`\ud800`, true}, {`\\udc00`, true}, {`\ud800\u0041`, true},
		{strings.Repeat("x", 255), false}, {strings.Repeat("x", 256), false}, {strings.Repeat("y", 2049), false},
		{strings.Repeat("z", 100<<10), false}, {"\u202Eevil", false}, {`\u202e`, true}, {"a\u0085", false},
		{"a\u2028", false}, {"\x7f", false}, {"\t", false}, {`\t`, true}, {`a","Sub":"b`, true}, {"", false},
		{`\"`, true}, {`\`, true}, {`\uZZZZ`, true}, {"\uFFFD", false}, {`\uFFFD`, true}, {"\xef\xbf\xbd", false},
	} {
		f.Add(seed.sub, seed.escaped)
	}
	f.Fuzz(func(t *testing.T, sub string, escaped bool) {
		lit := sub
		if !escaped {
			lit = literal(sub)
		}
		want, strictOK := strictString(lit)
		if !escaped && strictOK && want != sub {
			t.Fatalf("oracle: %q read back as %q", sub, want)
		}
		acceptable := strictOK && mcpauth.CheckSubject(want) == nil
		ctx := context.Background()
		for _, kind := range []string{"at", "id"} {
			typ := map[string]string{"at": "at+jwt", "id": "JWT"}[kind]
			raw, err := a.SignJSON(typ, claimsWith(kind, literal(a.Issuer()), lit))
			if err != nil {
				t.Fatal(err)
			}
			var got string
			if kind == "at" {
				var id mcpauth.Identity
				id, err = v.VerifyAccessToken(ctx, raw, []string{mcpauthtest.Resource})
				got = id.Subject
			} else {
				var tok mcpauth.IDToken
				tok, err = v.VerifyIDToken(ctx, a.Issuer(), raw, "connectd", "n-1")
				got = tok.Subject
			}
			switch {
			case err != nil && !errors.Is(err, mcpauth.ErrInvalidToken):
				t.Fatalf("%s: undocumented refusal %v", kind, err)
			case err == nil && !acceptable:
				t.Fatalf("%s: accepted %.60q (from %.60q), which should be refused", kind, got, lit)
			case err == nil && got != want:
				t.Fatalf("%s: accepted as %.60q, signed %.60q", kind, got, want)
			case err != nil && acceptable && len(raw) <= 16<<10:
				t.Fatalf("%s: refused %.60q: %v", kind, want, err)
			}
		}
	})
}

// strictString decodes the inside of a JSON string (RFC 8259 §7) and fails
// on whatever a lenient reader would repair: invalid UTF-8, raw control
// characters, unknown escapes and unpaired surrogates. It is the test's own
// reading, independent of the one under test.
func strictString(s string) (string, bool) {
	var out []rune
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			return "", false
		case r == '"' || r < 0x20:
			return "", false
		case r != '\\':
			out = append(out, r)
			i += n
			continue
		}
		if i+1 >= len(s) {
			return "", false
		}
		c := s[i+1]
		i += 2
		if e, ok := map[byte]rune{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}[c]; ok {
			out = append(out, e)
			continue
		}
		if c != 'u' {
			return "", false
		}
		u, ok := hexRune(s, i)
		if !ok {
			return "", false
		}
		i += 4
		switch {
		case u >= 0xDC00 && u < 0xE000:
			return "", false
		case u >= 0xD800 && u < 0xDC00:
			if i+6 > len(s) || s[i] != '\\' || s[i+1] != 'u' {
				return "", false
			}
			lo, ok := hexRune(s, i+2)
			if !ok || lo < 0xDC00 || lo >= 0xE000 {
				return "", false
			}
			i += 6
			u = 0x10000 + (u-0xD800)<<10 + (lo - 0xDC00)
		}
		out = append(out, u)
	}
	return string(out), true
}

func hexRune(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	n, err := strconv.ParseUint(s[i:i+4], 16, 16)
	return rune(n), err == nil
}

// TestSwitchPrompt (issue 38 item 4): the prompt an issuer is asked when a
// user switches accounts defaults to "login", "select_account" at Google
// (which refuses "login"); a configured one must be OIDC values that let
// the user choose — "none" or an unknown value is refused at configuration.
func TestSwitchPrompt(t *testing.T) {
	if p := mcpauth.DefaultSwitchPrompt("https://accounts.google.com"); p != "select_account" {
		t.Fatalf("Google: %q", p)
	}
	if p := mcpauth.DefaultSwitchPrompt("https://login.microsoftonline.com/tid/v2.0"); p != "login" {
		t.Fatalf("Entra: %q", p)
	}
	for _, tt := range []struct {
		prompt string
		ok     bool
	}{
		{"", true}, {"login", true}, {"select_account", true}, {"login consent", true}, {"select_account login", true},
		{"none", false}, {"login login", false}, {"Login", false}, {"login  consent", false}, {" login", false},
		{"login,consent", false},
	} {
		p := tt.prompt
		is := mcpauth.Issuer{ID: "a", URL: "https://idp.example", SwitchPrompt: &p}
		if err := is.Validate(false); (err == nil) != tt.ok {
			t.Errorf("switch_prompt %q: %v, want ok=%t", tt.prompt, err, tt.ok)
		}
	}
}
