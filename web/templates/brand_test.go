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
		{"#0f7b6c", []string{"--accent: #0f7b6c", "--accent-dark: #0c6256", "--on-accent: #ffffff", "--link: #0f7b6c",
			"@media (prefers-color-scheme: dark) { :root { --link: #8ab4f8; } }"}}, // too dark on the dark card
		{"#ffd400", []string{"--accent: #ffd400", "--on-accent: #111827", "--link: #0842a0", "dark) { :root { --link: #ffd400; } }"}}, // light: dark text, default links; reads on the dark card
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

// TestOrgBrand: a page under an organization's brand names the organization
// in its header and links the organization's own stylesheet; the account
// page groups connections under their organization's name.
func TestOrgBrand(t *testing.T) {
	t.Parallel()
	ctx := WithBrand(t.Context(), Brand{Accent: "#0f7b6c", Org: "Acme <Labs>", CSSPath: OrgBrandCSSPath("acme")})
	var b strings.Builder
	if err := Outcome(OutcomeView{Title: "Connected", Message: "ok", Kind: "success"}).Render(ctx, &b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{`for <strong>Acme &lt;Labs&gt;</strong>`, `href="/static/brand/acme.css"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, `href="`+BrandCSSPath+`"`) {
		t.Error("the deployment's stylesheet is linked under an organization's brand")
	}

	b.Reset()
	v := AccountView{Connections: []AccountConnection{
		{ID: "c1", Org: "Acme", ProviderName: "GitHub"},
		{ID: "c2", Org: "Acme", ProviderName: "Slack"},
		{ID: "c3", Org: "Globex", ProviderName: "GitHub"},
	}}
	if err := AccountPage(v).Render(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	page = b.String()
	if n := strings.Count(page, "Connections for Acme"); n != 1 {
		t.Errorf("Acme heading %d times, want 1", n)
	}
	if a, g := strings.Index(page, "Connections for Acme"), strings.Index(page, "Connections for Globex"); a < 0 || g < a || strings.Index(page, `id="conn-c3"`) < g {
		t.Error("connections are not grouped under their organization")
	}
}
