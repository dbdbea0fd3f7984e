package connect_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestHomePage (issue 27): / says what the service is and leads to the
// account page, as a page (security headers, no cookies set); any other
// unknown path is still the not-found page.
func TestHomePage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	br := e.browser()
	r := br.get(e.srv.URL + "/")
	if r.status != http.StatusOK || !strings.Contains(r.body, `href="/account"`) ||
		!strings.Contains(r.body, "Secure account connections") || r.header.Get("Content-Security-Policy") == "" ||
		len(r.setCookies) != 0 {
		t.Fatalf("/: %d %v %s", r.status, r.header, r.body)
	}
	if r := br.get(e.srv.URL + "/nothing-here"); r.status != http.StatusNotFound {
		t.Fatalf("/nothing-here: %d", r.status)
	}
}
