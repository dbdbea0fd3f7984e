package connect_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/web"
)

// inKorean checks that page r is a Korean page (html lang="ko") showing
// every want and none of the English words.
func inKorean(t *testing.T, name string, r response, english []string, want ...string) {
	t.Helper()
	if r.status != http.StatusOK || !strings.Contains(r.body, `<html lang="ko">`) {
		t.Fatalf("%s: %d, not a Korean page:\n%s", name, r.status, r.body)
	}
	text := pageText(r.body)
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s does not say %q:\n%s", name, w, text)
		}
	}
	noEnglish(t, name, r, english)
}

// TestApprovalPageInKorean: with the language choice ko (the footer's
// cookie), the approval page — a long JSON body folded, the standing
// choice — its outcome, the home page and the session pages speak Korean
// and nothing of their English catalogs; the operator's words and the
// client's name stay as they are. Accept-Language: ko is enough for the
// home page.
func TestApprovalPageInKorean(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.askingClient(a)
	english := englishWords(t, "approval", "session", "connect", "layout")
	body := `{"title":"a","body":"` + strings.Repeat("x", 400) + `"}`
	ap := a.asked(e.srv.URL, http.MethodPost, "echo/issues", "alice", body)
	link := ap["url"].(string)

	br := e.browser()
	br.Cookies[web.LanguageCookie] = "ko"
	page := e.openAs(br, link, "alice")
	inKorean(t, "the approval page", page, english, "승인 요청", "alpha 에서 다음 작업을 요청합니다: open issues in your repositories",
		"전송되는 내용", "이 요청 허용", "1시간 동안 같은 종류의 요청 허용", "거부", "(이하 200자 생략)", "에 만료됩니다.",
		"현재 alice 계정으로 로그인되어 있습니다.")
	// The outcome's own words (its frame, Outcome, is connect.templ's).
	inKorean(t, "the outcome", e.decideApproval(br, link, "alice", "standing"), englishWords(t, "approval", "connect", "layout"),
		"허용되었습니다", "이제 alpha에서 1시간 동안")

	inKorean(t, "the session page", br.get(e.srv.URL+"/session"), english, "로그인되어 있습니다", "로그아웃")
	home := br.get(e.srv.URL + "/")
	inKorean(t, "the home page", home, english, "안전한 계정 연결", "연결된 계정 보기")

	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/", nil)
	req.Header.Set("Accept-Language", "ko-KR,ko;q=0.9,en;q=0.5")
	resp, err := e.browser().Send(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	inKorean(t, "the home page (Accept-Language)", response{status: resp.StatusCode, body: string(raw)}, english, "안전한 계정 연결")

	session := br.get(e.srv.URL + "/session")
	out := br.do(http.MethodPost, e.srv.URL+"/logout", url.Values{"csrf_token": {csrfOf(t, session.body)}})
	inKorean(t, "the signed-out page", out, english, "로그아웃되었습니다", "이 창을 닫으셔도 됩니다.")
	inKorean(t, "the session page, signed out", br.get(e.srv.URL+"/session"), english, "로그인되어 있지 않습니다")
}
