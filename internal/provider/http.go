package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// tokenTransport applies a provider's token-endpoint quirks to requests made
// by golang.org/x/oauth2: the Accept header GitHub needs for JSON, and
// reshaping Slack's nested user-token response into RFC 6749 form.
type tokenTransport struct {
	base       http.RoundTripper
	acceptJSON bool
	slackUser  bool
}

func (t *tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.acceptJSON {
		req = req.Clone(req.Context())
		req.Header.Set("Accept", "application/json")
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || !t.slackUser {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	out := liftSlackUser(body)
	resp.Body = io.NopCloser(bytes.NewReader(out))
	resp.ContentLength = int64(len(out))
	resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
	return resp, nil
}

// liftSlackUser turns Slack's oauth.v2.access answer for the user-token flow,
// {"ok":true,"authed_user":{"id":…,"access_token":…,"refresh_token":…,
// "expires_in":…,"scope":…},"team":{…}}, into a standard token response by
// lifting authed_user's token fields to the top (replacing a bot token, which
// connectd does not store). authed_user itself is kept for the account id.
// Anything else (errors, refresh answers already at the top) passes through.
func liftSlackUser(body []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return body
	}
	var u map[string]json.RawMessage
	if raw, ok := m["authed_user"]; !ok || json.Unmarshal(raw, &u) != nil {
		return body
	}
	if _, ok := u["access_token"]; !ok {
		return body
	}
	for _, k := range []string{"access_token", "token_type", "refresh_token", "expires_in", "scope"} {
		delete(m, k)
		// Slack calls the type "user"; it is used as a Bearer token.
		if v, ok := u[k]; ok && k != "token_type" {
			m[k] = v
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	clear(body)
	return out
}

// scopeTransport adds "scope" to a refresh-token grant's form body (RFC 6749
// §6), which golang.org/x/oauth2 cannot send itself. It serves one
// RefreshScoped call; any other request passes through untouched.
type scopeTransport struct {
	base  http.RoundTripper
	scope string
}

func (t *scopeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.Body == nil ||
		!strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return t.base.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	form, err := url.ParseQuery(string(body))
	clear(body)
	if err != nil || form.Get("grant_type") != "refresh_token" {
		return nil, errors.New("provider: scoped refresh: not a refresh-token request")
	}
	form.Set("scope", t.scope)
	enc := form.Encode()
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(strings.NewReader(enc))
	out.ContentLength = int64(len(enc))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(enc)), nil }
	return t.base.RoundTrip(out)
}
