package providertest_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/provider/providertest"
)

const redirect = "https://app.example/cb"

// post sends a form with client_secret_basic and decodes the JSON answer.
func post(t *testing.T, srv *providertest.Server, endpoint string, form url.Values) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(srv.ClientID, srv.ClientSecret)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m := map[string]any{}
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func authorizeCode(t *testing.T, srv *providertest.Server, challenge string) string {
	t.Helper()
	q := url.Values{"response_type": {"code"}, "client_id": {srv.ClientID}, "redirect_uri": {redirect},
		"state": {"xyz"}, "scope": {"files.read"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	back, err := srv.Approve(srv.AuthorizeURL() + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if back.Query().Get("state") != "xyz" || !strings.HasPrefix(back.String(), redirect+"?") {
		t.Fatalf("redirect %s", back)
	}
	return back.Query().Get("code")
}

// TestSpeaksOAuth drives the fake with plain HTTP, the way any client would.
func TestSpeaksOAuth(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Options{RequirePKCE: true, RotateRefreshTokens: true,
		RedirectURIs: []string{redirect}, APIScope: "files.read"})
	verifier := strings.Repeat("v", 50)
	sum := sha256.Sum256([]byte(verifier))
	challenge := base64.RawURLEncoding.EncodeToString(sum[:])

	// Wrong verifier, then the code is gone even with the right one.
	code := authorizeCode(t, srv, challenge)
	exchange := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect},
		"code_verifier": {strings.Repeat("w", 50)}}
	if st, m := post(t, srv, srv.TokenURL(), exchange); st != 400 || m["error"] != "invalid_grant" {
		t.Fatalf("wrong verifier: %d %v", st, m)
	}
	exchange.Set("code_verifier", verifier)
	if st, _ := post(t, srv, srv.TokenURL(), exchange); st != 400 {
		t.Fatal("a code survived a failed exchange")
	}

	code = authorizeCode(t, srv, challenge)
	exchange.Set("code", code)
	st, tok := post(t, srv, srv.TokenURL(), exchange)
	if st != 200 || tok["access_token"] == nil || tok["refresh_token"] == nil || tok["expires_in"] == nil || tok["scope"] != "files.read" {
		t.Fatalf("exchange: %d %v", st, tok)
	}
	api := func(at string) int {
		req, _ := http.NewRequest(http.MethodGet, srv.APIURL(), nil)
		req.Header.Set("Authorization", "Bearer "+at)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if api(tok["access_token"].(string)) != 200 || api("at_forged") != 401 {
		t.Fatal("API")
	}

	rt := tok["refresh_token"].(string)
	st, ref := post(t, srv, srv.TokenURL(), url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}})
	if st != 200 || ref["refresh_token"] == rt {
		t.Fatalf("refresh: %d %v", st, ref)
	}
	// Reuse of the rotated-away token: refused, and the grant is revoked.
	if st, m := post(t, srv, srv.TokenURL(), url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}); st != 400 || m["error"] != "invalid_grant" {
		t.Fatalf("reuse: %d %v", st, m)
	}
	if api(ref["access_token"].(string)) != 401 {
		t.Fatal("reuse detection did not revoke the grant")
	}
	c := srv.Counts()
	if c.Authorize != 2 || c.Exchange != 3 || c.Refresh != 2 || c.API != 3 {
		t.Fatalf("counts %+v", c)
	}

	// Unregistered redirect URI and missing PKCE.
	back, err := srv.Approve(srv.AuthorizeURL() + "?" + url.Values{"response_type": {"code"}, "client_id": {srv.ClientID},
		"redirect_uri": {redirect}, "state": {"s"}}.Encode())
	if err != nil || back.Query().Get("error") != "invalid_request" {
		t.Fatalf("no PKCE: %v %v", back, err)
	}
	if _, err := srv.Approve(srv.AuthorizeURL() + "?" + url.Values{"response_type": {"code"}, "client_id": {srv.ClientID},
		"redirect_uri": {"https://evil.example/cb"}}.Encode()); err == nil {
		t.Fatal("unregistered redirect URI was redirected to")
	}
}

