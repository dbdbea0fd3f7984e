// Package devtoken gets an MCP access token from the demo's development
// identity provider (internal/devidp, which `make demo` runs), the way an
// MCP client would: an authorization-code request with PKCE S256 and an RFC
// 8707 resource, answered on the provider's user picker as a demo user
// (alice or bob — it has no passwords), then the code exchanged at the token
// endpoint. For the demo and tests only: the picker authenticates nobody.
package devtoken

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// ClientID is the public OAuth client the demo registers at its identity
// provider for MCP clients, with RedirectURI as its only redirect URI. The
// redirect is never followed: the code is read from it.
const (
	ClientID    = "demo-mcp-client"
	RedirectURI = "http://127.0.0.1/callback"
)

// Request says whose token to get, for which MCP server.
type Request struct {
	Issuer   string // the identity provider, e.g. http://127.0.0.1:8081
	User     string // alice or bob
	Resource string // the MCP server's URL: the token's audience
	// ClientID and RedirectURI default to the constants above.
	ClientID    string
	RedirectURI string
	HTTPClient  *http.Client // default http.DefaultClient's transport, no redirects followed
}

// Get runs the flow and returns the access token.
func Get(ctx context.Context, r Request) (string, error) {
	if r.ClientID == "" {
		r.ClientID = ClientID
	}
	if r.RedirectURI == "" {
		r.RedirectURI = RedirectURI
	}
	hc := http.Client{}
	if r.HTTPClient != nil {
		hc = *r.HTTPClient
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	issuer := strings.TrimRight(r.Issuer, "/")

	verifier := rand.Text() + rand.Text() // 52 base32 characters
	sum := sha256.Sum256([]byte(verifier))
	state := rand.Text()
	form := url.Values{
		"client_id": {r.ClientID}, "redirect_uri": {r.RedirectURI}, "response_type": {"code"},
		"scope": {"openid"}, "state": {state}, "resource": {r.Resource},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
		"user": {r.User}, // the picker's answer
	}
	resp, err := post(ctx, &hc, issuer+"/authorize", form)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || err != nil {
		return "", fmt.Errorf("devtoken: the identity provider answered %d to the authorization request", resp.StatusCode)
	}
	q := loc.Query()
	if e := q.Get("error"); e != "" {
		return "", fmt.Errorf("devtoken: authorization refused: %s", e)
	}
	if q.Get("state") != state || q.Get("code") == "" {
		return "", errors.New("devtoken: authorization response without code or with another state")
	}

	resp, err = post(ctx, &hc, issuer+"/token", url.Values{
		"grant_type": {"authorization_code"}, "code": {q.Get("code")}, "redirect_uri": {r.RedirectURI},
		"client_id": {r.ClientID}, "code_verifier": {verifier},
	})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&tok); err != nil {
		return "", fmt.Errorf("devtoken: token response: %w", err)
	}
	if resp.StatusCode != http.StatusOK || tok.AccessToken == "" {
		return "", fmt.Errorf("devtoken: token request refused (%d %s)", resp.StatusCode, tok.Error)
	}
	return tok.AccessToken, nil
}

func post(ctx context.Context, hc *http.Client, u string, form url.Values) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("devtoken: %w", err)
	}
	return resp, nil
}
