package connect_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/connectd/connectd/web/templates"
)

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
	fragments := englishWords(t, "account", "layout")

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
