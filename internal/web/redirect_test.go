package web

import "testing"

// TestSafeReturnTo covers the accepted shapes; the refused ones are driven
// through /login in internal/connect.TestOpenRedirect.
func TestSafeReturnTo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want bool
	}{
		{"/", true},
		{"/session", true},
		{"/c/AbC123_-~", true},
		{"/c/abc?x=1&y=two", true},
		{"/a%3Ab", true},
		{"/a%20b", false}, // encoded whitespace
		{"/search?q=a%3Db", true},
		// Encoded slashes are refused even in the query: connectd never needs
		// them, and a proxy that decodes them could turn a path into "//host".
		{"/x?next=%2F%2Fevil.example", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := SafeReturnTo(tt.in); got != tt.want {
			t.Errorf("SafeReturnTo(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
