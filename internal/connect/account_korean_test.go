package connect_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/connectd/connectd/web/templates"
)

// englishFragments are the pieces of the account pages' English messages
// (account.en.json) longer than 12 characters, placeholders and markup
// cut out: none of them may show on a page in another language.
func englishFragments(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../web/templates/locales/account.en.json")
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for id, v := range raw {
		var s string
		if json.Unmarshal(v, &s) == nil {
			texts = append(texts, s)
			continue
		}
		var forms map[string]string
		if err := json.Unmarshal(v, &forms); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		for _, f := range forms {
			texts = append(texts, f)
		}
	}
	cut := regexp.MustCompile(`{{[^}]*}}|<[^>]*>`)
	var out []string
	for _, s := range texts {
		for _, f := range cut.Split(s, -1) {
			if f = strings.TrimSpace(f); utf8.RuneCountInString(f) > 12 {
				out = append(out, f)
			}
		}
	}
	if len(out) < 40 {
		t.Fatalf("only %d English fragments", len(out))
	}
	return out
}

// noEnglish fails when page (its text or its attributes, aria-labels
// included) holds a fragment of the English catalog.
func noEnglish(t *testing.T, what string, page response, fragments []string) {
	t.Helper()
	text, body := pageText(page.body), html.UnescapeString(page.body)
	for _, f := range fragments {
		if strings.Contains(text, f) || strings.Contains(body, f) {
			t.Errorf("%s: English left on the Korean page: %q\n%s", what, f, text)
		}
	}
}

// TestAccountInKorean: with the language cookie set to Korean, /account
// (a connection, an application allowed and its receipts) and the
// disconnect confirmation speak Korean only: lang="ko", the Korean
// headings, none of the English messages' words.
func TestAccountInKorean(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	tokenOf(t, a, "alice")
	if resp, _ := a.proxied(http.MethodGet, "files", "alice", nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("proxied: %d", resp.StatusCode)
	}
	if err := e.server.Sweep(context.Background()); err != nil { // writes the receipts now
		t.Fatal(err)
	}
	fragments := englishFragments(t)

	alice := e.browser()
	alice.Cookies["connectd_lang"] = "ko"
	page := e.accountPage(alice, "alice")
	text := pageText(page.body)
	if !strings.Contains(page.body, `<html lang="ko">`) {
		t.Fatalf("not a Korean page:\n%s", page.body)
	}
	for _, want := range []string{"연결된 계정", "로그인 계정: alice", "이 계정을 사용할 수 있는 애플리케이션",
		"누가 무엇에 사용했는지", "alpha 이(가) connectd을(를) 통해 GET /files 을(를) 호출했습니다(응답 200)",
		"자격 증명이 connectd 밖으로 전달되었습니다", "접근 권한 제거", "이 Fake fake 계정 연결 해제…", "로그아웃", "연결일 20"} {
		if !strings.Contains(text, want) {
			t.Errorf("/account in Korean does not say %q:\n%s", want, text)
		}
	}
	noEnglish(t, "/account", page, fragments)

	// What an action did, in Korean too.
	done := alice.get(e.srv.URL + "/account?done=withdrawn")
	if !strings.Contains(pageText(done.body), "접근 권한을 제거했습니다.") {
		t.Errorf("the notice is not in Korean:\n%s", pageText(done.body))
	}
	noEnglish(t, "/account?done=withdrawn", done, fragments)

	confirm := alice.get(e.srv.URL + templates.DisconnectPath("fake", e.connID("alice")))
	if confirm.status != http.StatusOK || !strings.Contains(confirm.body, `<html lang="ko">`) {
		t.Fatalf("the disconnect confirmation: %d\n%s", confirm.status, confirm.body)
	}
	ctext := pageText(confirm.body)
	for _, want := range []string{"의 연결을 해제하시겠습니까?", "다음 애플리케이션의 접근 권한이 사라집니다", "alpha", "연결 해제", "취소"} {
		if !strings.Contains(ctext, want) {
			t.Errorf("the disconnect confirmation does not say %q:\n%s", want, ctext)
		}
	}
	noEnglish(t, "the disconnect confirmation", confirm, fragments)
}
