package web

import (
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"unicode"
	"unicode/utf8"
)

// IsText reports whether s is valid UTF-8 without control characters (C0,
// DEL, C1; NUL among them). Printable Unicode, a right-to-left override
// included, is text: what it may mean is a handler's business.
func IsText(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || unicode.IsControl(r) {
			return false
		}
		i += n
	}
	return true
}

// errNotText is the answer TextOnly gives.
var errNotText = &Error{Status: http.StatusBadRequest, Code: "invalid_request",
	Description: "the request path or query is not valid UTF-8 text"}

// TextOnly refuses, with 400 invalid_request (the JSON envelope, or the
// error page for a browser on a page route), a request whose decoded path
// or any decoded query key or value is not text (IsText). Postgres refuses
// NUL and invalid UTF-8 in a text parameter with an error (SQLSTATE 22021),
// which a handler would answer with a 500; no id, name or filter connectd
// stores can hold them, so nothing legitimate is refused. Every path
// wildcard (ServeMux unescapes the segments of the escaped path) is a
// substring of the decoded path, so checking the path checks each segment.
// A query pair that does not decode is dropped by url.ParseQuery, as
// handlers reading r.URL.Query() never see it either.
//
// Neither the path nor the query goes into the log line: the query may hold
// OAuth codes and states.
func TextOnly(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if part := notText(r.URL); part != "" {
				e := *errNotText
				e.Err = errors.New("the " + part + " is not UTF-8 text without control characters")
				WriteError(w, r, logger, &e)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// notText names the part of u that is not text ("path", "query"), or "".
func notText(u *url.URL) string {
	if !IsText(u.Path) {
		return "path"
	}
	if u.RawQuery == "" {
		return ""
	}
	q, _ := url.ParseQuery(u.RawQuery)
	for k, vs := range q {
		if !IsText(k) {
			return "query"
		}
		for _, v := range vs {
			if !IsText(v) {
				return "query"
			}
		}
	}
	return ""
}
