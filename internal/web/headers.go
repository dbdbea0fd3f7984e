package web

import "net/http"

// ContentSecurityPolicy is sent with every response: same-origin assets only, no
// inline script, never framed.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"

// SecurityHeaders sets the headers every connectd response carries. hsts adds
// Strict-Transport-Security (off in dev mode, where http:// is allowed).
func SecurityHeaders(hsts bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h.Set("Content-Security-Policy", ContentSecurityPolicy)
			h.Set("X-Frame-Options", "DENY")
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Referrer-Policy", "no-referrer")
			if hsts {
				h.Set("Strict-Transport-Security", "max-age=63072000; includeSubDomains")
			}
			next.ServeHTTP(w, r)
		})
	}
}

// NotFound answers any unrouted path with the 404 error envelope or page.
func NotFound(w http.ResponseWriter, r *http.Request) error {
	return Errorf(http.StatusNotFound, "not_found", "no such resource")
}
