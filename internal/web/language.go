package web

import (
	"net/http"
	"strings"

	"github.com/connectd/connectd/web/templates"
)

// LanguageCookie keeps the language a user chose from a page's footer
// (LanguageChoice): a language tag the pages speak, nothing else. It is no
// secret and names no one; it outlives sign-out, as a browser's language
// does.
const LanguageCookie = "connectd_lang"

// Localized puts the language every page speaks on the request's context
// (templates.WithLanguage): the user's choice (LanguageCookie) when there
// is one, else the browser's Accept-Language, else English; and the page's
// own address, where the footer's language links bring the browser back.
// The answer says which (Content-Language) and that it depends on both
// (Vary). A JSON answer pays nothing for it (no context copy).
func Localized(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if kind, _ := RouteOf(r); kind == KindAPI || kind == KindAsset || adminPath(r.URL.Path) {
			// The admin console is in English only: it offers no other.
			next.ServeHTTP(w, r)
			return
		}
		var chosen string
		if c, err := r.Cookie(LanguageCookie); err == nil {
			chosen = c.Value
		}
		ctx := templates.WithLanguage(r.Context(), here(r), chosen, r.Header.Get("Accept-Language"))
		h := w.Header()
		h.Set("Content-Language", templates.LanguageOf(ctx).String())
		h.Add("Vary", "Accept-Language, Cookie")
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// adminPath reports whether p is the admin console's.
func adminPath(p string) bool { return p == "/admin" || strings.HasPrefix(p, "/admin/") }

// here is the address a language link returns to: the page's path, never
// its query (an OAuth callback's one-time code, or whatever else a link
// carried, is not echoed into the page); "" where a GET would not show the
// page again (a form's answer), which returns to the home page.
func here(r *http.Request) string {
	if r.Method != http.MethodGet {
		return ""
	}
	return r.URL.Path
}

// LanguageChoice is GET /language?set=TAG&return=PATH: it keeps TAG (a
// language the pages speak) in LanguageCookie and sends the browser back
// to PATH, a path on this site (anything else: the home page). A tag the
// pages do not speak is a 400 invalid_request and sets nothing.
func LanguageChoice() PageFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		tag, ok := templates.ParseLanguage(r.URL.Query().Get("set"))
		if !ok {
			return &Error{Status: http.StatusBadRequest, Code: "invalid_request",
				Description: "Choose one of the languages the pages offer."}
		}
		http.SetCookie(w, &http.Cookie{Name: LanguageCookie, Value: tag.String(), Path: "/", MaxAge: 365 * 24 * 3600,
			Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, LocalPath(r.URL.Query().Get("return")), http.StatusSeeOther)
		return nil
	}
}

// LocalPath is p when it may be a redirect's target on this site
// (SafeReturnTo), else "/".
func LocalPath(p string) string {
	if !SafeReturnTo(p) {
		return "/"
	}
	return p
}
