package providertest_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
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
