package admin_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestHostileIdentityFilters: user= and issuer= on the connections listing
// (API and page) take any bytes a URL can carry. Those no stored identity can
// have (mcpauth.CheckSubject/CheckIssuer: NUL, invalid UTF-8, control
// characters, too long) are refused with 400 invalid_request before they reach
// Postgres, which would fail on NUL and invalid UTF-8 (a 500); printable
// Unicode such as a right-to-left override is matched byte for byte.
func TestHostileIdentityFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	const rtl = "alice\u202Egnp.exe"
	id := e.put(e.vault, rtl, "fake")
	e.put(e.vault, "alice", "fake")
	_, key := e.newAdminKey("scripts")
	b := e.adminBrowser()
	issuer := e.idp.Issuer()

	for _, tc := range []struct {
		name  string
		value string
		ok    bool // a legal value: 200
	}{
		{"NUL", "alice\x00", false},
		{"invalid UTF-8", "alice\xff", false},
		{"truncated UTF-8", "alice\xe2\x82", false},
		{"UTF-8 of a lone surrogate", "alice\xed\xb0\x80", false},
		{"overlong NUL", "alice\xc0\x80", false},
		{"2049 bytes", strings.Repeat("a", 2049), false},
		{"256 bytes", strings.Repeat("a", 256), false},
		{"100 KB", strings.Repeat("\xff", 100<<10), false},
		{"tab inside", "al\tice", false},
		{"newline inside", "alice\nadmin", false},
		{"escape", "\x1b[31malice", false},
		{"DEL", "ali\x7fce", false},
		{"C1", "ali\u0085ce", false},
		{"line separator", "ali\u2028ce", false},
		{"right-to-left override", rtl, true},
		{"255 bytes", strings.Repeat("a", 255), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, param := range []string{"user", "issuer"} {
				value := tc.value
				if param == "issuer" {
					value = issuer + "/" + tc.value
					if len(tc.value) == 256 || len(tc.value) == 255 {
						continue // within an issuer's 1024 bytes
					}
				}
				q := "?" + param + "=" + url.QueryEscape(value)
				st, raw := e.raw(http.MethodGet, "/admin/api/connections"+q, "Bearer "+key, nil, nil)
				var out map[string]any
				_ = json.Unmarshal([]byte(raw), &out)
				switch {
				case st >= 500:
					t.Fatalf("API %s=%.40q: %d %s", param, value, st, raw)
				case tc.ok && st != http.StatusOK:
					t.Errorf("API %s=%.40q: %d %s, want 200", param, value, st, raw)
				case !tc.ok && (st != http.StatusBadRequest || out["error"] != "invalid_request"):
					t.Errorf("API %s=%.40q: %d %s, want 400 invalid_request", param, value, st, raw)
				}
				r := b.get(e.srv.URL + "/admin/connections" + q)
				switch {
				case r.status >= 500:
					t.Fatalf("page %s=%.40q: %d", param, value, r.status)
				case tc.ok && r.status != http.StatusOK:
					t.Errorf("page %s=%.40q: %d, want 200", param, value, r.status)
				case !tc.ok && (r.status != http.StatusBadRequest || e.code(r) != "invalid_request"):
					t.Errorf("page %s=%.40q: %d %q, want 400 invalid_request", param, value, r.status, e.code(r))
				}
			}
		})
	}

	// The legal hostile-looking subject is found byte for byte, and only it.
	st, out := e.adminAPI(key, http.MethodGet, "/admin/api/connections?user="+url.QueryEscape(rtl), nil)
	list, _ := out["connections"].([]any)
	if st != http.StatusOK || len(list) != 1 || list[0].(map[string]any)["id"] != id {
		t.Fatalf("user=%q: %d %v, want only %s", rtl, st, out, id)
	}
}
