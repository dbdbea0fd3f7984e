package connect_test

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
)

// englishLeft lists the English words of the catalogs named (their files
// under web/templates/locales, "connect" for connect.en.json) that the page
// body still shows: each message's text between its placeholders and tags,
// where that is longer than 12 characters (shorter ones, "Account", may
// also be a provider's or a user's name). A page rendered in another
// language shows none.
func englishLeft(t *testing.T, body string, catalogs ...string) []string {
	t.Helper()
	text := pageText(body)
	split := regexp.MustCompile(`{{[^}]*}}|<[^>]*>`)
	var left []string
	for _, c := range catalogs {
		b, err := os.ReadFile("../../web/templates/locales/" + c + ".en.json")
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for id, v := range m {
			s, ok := v.(string)
			if !ok {
				continue
			}
			for _, part := range split.Split(s, -1) {
				part = strings.Join(strings.Fields(part), " ")
				if len(part) > 12 && strings.Contains(text, part) {
					left = append(left, id+": "+part)
				}
			}
		}
	}
	return left
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
		if left := englishLeft(t, r.body, "connect", "layout"); len(left) > 0 {
			t.Fatalf("%s still shows English: %q\n%s", what, left, pageText(r.body))
		}
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
	if len(englishLeft(t, page.body, "connect", "layout")) < 5 { // the check can fail
		t.Fatalf("the English page shows only %q of the catalog", englishLeft(t, page.body, "connect", "layout"))
	}
}
