package templates

import (
	"context"
	"fmt"
	"math"
	"strconv"
)

// Brand is what the operator calls the service and how it looks on every
// end-user page: a product name, a logo and an accent colour. The zero
// Brand is connectd's own look.
type Brand struct {
	Name    string // "" for "connectd"
	LogoURL string // an https image (egress.CheckLogoURL), shown as <img>; "" for the built-in mark
	// Accent is #rrggbb, served by BrandCSS at BrandCSSPath (the CSP keeps
	// style-src 'self', so no inline style); "" keeps the stylesheet's.
	Accent string
	// Org names the organization a page is for (the MCP server's, on the
	// pages of its connect link): the header says whose connection this is.
	// "" on pages that belong to no organization, and for a deployment
	// with only its default one.
	Org string
	// CSSPath is where Accent's stylesheet is served when it is not
	// BrandCSSPath (an organization's own: OrgBrandCSSPath).
	CSSPath string
}

// OrgBrandCSSPath is where an organization's accent stylesheet is served.
func OrgBrandCSSPath(org string) string { return "/static/brand/" + org + ".css" }

// cssPath is the stylesheet of b's accent.
func (b Brand) cssPath() string {
	if b.CSSPath != "" {
		return b.CSSPath
	}
	return BrandCSSPath
}

// BrandCSSPath is where the accent colour's stylesheet is served.
const BrandCSSPath = "/static/brand.css"

// brandKey carries the Brand in a request's context to the layout.
type brandKey struct{}

// WithBrand returns ctx carrying b, which every page rendered under it shows.
func WithBrand(ctx context.Context, b Brand) context.Context {
	return context.WithValue(ctx, brandKey{}, b)
}

// BrandOf is the Brand in ctx (WithBrand), or the zero Brand.
func BrandOf(ctx context.Context) Brand { return brandOf(ctx) }

// brandOf is the Brand in ctx, or the zero Brand.
func brandOf(ctx context.Context) Brand {
	b, _ := ctx.Value(brandKey{}).(Brand)
	return b
}

// productName is the name pages call the service.
func productName(ctx context.Context) string {
	if b := brandOf(ctx); b.Name != "" {
		return b.Name
	}
	return "connectd"
}

// ValidAccent reports whether s is a colour BrandCSS can serve: #rrggbb.
func ValidAccent(s string) bool {
	if len(s) != 7 || s[0] != '#' {
		return false
	}
	_, err := strconv.ParseUint(s[1:], 16, 32)
	return err == nil
}

// BrandCSS is the stylesheet of an accent colour (ValidAccent): the accent,
// a darker shade for hover, and a text colour that stays readable on it
// (white or near-black, whichever contrasts more).
func BrandCSS(accent string) []byte {
	if !ValidAccent(accent) {
		return nil
	}
	v, _ := strconv.ParseUint(accent[1:], 16, 32)
	r, g, b := float64(v>>16&0xff), float64(v>>8&0xff), float64(v&0xff)
	dark := fmt.Sprintf("#%02x%02x%02x", int(r*0.8), int(g*0.8), int(b*0.8))
	on := "#ffffff"
	if contrast(luminance(r, g, b), 1) < contrast(luminance(r, g, b), luminance(17, 24, 39)) {
		on = "#111827"
	}
	// As link colour on white the accent must be readable too; a light
	// accent keeps the default link colour's darker shade.
	link := accent
	if contrast(luminance(r, g, b), 1) < 4.5 {
		link = "#0842a0"
	}
	// In dark mode links sit on the dark card (style.css's --card, #18202b):
	// the accent where it reads there, else the default light blue.
	darkLink := accent
	if contrast(luminance(r, g, b), luminance(0x18, 0x20, 0x2b)) < 4.5 {
		darkLink = "#8ab4f8"
	}
	return fmt.Appendf(nil, ":root { --accent: %s; --accent-dark: %s; --on-accent: %s; --link: %s; }\n"+
		"@media (prefers-color-scheme: dark) { :root { --link: %s; } }\n", accent, dark, on, link, darkLink)
}

func luminance(r, g, b float64) float64 {
	lin := func(c float64) float64 {
		c /= 255
		if c <= 0.03928 {
			return c / 12.92
		}
		return math.Pow((c+0.055)/1.055, 2.4)
	}
	return 0.2126*lin(r) + 0.7152*lin(g) + 0.0722*lin(b)
}

func contrast(a, b float64) float64 {
	if a < b {
		a, b = b, a
	}
	return (a + 0.05) / (b + 0.05)
}
