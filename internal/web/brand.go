package web

import (
	"net/http"

	"github.com/connectd/connectd/web/templates"
)

// Branded puts the operator's Brand on every request's context, so every
// page (connect, account, error pages) shows its name, logo and accent, and
// names the logo's origin in the CSP's img-src (nothing else is widened).
// It runs after SecurityHeaders, whose CSP it extends.
func Branded(b templates.Brand) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if b == (templates.Brand{}) {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if kind, _ := RouteOf(r); kind == KindAPI {
				// A JSON answer shows no brand: the token lookup's hot path
				// pays nothing for it (no context copy).
				next.ServeHTTP(w, r)
				return
			}
			if b.LogoURL != "" {
				AllowImages(w.Header(), b.LogoURL)
			}
			next.ServeHTTP(w, r.WithContext(templates.WithBrand(r.Context(), b)))
		})
	}
}

// BrandCSS serves the accent colour's stylesheet (templates.BrandCSSPath):
// generated from configuration, so the pages' CSP keeps style-src 'self'
// with no inline style. Empty when no accent is set.
func BrandCSS(b templates.Brand) http.Handler {
	css := templates.BrandCSS(b.Accent)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_, _ = w.Write(css)
	})
}
