package connect

import (
	"context"
	"strings"
	"testing"
)

// TestShowBody: how the approval page shows a body — JSON in its own order,
// indented, long strings folded with the whole one click away; other text
// as it is; anything else by size and type; never HTML-escaped into
// \u003c (the page escapes what it shows).
func TestShowBody(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 400)
	for _, tt := range []struct {
		name, body, ctype    string
		shown, full, note    string
		shownHas, shownLacks string
	}{
		{name: "order kept", body: `{"z":1,"a":[true,null,{}],"m":[]}`,
			shown: "{\n  \"z\": 1,\n  \"a\": [\n    true,\n    null,\n    {}\n  ],\n  \"m\": []\n}"},
		{name: "markup as text", body: `{"t":"<b>&</b>"}`, shown: "{\n  \"t\": \"<b>&</b>\"\n}"},
		{name: "numbers as sent", body: `[1.50, 1e3, 12345678901234567890]`, shown: "[\n  1.50,\n  1e3,\n  12345678901234567890\n]"},
		{name: "folded", body: `{"b":"` + long + `"}`, shownHas: "(200 more characters)", shownLacks: long,
			full: "{\n  \"b\": \"" + long + "\"\n}"},
		{name: "two JSON values are text", body: `{} {}`, shown: `{} {}`},
		{name: "text", body: "hello\nworld", shown: "hello\nworld"},
		{name: "binary", body: "\x00\x01\x02", ctype: "application/octet-stream",
			note: "A body of 3 bytes that is not text (application/octet-stream)."},
	} {
		shown, full, note := showBody(context.Background(), []byte(tt.body), tt.ctype)
		switch {
		case tt.shown != "" && shown != tt.shown:
			t.Errorf("%s: shown %q, want %q", tt.name, shown, tt.shown)
		case tt.shownHas != "" && (!strings.Contains(shown, tt.shownHas) || strings.Contains(shown, tt.shownLacks)):
			t.Errorf("%s: shown %q", tt.name, shown)
		case full != tt.full:
			t.Errorf("%s: full %q, want %q", tt.name, full, tt.full)
		case note != tt.note:
			t.Errorf("%s: note %q, want %q", tt.name, note, tt.note)
		}
	}
}
