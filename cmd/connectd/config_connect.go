package main

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/receipt"
	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/web/templates"
)

// maxBrandName bounds CONNECTD_BRAND_NAME: a product name in a header.
const maxBrandName = 60

// loadConnect reads the connect-flow variables (see docs/configuration.md).
func (c *Config) loadConnect(e *env) {
	c.Connect = server.ConnectConfig{
		ElicitationTTL:  e.duration("CONNECTD_ELICITATION_TTL", 15*time.Minute, time.Minute, 24*time.Hour),
		RequestStateTTL: e.duration("CONNECTD_REQUEST_STATE_TTL", time.Hour, time.Minute, 7*24*time.Hour),
		Brand:           loadBrand(e),
		ReceiptsRetention: e.days("CONNECTD_RECEIPTS_RETENTION", receipt.DefaultRetention, receipt.MinRetention,
			receipt.MaxRetention),
	}
	if c.Connect.RequestStateTTL < c.Connect.ElicitationTTL {
		e.fail("CONNECTD_REQUEST_STATE_TTL", "must not be shorter than CONNECTD_ELICITATION_TTL")
	}
}

// loadBrand reads what the pages call the service and how they look:
// CONNECTD_BRAND_NAME (text, at most 60 characters), CONNECTD_BRAND_LOGO_URL
// (an https image; the pages' CSP img-src names its origin) and
// CONNECTD_BRAND_ACCENT (#rrggbb).
func loadBrand(e *env) templates.Brand {
	b := templates.Brand{Name: e.str("CONNECTD_BRAND_NAME", ""), LogoURL: e.str("CONNECTD_BRAND_LOGO_URL", ""),
		Accent: strings.ToLower(e.str("CONNECTD_BRAND_ACCENT", ""))}
	if n := utf8.RuneCountInString(b.Name); n > maxBrandName || !utf8.ValidString(b.Name) ||
		strings.ContainsFunc(b.Name, unicode.IsControl) {
		e.fail("CONNECTD_BRAND_NAME", "must be one line of text of at most %d characters", maxBrandName)
		b.Name = ""
	}
	if b.LogoURL != "" {
		if err := egress.CheckLogoURL(b.LogoURL); err != nil {
			e.fail("CONNECTD_BRAND_LOGO_URL", "%s", err)
			b.LogoURL = ""
		}
	}
	if b.Accent != "" && !templates.ValidAccent(b.Accent) {
		e.fail("CONNECTD_BRAND_ACCENT", "must be a colour as #rrggbb, e.g. #0b57d0")
		b.Accent = ""
	}
	return b
}
