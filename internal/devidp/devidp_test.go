package devidp_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/devidp"
)

const redirect = "https://rp.example/callback"

func newProvider(t *testing.T) (*devidp.Provider, *httptest.Server) {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p, err := devidp.New(devidp.Config{Issuer: srv.URL, Clients: []devidp.Client{
		{ID: "conf", Secret: "s3cret", RedirectURIs: []string{redirect}},
		{ID: "public", RedirectURIs: []string{redirect}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/", p.Handler())
	return p, srv
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func challenge(verifier string) string {
	s := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(s[:])
}

// code runs the picker for client as alice and returns the issued code.
func code(t *testing.T, srv *httptest.Server, client, verifier string) string {
	t.Helper()
	form := url.Values{"client_id": {client}, "redirect_uri": {redirect}, "response_type": {"code"},
		"scope": {"openid"}, "state": {"st"}, "nonce": {"n"}, "code_challenge": {challenge(verifier)},
		"code_challenge_method": {"S256"}, "resource": {"https://mcp.example/mcp"}, "user": {"alice"}}
	resp, err := noRedirect.PostForm(srv.URL+"/authorize", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || loc.Query().Get("state") != "st" || loc.Query().Get("iss") != srv.URL {
		t.Fatalf("authorize: %d %s", resp.StatusCode, loc)
	}
	return loc.Query().Get("code")
}

func TestTokenEndpoint(t *testing.T) {
	t.Parallel()
	const verifier = "verifier-0123456789-0123456789-0123456789-xyz"
	tests := []struct {
		name   string
		client string
		form   func(code string) url.Values
		basic  [2]string
		status int
	}{
		{"confidential, basic", "conf", func(c string) url.Values {
			return url.Values{"grant_type": {"authorization_code"}, "code": {c}, "redirect_uri": {redirect}, "code_verifier": {verifier}}
		}, [2]string{"conf", "s3cret"}, 200},
		{"confidential, post", "conf", func(c string) url.Values {
			return url.Values{"grant_type": {"authorization_code"}, "code": {c}, "redirect_uri": {redirect}, "code_verifier": {verifier},
				"client_id": {"conf"}, "client_secret": {"s3cret"}}
		}, [2]string{}, 200},
		{"public", "public", func(c string) url.Values {
			return url.Values{"grant_type": {"authorization_code"}, "code": {c}, "redirect_uri": {redirect}, "code_verifier": {verifier},
				"client_id": {"public"}}
		}, [2]string{}, 200},
		{"wrong secret", "conf", func(c string) url.Values {
			return url.Values{"grant_type": {"authorization_code"}, "code": {c}, "redirect_uri": {redirect}, "code_verifier": {verifier}}
		}, [2]string{"conf", "guess"}, 401},
		{"wrong PKCE verifier", "conf", func(c string) url.Values {
			return url.Values{"grant_type": {"authorization_code"}, "code": {c}, "redirect_uri": {redirect}, "code_verifier": {verifier + "x"}}
		}, [2]string{"conf", "s3cret"}, 400},
		{"other redirect_uri", "conf", func(c string) url.Values {
			return url.Values{"grant_type": {"authorization_code"}, "code": {c}, "redirect_uri": {redirect + "2"}, "code_verifier": {verifier}}
		}, [2]string{"conf", "s3cret"}, 400},
		{"code of another client", "public", func(c string) url.Values {
			return url.Values{"grant_type": {"authorization_code"}, "code": {c}, "redirect_uri": {redirect}, "code_verifier": {verifier}}
		}, [2]string{"conf", "s3cret"}, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, srv := newProvider(t)
			c := code(t, srv, tt.client, verifier)
			post := func() (int, map[string]any) {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/token", strings.NewReader(tt.form(c).Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				if tt.basic[0] != "" {
					req.SetBasicAuth(tt.basic[0], tt.basic[1])
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var body map[string]any
				json.NewDecoder(resp.Body).Decode(&body)
				return resp.StatusCode, body
			}
			status, body := post()
			if status != tt.status {
				t.Fatalf("status %d, want %d: %v", status, tt.status, body)
			}
			if status == 200 {
				if body["id_token"] == nil || body["access_token"] == nil {
					t.Fatalf("body %v", body)
				}
				if again, _ := post(); again != 400 {
					t.Fatalf("code reused: %d", again)
				}
			}
		})
	}
}

func TestAuthorizeRefusesUnregisteredRedirect(t *testing.T) {
	t.Parallel()
	_, srv := newProvider(t)
	q := url.Values{"client_id": {"conf"}, "redirect_uri": {"https://evil.example/cb"}, "response_type": {"code"},
		"code_challenge": {challenge("v")}, "code_challenge_method": {"S256"}}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		var resp *http.Response
		var err error
		if method == http.MethodGet {
			resp, err = noRedirect.Get(srv.URL + "/authorize?" + q.Encode())
		} else {
			q.Set("user", "alice")
			resp, err = noRedirect.PostForm(srv.URL+"/authorize", q)
		}
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 || resp.Header.Get("Location") != "" {
			t.Fatalf("%s: %d %q", method, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	// Without PKCE S256 the request is refused (back to the registered URI).
	q = url.Values{"client_id": {"conf"}, "redirect_uri": {redirect}, "response_type": {"code"}, "user": {"alice"}}
	resp, err := noRedirect.PostForm(srv.URL+"/authorize", q)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc, _ := url.Parse(resp.Header.Get("Location")); loc.Query().Get("error") != "invalid_request" || loc.Query().Get("code") != "" {
		t.Fatalf("no PKCE: %s", loc)
	}
}

// TestPickerStylesheet: the sign-in page, the first page a demo user sees,
// loads its stylesheet from the provider's own host.
func TestPickerStylesheet(t *testing.T) {
	t.Parallel()
	_, srv := newProvider(t)
	q := url.Values{"client_id": {"conf"}, "redirect_uri": {redirect}, "response_type": {"code"},
		"code_challenge": {challenge("v")}, "code_challenge_method": {"S256"}}
	resp, err := http.Get(srv.URL + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`<link rel="stylesheet" href="([^"]+)"`).FindSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("picker: %d, no stylesheet link in %s", resp.StatusCode, page)
	}
	href, _ := url.Parse(string(m[1]))
	css, err := http.Get(resp.Request.URL.ResolveReference(href).String())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(css.Body)
	css.Body.Close()
	if css.StatusCode != http.StatusOK || !strings.HasPrefix(css.Header.Get("Content-Type"), "text/css") || len(body) < 100 {
		t.Fatalf("stylesheet %s: %d %q, %d bytes", href, css.StatusCode, css.Header.Get("Content-Type"), len(body))
	}
}
