package web

import (
	"log/slog"
	"net/http"
	"strconv"

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

// The error page's title is its status's (the catalog's error.title.N,
// else the status text); its message is the answer's Description, which
// connectd writes in English — in another language, the catalog's words for
// its code (error.code.CODE) or, failing that, for its status
// (error.message.N).
func pageWords(r *http.Request, e *Error) (title, message string) {
	ctx := r.Context()
	title, ok := templates.Lookup(ctx, "error.title."+strconv.Itoa(e.Status))
	if !ok {
		title = http.StatusText(e.Status)
	}
	message = e.Description
	if templates.Translated(ctx) {
		if m, ok := templates.Lookup(ctx, "error.code."+e.Code); ok {
			message = m
		} else if m, ok := templates.Lookup(ctx, "error.message."+strconv.Itoa(e.Status)); ok {
			message = m
		}
	}
	return title, message
}

// WritePageError logs err and renders the error page for it.
func WritePageError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	e := asError(err)
	logError(r, logger, e, err)
	if e.Status == 499 {
		return
	}
	title, message := pageWords(r, e)
	for k, vs := range e.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	HTMLDocument(w.Header())
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(e.Status)
	var page templ.Component = templates.ErrorPage(templates.ErrorView{Status: e.Status, Title: title, Message: message,
		RequestID: RequestID(r.Context())})
	if e.Page != nil {
		page = e.Page
	}
	if err := page.Render(r.Context(), w); err != nil {
		logger.ErrorContext(r.Context(), "render error page", slog.Any("error", err))
	}
}
