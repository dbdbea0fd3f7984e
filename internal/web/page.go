package web

import (
	"log/slog"
	"net/http"

	"github.com/a-h/templ"
	"github.com/connectd/connectd/web/templates"
)

// PageFunc is a browser handler: it renders a page and returns nil, or returns an
// error that Page renders as the error page.
type PageFunc func(w http.ResponseWriter, r *http.Request) error

// Page adapts a PageFunc to http.Handler.
func Page(logger *slog.Logger, h PageFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			WritePageError(w, r, logger, err)
		}
	})
}

// pageTitles gives each status a human title; Description carries the detail.
var pageTitles = map[int]string{
	http.StatusBadRequest:          "This request could not be processed",
	http.StatusUnauthorized:        "Please sign in",
	http.StatusForbidden:           "Not allowed",
	http.StatusNotFound:            "Page not found",
	http.StatusGone:                "This link has expired",
	http.StatusTooManyRequests:     "Too many requests",
	http.StatusInternalServerError: "Something went wrong",
	http.StatusServiceUnavailable:  "Temporarily unavailable",
}

// WritePageError logs err and renders the error page for it.
func WritePageError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	e := asError(err)
	logError(r, logger, e, err)
	if e.Status == 499 {
		return
	}
	title := pageTitles[e.Status]
	if title == "" {
		title = http.StatusText(e.Status)
	}
	for k, vs := range e.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	HTMLDocument(w.Header())
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(e.Status)
	var page templ.Component = templates.ErrorPage(templates.ErrorView{Status: e.Status, Title: title, Message: e.Description,
		RequestID: RequestID(r.Context())})
	if e.Page != nil {
		page = e.Page
	}
	if err := page.Render(r.Context(), w); err != nil {
		logger.ErrorContext(r.Context(), "render error page", slog.Any("error", err))
	}
}
