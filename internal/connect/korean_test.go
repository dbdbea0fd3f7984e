package connect_test

import (
	"encoding/json"
	"html"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// englishWords are the pieces of the English messages of catalogs (their
// files under web/templates/locales, "connect" for connect.en.json, plural
// forms included) that a page in another language must not show: each
// message's text between its placeholders and markup, where that is
// longer than 12 characters (shorter ones, "Account", may also be a
// provider's or a user's name).
func englishWords(t *testing.T, catalogs ...string) []string {
	t.Helper()
	split := regexp.MustCompile(`{{[^}]*}}|<[^>]*>`)
	var out []string
	for _, c := range catalogs {
		b, err := os.ReadFile("../../web/templates/locales/" + c + ".en.json")
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for id, v := range m {
			var texts []string
			var one string
			if json.Unmarshal(v, &one) == nil {
				texts = []string{one}
			} else {
				var forms map[string]string
				if err := json.Unmarshal(v, &forms); err != nil {
					t.Fatalf("%s: %s: %v", c, id, err)
				}
				for _, f := range forms {
					texts = append(texts, f)
				}
			}
			for _, text := range texts {
				for _, part := range split.Split(text, -1) {
					if part = strings.Join(strings.Fields(part), " "); utf8.RuneCountInString(part) > 12 {
						out = append(out, part)
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no English words read")
	}
	return out
}

// englishShown lists the words of english (englishWords) that the page
// body shows, in its text or its attributes (aria-labels included).
func englishShown(body string, english []string) []string {
	text, raw := pageText(body), html.UnescapeString(body)
	var left []string
	for _, w := range english {
		if strings.Contains(text, w) || strings.Contains(raw, w) {
			left = append(left, w)
		}
	}
	return left
}

// noEnglish fails when page shows any of the words of english.
func noEnglish(t *testing.T, what string, page response, english []string) {
	t.Helper()
	if left := englishShown(page.body, english); len(left) > 0 {
		t.Errorf("%s: English left on the page: %q\n%s", what, left, pageText(page.body))
	}
}

// TestConnectFlowInKorean (issue 38): a user whose browser asks for Korean
// goes through the whole connect flow — sign-in, consent, the provider, the
// success page — in Korean: every page says lang="ko", its words come from
// the Korean catalog, and no English sentence of the connect pages or the
// layout is left; the language cookie picks it over Accept-Language, and
// English stays the default.
func TestConnectFlowInKorean(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	el := m.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"files.read"}})
	u := el["url"].(string)

	b := e.browser()
	b.Cookies["connectd_lang"] = "ko"
	consent := e.openAs(b, u, "alice")
	korean := func(what string, r response, want ...string) {
		t.Helper()
		if !strings.Contains(r.body, `<html lang="ko">`) || r.header.Get("Content-Language") != "ko" {
			t.Fatalf("%s: not in Korean: %d %s", what, r.status, r.body)
		}
		for _, w := range want {
			if !strings.Contains(pageText(r.body), w) {
				t.Fatalf("%s lacks %q: %s", what, w, pageText(r.body))
			}
		}
		noEnglish(t, what, r, englishWords(t, "connect", "layout"))
	}
	korean("consent", consent, "계정을 사용하려고 합니다", "로그인할 곳", "files.read", "허용", "거부", "안전한 계정 연결")
	redirect := e.allow(b, u, consent)
	done := b.get(e.authorize(redirect))
	korean("success", done, "연결되었습니다", "다음 단계")

	// Used again: the link's end, in Korean too.
	korean("the link again", b.get(u), "이미")

	// English is the default, and the other language is offered.
	en := e.browser()
	el = m.mint("bob", map[string]any{"provider": "fake", "scopes": []string{"files.read"}})
	page := e.openAs(en, el["url"].(string), "bob")
	if !strings.Contains(page.body, `<html lang="en">`) || !strings.Contains(page.body, "wants to use your") ||
		!strings.Contains(page.body, `hreflang="ko"`) {
		t.Fatalf("English consent page: %s", page.body)
	}
	if page.status != http.StatusOK {
		t.Fatal(page.status)
	}
	if shown := englishShown(page.body, englishWords(t, "connect", "layout")); len(shown) < 5 { // the check can fail
		t.Fatalf("the English page shows only %q of the catalog", shown)
	}
}
