package web

import (
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// ContentSecurityPolicy is sent with every response: same-origin assets only,
// no inline script, never framed, forms submit only to this origin.
//
// form-action matters beyond the form's own target: Chromium applies it to
// every redirect that follows a form submission, so a consent form whose POST
// answers 303 to a provider's authorize endpoint needs that provider's origin
// too. Pages that do that add it per response with AllowFormAction; every
// other page keeps 'self' only.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; " +
	"frame-ancestors 'none'; form-action 'self'"

// StrictTransportSecurity is sent outside dev mode.
const StrictTransportSecurity = "max-age=63072000; includeSubDomains"

// SecurityHeaders sets the headers every connectd response carries. hsts adds
// Strict-Transport-Security (off in dev mode, where http:// is allowed).
// Cache-Control: no-store is the default for every response, since almost all
// of them carry per-user content, one-time URLs or tokens; a handler serving
// something shareable (Static) may override it. No Access-Control-* header is
// ever set: browser routes answer no cross-origin reads (no CORS).
//
// Routes registered as APIs (KindAPI: /v1/, /admin/api/) get the set OWASP
// lists for REST responses —
// CSP, X-Frame-Options, nosniff, no-store, HSTS — without Referrer-Policy and
// Cross-Origin-Opener-Policy, which only a rendered document uses (a JSON body
// served with nosniff loads nothing and opens no window).
func SecurityHeaders(hsts bool) func(http.Handler) http.Handler {
	page, api := pageHeaders, apiHeaders
	if hsts {
		page = append(slices.Clip(page), header{"Strict-Transport-Security", StrictTransportSecurity})
		api = append(slices.Clip(api), header{"Strict-Transport-Security", StrictTransportSecurity})
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			set := page
			if kind, _ := RouteOf(r); kind == KindAPI {
				set = api
			}
			h := w.Header()
			for _, kv := range set {
				h.Set(kv.key, kv.value)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// HTMLDocument marks a response as an HTML page: Content-Type, and the two
// headers only a rendered document uses (Referrer-Policy, COOP). Every writer
// of a page calls it, so a page carries them whatever route it is served on.
func HTMLDocument(h http.Header) {
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// header is one security header.
type header struct{ key, value string }

var (
	pageHeaders = []header{
		{"Content-Security-Policy", ContentSecurityPolicy},
		{"X-Frame-Options", "DENY"},
		{"X-Content-Type-Options", "nosniff"},
		{"Referrer-Policy", "no-referrer"},
		{"Cross-Origin-Opener-Policy", "same-origin"},
		{"Cache-Control", "no-store"},
	}
	apiHeaders = []header{
		{"Content-Security-Policy", ContentSecurityPolicy},
		{"X-Frame-Options", "DENY"},
		{"X-Content-Type-Options", "nosniff"},
		{"Cache-Control", "no-store"},
	}
)

// AllowFormAction widens the form-action directive of this response's CSP by
// the origins of the given URLs (scheme://host[:port]): the page's form may
// then be answered by a redirect to them. Anything that is not a plain
// http(s) origin is ignored, so a URL can never inject another directive; the
// browser then blocks the redirect, which fails closed.
func AllowFormAction(h http.Header, urls ...string) { extendCSP(h, "form-action", urls) }

// AllowImages widens the img-src directive of this response's CSP by the
// origins of the given URLs: the page shows the operator's logos (the
// product's, an MCP server's, a provider's) from there. Relative URLs
// (same-origin assets) and anything that is not a plain http(s) origin add
// nothing; the policy stays 'self' plus exactly those origins.
func AllowImages(h http.Header, urls ...string) { extendCSP(h, "img-src", urls) }

// extendCSP adds the origins of urls to directive in h's CSP (the base
// policy when h has none yet), creating the directive from 'self' when
// the policy lacks it, so that default-src 'self' keeps applying.
func extendCSP(h http.Header, directive string, urls []string) {
	var extra []string
	for _, raw := range urls {
		if o := origin(raw); o != "" && !slices.Contains(extra, o) {
			extra = append(extra, o)
		}
	}
	if len(extra) == 0 {
		return
	}
	policy := h.Get("Content-Security-Policy")
	if policy == "" {
		policy = ContentSecurityPolicy
	}
	parts := strings.Split(policy, "; ")
	found := false
	for i, p := range parts {
		name, _, _ := strings.Cut(p, " ")
		if name != directive {
			continue
		}
		found = true
		have := strings.Fields(p)
		for _, o := range extra {
			if !slices.Contains(have, o) {
				parts[i] += " " + o
			}
		}
	}
	if !found {
		parts = append(parts, directive+" 'self' "+strings.Join(extra, " "))
	}
	h.Set("Content-Security-Policy", strings.Join(parts, "; "))
}

// origin returns scheme://host of an absolute http(s) URL, or "" when raw is
// not one or its host has characters a CSP source expression cannot hold.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return ""
	}
	for _, c := range u.Host {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '-', c == ':', c == '[', c == ']':
		default:
			return ""
		}
	}
	return u.Scheme + "://" + strings.ToLower(u.Host)
}

// Static serves the files of fsys (the stylesheet and other assets), never a
// directory listing. They carry no state, so unlike every other response they
// may be cached for a while. A name no file can have (not fs.ValidPath, not
// text) is a 404 like any missing file: http.FileServerFS would answer 500.
func Static(fsys fs.FS) http.Handler {
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Path
		if name == "" || strings.HasSuffix(name, "/") || !IsText(name) || !fs.ValidPath(strings.TrimPrefix(name, "/")) {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
}

// Fallback answers whatever no route matched with a 404: the error page for a
// browser asking for HTML (in words a user reads, with the way back), the
// JSON envelope for everyone else (and always under /v1/).
func Fallback(logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if WantsPage(r) {
			WriteError(w, r, logger, Refuse(http.StatusNotFound, "not_found",
				"There is no page at this address. Check the link, or open it again from your application.", nil))
			return
		}
		WriteError(w, r, logger, Errorf(http.StatusNotFound, "not_found", "no such resource"))
	})
}
