package connect

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// TestTokenDocJSON: the token answer's own encoder writes exactly what
// encoding/json writes, and hands anything it would have to escape to
// encoding/json.
func TestTokenDocJSON(t *testing.T) {
	t.Parallel()
	exp := time.Date(2026, 11, 30, 3, 4, 5, 123456789, time.UTC)
	expZone := time.Date(2026, 11, 30, 3, 4, 5, 0, time.FixedZone("x", 3600))
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		doc  tokenDoc
		fast bool
	}{
		{"oauth", tokenDoc{Provider: "github", Kind: "oauth2", TokenType: "Bearer", AccessToken: "gho_abc.DEF-123~_/+=",
			ExpiresAt: &exp, Scopes: []string{"repo", "read:user"}}, true},
		{"no expiry, no scopes", tokenDoc{Provider: "p.x", Kind: "api_key", TokenType: "Bearer", AccessToken: "k",
			Scopes: []string{}}, true},
		{"nil scopes", tokenDoc{Provider: "p", Kind: "oauth2", TokenType: "Bearer", AccessToken: "t"}, true},
		{"expiry in a zone", tokenDoc{Provider: "p", Kind: "oauth2", TokenType: "Bearer", AccessToken: "t",
			ExpiresAt: &expZone, Scopes: []string{"a"}}, true},
		{"empty strings", tokenDoc{Scopes: []string{""}}, true},
		{"quote", tokenDoc{Provider: "p", AccessToken: `a"b`}, false},
		{"backslash", tokenDoc{Provider: "p", AccessToken: `a\b`}, false},
		{"html", tokenDoc{Provider: "p", AccessToken: "a<b>&c"}, false},
		{"control", tokenDoc{Provider: "p", AccessToken: "a\nb\x00"}, false},
		{"non-ASCII", tokenDoc{Provider: "p", AccessToken: "t", Scopes: []string{"é", "\u2028"}}, false},
		{"invalid UTF-8", tokenDoc{Provider: "p", TokenType: "\xff"}, false},
		{"year 10000", tokenDoc{Provider: "p", AccessToken: "t", ExpiresAt: &far}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, wantErr := json.Marshal(tt.doc)
			got, ok := tt.doc.AppendJSON(nil)
			if ok != tt.fast {
				t.Fatalf("fast path %v, want %v", ok, tt.fast)
			}
			if ok && (wantErr != nil || !bytes.Equal(got, want)) {
				t.Fatalf("AppendJSON\n got %s\nwant %s (%v)", got, want, wantErr)
			}
		})
	}
}

func BenchmarkTokenDocJSON(b *testing.B) {
	exp := time.Now()
	d := tokenDoc{Provider: "github", Kind: "oauth2", TokenType: "Bearer", AccessToken: "gho_0123456789abcdefghijklmnopqrstuvwxyz",
		ExpiresAt: &exp, Scopes: []string{"repo", "read:user"}}
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 512)
		for b.Loop() {
			buf, _ = d.AppendJSON(buf[:0])
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			_ = json.NewEncoder(&buf).Encode(&d)
		}
	})
}