func TestRevocationRecordsClientAuth(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Options{})
	tok := srv.Grant([]string{"a"}, 0)
	if st, _ := post(t, srv, srv.RevocationURL(), url.Values{"token": {tok.RefreshToken}, "token_type_hint": {"refresh_token"}}); st != 200 {
		t.Fatalf("revoke: %d", st)
	}
	revs := srv.Revocations()
	if len(revs) != 1 || revs[0] != (providertest.Revocation{Token: tok.RefreshToken, Hint: "refresh_token",
		ClientAuth: "basic", ClientID: srv.ClientID, Known: true}) {
		t.Fatalf("revocations %+v", revs)
	}
	if srv.Valid(tok.AccessToken) {
		t.Fatal("revoking the refresh token must end the grant")
	}
}

// TestAccountChooser: with Options.Accounts, an authorization request with
// prompt=select_account shows the accounts; the form approves as the one
// chosen, whose id and label the token answer names, and refuses an
// account or request it does not know. Without the prompt the server
// approves at once as Subject, as ever.
func TestAccountChooser(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Options{RequirePKCE: true, RedirectURIs: []string{redirect},
		Quirks: providertest.Quirks{IssParameter: true},
		Accounts: []providertest.Account{{Subject: "work-account", Label: "Work files"},
			{Subject: "home-account", Label: "Home <files>"}}})
	verifier := strings.Repeat("v", 50)
	sum := sha256.Sum256([]byte(verifier))
	params := url.Values{"response_type": {"code"}, "client_id": {srv.ClientID}, "redirect_uri": {redirect},
		"state": {"xyz"}, "scope": {"files.read"}, "code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"}, "prompt": {"select_account"}}
	authURL := srv.AuthorizeURL() + "?" + params.Encode()
	exchange := func(back *url.URL) map[string]any {
		t.Helper()
		if back.Query().Get("state") != "xyz" || back.Query().Get("iss") != srv.Issuer() || !strings.HasPrefix(back.String(), redirect+"?") {
			t.Fatalf("redirect %s", back)
		}
		st, tok := post(t, srv, srv.TokenURL(), url.Values{"grant_type": {"authorization_code"}, "code": {back.Query().Get("code")},
			"redirect_uri": {redirect}, "code_verifier": {verifier}})
		if st != 200 {
			t.Fatalf("exchange: %d %v", st, tok)
		}
		return tok
	}
	user := func(tok map[string]any) map[string]any { u, _ := tok["user"].(map[string]any); return u }
	owner := func(tok map[string]any) any {
		req, _ := http.NewRequest(http.MethodGet, srv.APIURL(), nil)
		req.Header.Set("Authorization", "Bearer "+tok["access_token"].(string))
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		m := map[string]any{}
		json.NewDecoder(resp.Body).Decode(&m)
		return m["owner"]
	}

	// GET lists the accounts in a form (the label escaped).
	page := get(t, srv, authURL)
	if page.StatusCode != 200 || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") ||
		page.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("chooser: %d %v", page.StatusCode, page.Header)
	}
	for _, want := range []string{`<form method="post" action="/authorize">`, `value="work-account"`, "Work files",
		`value="home-account"`, "Home &lt;files&gt;"} {
		if !strings.Contains(page.body, want) {
			t.Fatalf("chooser lacks %q:\n%s", want, page.body)
		}
	}
	if _, err := srv.Approve(authURL); err == nil {
		t.Fatal("Approve went past the chooser")
	}

	// POST approves as the one chosen: the token answer and the API name it.
	back, err := srv.ApproveAs(authURL, "home-account")
	if err != nil {
		t.Fatal(err)
	}
	tok := exchange(back)
	if u := user(tok); u["id"] != "home-account" || u["name"] != "Home <files>" || owner(tok) != "home-account" {
		t.Fatalf("chose home-account, token answer names %v, API owner %v", u, owner(tok))
	}
	st, ref := post(t, srv, srv.TokenURL(), url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}})
	if u := user(ref); st != 200 || u["id"] != "home-account" || u["name"] != "Home <files>" {
		t.Fatalf("refresh of home-account's grant names %d %v", st, u)
	}
	if back, err = srv.ApproveAs(authURL, "work-account"); err != nil {
		t.Fatal(err)
	}
	if u := user(exchange(back)); u["id"] != "work-account" || u["name"] != "Work files" {
		t.Fatalf("chose work-account, token answer names %v", u)
	}

	// Without the prompt: at once, as Subject (the first account).
	noPrompt := strings.Replace(authURL, "&prompt=select_account", "", 1)
	if back, err = srv.Approve(noPrompt); err != nil {
		t.Fatal(err)
	}
	if u := user(exchange(back)); u["id"] != "work-account" || u["name"] != "Work files" {
		t.Fatalf("no prompt: token answer names %v", u)
	}
	if cfg := srv.ProviderConfig("fake", "X"); cfg["account_label_field"] != "user.name" {
		t.Fatalf("ProviderConfig names no label field: %v", cfg)
	}

	// Refusals, none of which redirects: an account not offered, a request
	// the chooser did not show (forged, or used already), and one whose
	// redirect URI is not registered never reaches the chooser.
	form, ok := providertest.ChooserForm(get(t, srv, authURL).body, "home-account")
	if !ok {
		t.Fatal("no chooser form")
	}
	refused := func(what string, f url.Values) {
		t.Helper()
		resp := postForm(t, srv, srv.AuthorizeURL(), f)
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
			t.Fatalf("%s: %d %s", what, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	bad := url.Values{"request": form["request"], "account": {"someone-else"}}
	refused("unknown account", bad)
	refused("request used by the refused answer", form) // single use, whatever happened
	refused("forged request", url.Values{"request": {"req_forged"}, "account": {"home-account"}})
	refused("no request", url.Values{"account": {"home-account"}})
	evil := strings.Replace(authURL, url.QueryEscape(redirect), url.QueryEscape("https://evil.example/cb"), 1)
	if resp := get(t, srv, evil); resp.StatusCode != http.StatusBadRequest || strings.Contains(resp.body, "<form") {
		t.Fatalf("unregistered redirect URI: %d", resp.StatusCode)
	}
	// A request used once is gone.
	form, _ = providertest.ChooserForm(get(t, srv, authURL).body, "home-account")
	if resp := postForm(t, srv, srv.AuthorizeURL(), form); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("chooser answer: %d", resp.StatusCode)
	}
	refused("replayed answer", form)

	// Cancel: back with access_denied and the state.
	form, _ = providertest.ChooserForm(get(t, srv, authURL).body, "home-account")
	form.Set("decision", "deny")
	resp := postForm(t, srv, srv.AuthorizeURL(), form)
	if loc, _ := url.Parse(resp.Header.Get("Location")); resp.StatusCode != http.StatusSeeOther ||
		loc.Query().Get("error") != "access_denied" || loc.Query().Get("state") != "xyz" {
		t.Fatalf("cancel: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if c := srv.Counts(); c.Authorize != 9 {
		t.Fatalf("counts %+v: each GET /authorize counts once, the chooser's answer not again", c)
	}
}

// TestNoAccountsNoChooser: without Options.Accounts prompt=select_account
// changes nothing (approved at once as Subject), POST /authorize is not
// served, and token answers name no label.
func TestNoAccountsNoChooser(t *testing.T) {
	t.Parallel()
	srv := providertest.New(t, providertest.Options{})
	q := url.Values{"response_type": {"code"}, "client_id": {srv.ClientID}, "redirect_uri": {redirect}, "prompt": {"select_account"}}
	back, err := srv.Approve(srv.AuthorizeURL() + "?" + q.Encode())
	if err != nil || back.Query().Get("code") == "" {
		t.Fatalf("%v %v", back, err)
	}
	_, tok := post(t, srv, srv.TokenURL(), url.Values{"grant_type": {"authorization_code"}, "code": {back.Query().Get("code")},
		"redirect_uri": {redirect}})
	if u, _ := tok["user"].(map[string]any); len(u) != 1 || u["id"] != "user-1" {
		t.Fatalf("token answer names %v", tok["user"])
	}
	if resp := postForm(t, srv, srv.AuthorizeURL(), url.Values{"request": {"x"}}); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /authorize: %d", resp.StatusCode)
	}
	if _, ok := srv.ProviderConfig("fake", "X")["account_label_field"]; ok {
		t.Fatal("ProviderConfig names a label field")
	}
}

type page struct {
	*http.Response
	body string
}

func noRedirects(srv *providertest.Server) *http.Client {
	c := *srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

func get(t *testing.T, srv *providertest.Server, u string) page {
	t.Helper()
	resp, err := noRedirects(srv).Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return page{resp, string(b)}
}

func postForm(t *testing.T, srv *providertest.Server, u string, form url.Values) *http.Response {
	t.Helper()
	resp, err := noRedirects(srv).PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}
