package web_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/web"
)

// body is shaped like the /v1 request bodies.
type body struct {
	Provider string   `json:"provider"`
	Scopes   []string `json:"scopes"`
	Message  string   `json:"message"`
}

func decode(raw, contentType string, max int64) (*body, *web.Error) {
	r := httptest.NewRequest(http.MethodPost, "/v1/x", strings.NewReader(raw))
	r.Header.Set("Content-Type", contentType)
	var b body
	err := web.DecodeJSON(httptest.NewRecorder(), r, &b, max)
	if err == nil {
		return &b, nil
	}
	var e *web.Error
	if !errors.As(err, &e) {
		panic("DecodeJSON returned an untyped error: " + err.Error())
	}
	return nil, e
}

func TestDecodeJSONStrict(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		raw    string
		ctype  string
		status int // 0: accepted
	}{
		{"ok", `{"provider":"github","scopes":["repo"]}`, "application/json", 0},
		{"ok with charset", `{"provider":"github"}`, "application/json; charset=utf-8", 0},
		{"empty object", `{}`, "application/json", 0},
		{"wrong media type", `{"provider":"github"}`, "text/plain", 415},
		{"no media type", `{"provider":"github"}`, "", 415},
		{"form", `provider=github`, "application/x-www-form-urlencoded", 415},
		{"empty", ``, "application/json", 400},
		{"whitespace", " \n", "application/json", 400},
		{"not JSON", `{`, "application/json", 400},
		{"two values", `{"provider":"a"}{"provider":"b"}`, "application/json", 400},
		{"trailing garbage", `{"provider":"a"} x`, "application/json", 400},
		{"array", `[{"provider":"a"}]`, "application/json", 400},
		{"string", `"github"`, "application/json", 400},
		{"null", `null`, "application/json", 400},
		{"unknown field", `{"provider":"a","user":"bob"}`, "application/json", 400},
		{"case-folded name", `{"PROVIDER":"a"}`, "application/json", 400},
		{"duplicate member", `{"provider":"github","provider":"evil"}`, "application/json", 400},
		{"duplicate, other case", `{"provider":"github","Provider":"evil"}`, "application/json", 400},
		{"wrong type", `{"scopes":"repo"}`, "application/json", 400},
		{"deep nesting", `{"scopes":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`, "application/json", 400},
		{"invalid UTF-8", "{\"provider\":\"\xff\"}", "application/json", 400},
		{"lone low surrogate", `{"provider":"alice\udc00"}`, "application/json", 400}, // would decode to U+FFFD
		{"lone high surrogate", `{"provider":"alice\ud800x"}`, "application/json", 400},
		{"a surrogate pair is text", `{"provider":"\ud83d\ude00"}`, "application/json", 0},
		{"an escaped backslash before u", `{"provider":"\\udc00"}`, "application/json", 0},
		{"too large", `{"message":"` + strings.Repeat("x", 2000) + `"}`, "application/json", 413},
	}
	for _, tt := range tests {
		b, e := decode(tt.raw, tt.ctype, 1024)
		switch {
		case tt.status == 0 && e != nil:
			t.Errorf("%s: refused %d %s", tt.name, e.Status, e.Description)
		case tt.status != 0 && e == nil:
			t.Errorf("%s: accepted %+v", tt.name, b)
		case tt.status != 0 && e.Status != tt.status:
			t.Errorf("%s: status %d (%s), want %d", tt.name, e.Status, e.Description, tt.status)
		case e != nil && strings.Contains(e.Description, "evil"):
			t.Errorf("%s: description repeats a value: %s", tt.name, e.Description)
		}
	}
}

// FuzzDecodeJSON: whatever the body, DecodeJSON never panics, answers only
// its documented codes, and accepts only a single JSON object whose members
// are distinct, exactly-named fields.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{"provider":"github","scopes":["repo"],"message":"hi"}`,
		`{"provider":"github","provider":"x"}`,
		`{"Provider":"github"}`,
		`{"provider":"github"} {}`,
		`[1,2]`, `{"scopes":[[[[]]]]}`, "{\"message\":\"\\u0000\"}", `{"provider":1e400}`,
	} {
		f.Add([]byte(s))
	}
	allowed := map[string]bool{"provider": true, "scopes": true, "message": true}
	f.Fuzz(func(t *testing.T, raw []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v1/x", bytes.NewReader(raw))
		r.Header.Set("Content-Type", "application/json")
		var b body
		err := web.DecodeJSON(httptest.NewRecorder(), r, &b, 4096)
		if err != nil {
			var e *web.Error
			if !errors.As(err, &e) {
				t.Fatalf("untyped error %v", err)
			}
			if (e.Status != 400 || e.Code != "invalid_request") && (e.Status != 413 || e.Code != "request_too_large") {
				t.Fatalf("undocumented answer %d %s", e.Status, e.Code)
			}
			return
		}
		if len(raw) > 4096 {
			t.Fatalf("accepted %d bytes over a 4096-byte cap", len(raw))
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			t.Fatalf("accepted a body that is not an object: %q", raw)
		}
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			k := tok.(string)
			if !allowed[k] || seen[k] {
				t.Fatalf("accepted member %q (unknown, mis-cased or repeated): %q", k, raw)
			}
			seen[k] = true
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := dec.Token(); err != nil {
			t.Fatal(err)
		}
		if _, err := dec.Token(); err == nil {
			t.Fatalf("accepted trailing data: %q", raw)
		}
	})
}
