package templates

import (
	"strings"
	"testing"
)

func TestBrandCSS(t *testing.T) {
	t.Parallel()
	tests := []struct {
		accent string
		want   []string // in the stylesheet; none: no stylesheet
	}{
		{"#0f7b6c", []string{"--accent: #0f7b6c", "--accent-dark: #0c6256", "--on-accent: #ffffff", "--link: #0f7b6c"}},
		{"#ffd400", []string{"--accent: #ffd400", "--on-accent: #111827", "--link: #0842a0"}}, // light: dark text, default links
		{"#000000", []string{"--accent-dark: #000000", "--on-accent: #ffffff"}},
		{"", nil},
		{"#abc", nil},
		{"red", nil},
		{"#00000g", nil},
		{"#000000;}body{display:none", nil},
		{"#+12345", nil},
	}
	for _, tt := range tests {
		css := string(BrandCSS(tt.accent))
		if ValidAccent(tt.accent) != (tt.want != nil) {
			t.Errorf("ValidAccent(%q) = %v", tt.accent, ValidAccent(tt.accent))
		}
		if tt.want == nil && css != "" {
			t.Errorf("%q: a stylesheet for an invalid colour: %q", tt.accent, css)
		}
		for _, w := range tt.want {
			if !strings.Contains(css, w) {
				t.Errorf("%q: %q lacks %q", tt.accent, css, w)
			}
		}
	}
}
