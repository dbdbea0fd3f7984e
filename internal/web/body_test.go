package web_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/web"
)

// TestRouteBodyCaps: the route table sets how much of a body a handler may
// read (issue 23 §5): a page route's default, an API route's default, and a
// route's own MaxBody; assets read none.
func TestRouteBodyCaps(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.DiscardHandler)
	read := func(w http.ResponseWriter, r *http.Request) error {
		if _, err := io.ReadAll(r.Body); err != nil {
			return web.Errorf(http.StatusRequestEntityTooLarge, "request_too_large", "too large")
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	m := web.NewMux()
	m.Handle(web.PageRoute("POST /page", web.ClassBrowser, logger, read))
	m.Handle(web.APIRoute("POST /api", web.ClassAPI, logger, read))
	small := web.PageRoute("POST /small", web.ClassBrowser, logger, read)
	small.MaxBody = 100
	m.Handle(small)
	for _, tc := range []struct {
		path string
		n    int
		want int
	}{
		{"/page", web.MaxFormBody, http.StatusNoContent},
		{"/page", web.MaxFormBody + 1, http.StatusRequestEntityTooLarge},
		{"/api", web.MaxJSONBody, http.StatusNoContent},
		{"/api", web.MaxJSONBody + 1, http.StatusRequestEntityTooLarge},
		{"/small", 100, http.StatusNoContent},
		{"/small", 101, http.StatusRequestEntityTooLarge},
	} {
		w := httptest.NewRecorder()
		m.ServeHTTP(w, httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(strings.Repeat("a", tc.n))))
		if w.Code != tc.want {
			t.Errorf("%s with %d bytes: %d, want %d", tc.path, tc.n, w.Code, tc.want)
		}
	}
}
