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

// TestPagesSpeakTheUsersLanguage (issue 38): a page follows the browser's
// Accept-Language, and the user's choice (the footer's link, kept in a
// cookie) over it; the choice returns only to a path on this site, and a
// language the pages do not speak is a 400 that sets nothing.
func TestPagesSpeakTheUsersLanguage(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	mux := web.NewMux()
	mux.Handle(web.PageRoute("GET /language", web.ClassBrowser, logger, web.LanguageChoice()))
	mux.Handle(web.Route{Pattern: "/", Kind: web.KindPage, Class: web.ClassBrowser, Handler: web.Fallback(logger)})
	ph, err := web.Public(mux, web.PublicConfig{Logger: logger, TrustedOrigins: []string{"https://connect.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ph)
	t.Cleanup(srv.Close)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, header http.Header) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header = header
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	pages := []struct {
		name   string
		header http.Header
		lang   string
		want   string
	}{
		{"no preference", http.Header{}, "en", "Page not found"},
		{"Accept-Language", http.Header{"Accept-Language": {"ko-KR,ko;q=0.9,en;q=0.5"}}, "ko", "페이지를 찾을 수 없습니다"},
		{"a language not spoken", http.Header{"Accept-Language": {"fr-FR"}}, "en", "Page not found"},
		{"the choice over the browser's", http.Header{"Accept-Language": {"ko"}, "Cookie": {web.LanguageCookie + "=en"}}, "en", "Page not found"},
		{"the choice", http.Header{"Cookie": {web.LanguageCookie + "=ko"}}, "ko", "오류 404"},
		{"a forged choice", http.Header{"Cookie": {web.LanguageCookie + "=<x>"}, "Accept-Language": {"ko"}}, "ko", "페이지를 찾을 수 없습니다"},
	}
	for _, p := range pages {
		p.header.Set("Accept", "text/html")
		resp, body := get("/no/such/page?x=1", p.header)
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Language") != p.lang ||
			!strings.Contains(body, `<html lang="`+p.lang+`">`) || !strings.Contains(body, p.want) {
			t.Errorf("%s: %d %q: %s", p.name, resp.StatusCode, resp.Header.Get("Content-Language"), body)
		}
		if !strings.Contains(resp.Header.Get("Vary"), "Accept-Language") {
			t.Errorf("%s: Vary %q", p.name, resp.Header.Get("Vary"))
		}
		// The footer offers the other language, back to this page (its
		// path: nothing of its query is echoed).
		other := map[string]string{"en": "ko", "ko": "en"}[p.lang]
		if !strings.Contains(body, `href="/language?return=%2Fno%2Fsuch%2Fpage&amp;set=`+other+`"`) {
			t.Errorf("%s: no link to %s back here: %s", p.name, other, body)
		}
	}

	choices := []struct {
		query, location string
	}{
		{"set=ko&return=/c/el_1%3Faccount%3Dcn_2", "/c/el_1?account=cn_2"},
		{"set=en&return=/account", "/account"},
		{"set=ko", "/"},
		{"set=ko&return=//evil.example/x", "/"},
		{"set=ko&return=https://evil.example/", "/"},
		{"set=ko&return=/%5Cevil.example", "/"},
		{"set=ko&return=javascript:alert(1)", "/"},
	}
	for _, c := range choices {
		resp, _ := get("/language?"+c.query, http.Header{})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != c.location {
			t.Errorf("%s: %d to %q, want 303 to %q", c.query, resp.StatusCode, resp.Header.Get("Location"), c.location)
		}
		var set *http.Cookie
		for _, ck := range resp.Cookies() {
			if ck.Name == web.LanguageCookie {
				set = ck
			}
		}
		lang := strings.TrimPrefix(strings.SplitN(c.query, "&", 2)[0], "set=")
		if set == nil || set.Value != lang || !set.Secure || !set.HttpOnly || set.SameSite != http.SameSiteLaxMode || set.Path != "/" {
			t.Errorf("%s: cookie %+v", c.query, set)
		}
	}
	for _, q := range []string{"set=fr", "set=", "set=ko-KR", "set=%3Cx%3E"} {
		resp, _ := get("/language?"+q+"&return=/account", http.Header{})
		if resp.StatusCode != http.StatusBadRequest || len(resp.Cookies()) != 0 {
			t.Errorf("%s: %d, cookies %v; want 400 and none", q, resp.StatusCode, resp.Cookies())
		}
	}
}
