package web

import (
	"bytes"
	"fmt"
	"net/http"

	"github.com/a-h/templ"
)

// Refuse returns the *Error that answers a request with status, a stable
// code and a public description; cause (may be nil) is logged, never shown.
func Refuse(status int, code, desc string, cause error) *Error {
	return &Error{Status: status, Code: code, Description: desc, Err: cause}
}

// Render writes the page c with status, never cached. It renders into a
// buffer first, so a rendering error still becomes a proper error page
// rather than half a page.
func Render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) error {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		return fmt.Errorf("render page: %w", err)
	}
	w.Header().Set("Cache-Control", "no-store")
	HTMLDocument(w.Header())
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}
