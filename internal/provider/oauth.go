package provider

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/oauth2"

	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/scope"
)

// oauthProvider implements OAuth on golang.org/x/oauth2, which does the token
// requests and parses JSON and form-encoded answers; tokenTransport adds the
// quirks it does not know.
type oauthProvider struct {
	spec          Spec
	client        *http.Client // revocation
	tokenClient   *http.Client // token endpoint, with quirks
	authorizeHost string       // from spec.AuthorizeURL, parsed once
}

func newOAuth(spec Spec, client *http.Client) *oauthProvider {
	tc := *client
	tc.Transport = &tokenTransport{base: client.Transport, acceptJSON: spec.AcceptJSON,
		slackUser: spec.TokenResponse == ResponseSlackUser}
	host := ""
	if u, err := url.Parse(spec.AuthorizeURL); err == nil {
		host = u.Host
	}
	return &oauthProvider{spec: spec, client: client, tokenClient: &tc, authorizeHost: host}
}

func (p *oauthProvider) Info() Info {
	return Info{
		Name: p.spec.Name, DisplayName: p.spec.DisplayName, Kind: KindOAuth2, AuthorizeHost: p.authorizeHost,
		DefaultScopes: slices.Clone(p.spec.Scopes), PKCE: p.spec.PKCE, Issuer: p.spec.Issuer,
		IssParameterSupported: p.spec.IssParameterSupported, Revocation: p.spec.Revocation,
		NarrowOnRefresh: p.spec.NarrowOnRefresh, RefreshIdleLifetime: p.spec.RefreshIdleLifetime,
		RefreshReuseGrace: p.spec.RefreshReuseGrace, SelectAccount: maps.Clone(p.spec.SelectAccountParams),
		APIBaseURL: p.spec.APIBaseURL, APIAuth: apiAuth(&p.spec), RateLimits: slices.Clone(p.spec.RateLimits),
		ScopeDescriptions: maps.Clone(p.spec.ScopeDescriptions), LogoURL: p.spec.LogoURL, Template: p.spec.Template,
	}
}

// config builds the oauth2 configuration for one call. The auth style is
// always explicit: oauth2's auto-detection retries a failed request the other
// way, which would present a single-use code or refresh token twice.
func (p *oauthProvider) config(redirectURI string) *oauth2.Config {
	style := oauth2.AuthStyleInHeader
	if p.spec.AuthStyle == AuthParams {
		style = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{
		ClientID:     p.spec.ClientID,
		ClientSecret: p.spec.ClientSecret.Reveal(),
		Endpoint:     oauth2.Endpoint{AuthURL: p.spec.AuthorizeURL, TokenURL: p.spec.TokenURL, AuthStyle: style},
		RedirectURL:  redirectURI,
	}
}

func (p *oauthProvider) ctx(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, p.tokenClient)
}

func (p *oauthProvider) AuthCodeURL(state, pkceChallenge, redirectURI string, scopes []string) string {
	if len(scopes) == 0 {
		scopes = p.spec.Scopes
	}
	scopes = scope.Union(scope.Union(scopes, p.spec.AlwaysScopes), p.spec.AccountScopes)
	var opts []oauth2.AuthCodeOption
	if len(scopes) > 0 {
		opts = append(opts, oauth2.SetAuthURLParam(p.spec.ScopeParam, strings.Join(scopes, p.spec.ScopeSeparator)))
	}
	if p.spec.PKCE && pkceChallenge != "" {
		opts = append(opts, oauth2.SetAuthURLParam("code_challenge", pkceChallenge),
			oauth2.SetAuthURLParam("code_challenge_method", "S256"))
	}
	for _, k := range slices.Sorted(maps.Keys(p.spec.AuthorizeParams)) {
		opts = append(opts, oauth2.SetAuthURLParam(k, p.spec.AuthorizeParams[k]))
	}
	return p.config(redirectURI).AuthCodeURL(state, opts...)
}

func (p *oauthProvider) Exchange(ctx context.Context, code, verifier, redirectURI string) (*Token, error) {
	if code == "" {
		return nil, &Error{Provider: p.spec.Name, Op: "exchange", Kind: ErrInvalidGrant, Code: "missing_code"}
	}
	ctx = egress.WithClass(ctx, egress.ClassToken) // its egress proxy (docs/configuration.md)
	var opts []oauth2.AuthCodeOption
	if p.spec.PKCE && verifier != "" {
		opts = append(opts, oauth2.VerifierOption(verifier))
	}
	tok, err := p.config(redirectURI).Exchange(p.ctx(ctx), code, opts...)
	if err != nil {
		return nil, p.classify(ctx, "exchange", err)
	}
	t, err := p.convert("exchange", tok)
	if err != nil {
		return nil, err
	}
	if err := p.nameAccount(ctx, tok, t); err != nil {
		return nil, err
	}
	return t, nil
}

// nameAccount fills t's provider account when the token answer did not
// name it (AccountIDField): from the answer's ID token, checked as OpenID
// Connect Core §3.1.3.7 allows for one received straight from the token
// endpoint over TLS (iss, aud, exp; the signature may be left to TLS), or
// from the provider's "who am I" endpoint (AccountURL). When neither says,
// the account stays unnamed: the caller must not take it for the one it
// had before. A "who am I" endpoint that could not be reached (a timeout, a
// 5xx) fails the exchange with ErrUnavailable rather than leave the account
// unnamed, which would cost every other client its approval for a blip.
func (p *oauthProvider) nameAccount(ctx context.Context, tok *oauth2.Token, t *Token) error {
	if t.AccountID != "" {
		return nil
	}
	if raw, ok := tok.Extra("id_token").(string); ok && raw != "" && p.spec.Issuer != "" {
		if sub := p.idTokenSubject(raw); sub != "" {
			t.AccountID = sub
			return nil
		}
	}
	if p.spec.AccountURL == "" {
		return nil
	}
	id, label, err := p.whoAmI(ctx, t.AccessToken)
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	if err == nil {
		t.AccountID = id
		if t.AccountLabel == "" {
			t.AccountLabel = label
		}
	}
	return nil
}

// maxAccountID bounds an account id or label taken from a provider.
const maxAccountID = 255

// idTokenSubject is the sub of an ID token this provider issued for
// connectd's client, still valid; "" otherwise.
func (p *oauthProvider) idTokenSubject(raw string) string {
	claims := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(raw, claims); err != nil {
		return ""
	}
	iss, _ := claims.GetIssuer()
	aud, _ := claims.GetAudience()
	exp, _ := claims.GetExpirationTime()
	sub, _ := claims.GetSubject()
	if iss != p.spec.Issuer || !slices.Contains(aud, p.spec.ClientID) || exp == nil ||
		!time.Now().Add(-time.Minute).Before(exp.Time) || sub == "" || len(sub) > maxAccountID {
		return ""
	}
	return sub
}

// whoAmI asks AccountURL whose token accessToken is. Its errors name no
// URL and no token.
func (p *oauthProvider) whoAmI(ctx context.Context, accessToken string) (id, label string, err error) {
	fail := func(kind error, status int) (string, string, error) {
		return "", "", &Error{Provider: p.spec.Name, Op: "account", Kind: kind, Status: status}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.spec.AccountURL, nil)
	if err != nil {
		return fail(ErrRejected, 0)
	}
	req.Header.Set("Authorization", "Bearer "+accessToken)
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return fail(ErrUnavailable, 0)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return fail(ErrUnavailable, resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		return fail(ErrRejected, resp.StatusCode)
	}
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return fail(ErrBadResponse, resp.StatusCode)
	}
	id, label = jsonPath(m, p.spec.AccountURLIDField), jsonPath(m, p.spec.AccountURLLabelField)
	if id == "" || len(id) > maxAccountID {
		return fail(ErrBadResponse, resp.StatusCode)
	}
	if len(label) > maxAccountID {
		label = ""
	}
	return id, label, nil
}

func (p *oauthProvider) Refresh(ctx context.Context, refreshToken string) (*Token, error) {
	if refreshToken == "" {
		return nil, &Error{Provider: p.spec.Name, Op: "refresh", Kind: ErrNotSupported, Code: "no_refresh_token"}
	}
	ctx = egress.WithClass(ctx, egress.ClassRefresh)
	// A TokenSource over a token with no access token makes exactly one
	// refresh request; oauth2 keeps the given refresh token when the answer
	// has none.
	tok, err := p.config("").TokenSource(p.ctx(ctx), &oauth2.Token{RefreshToken: refreshToken}).Token()
	if err != nil {
		return nil, p.classify(ctx, "refresh", err)
	}
	return p.convert("refresh", tok)
}

func (p *oauthProvider) RefreshScoped(ctx context.Context, refreshToken string, scopes []string) (*Token, error) {
	if refreshToken == "" {
		return nil, &Error{Provider: p.spec.Name, Op: "refresh", Kind: ErrNotSupported, Code: "no_refresh_token"}
	}
	if len(scopes) == 0 {
		// No scope means "the whole grant" (RFC 6749 §6): never what a
		// caller narrowing a token wants.
		return nil, &Error{Provider: p.spec.Name, Op: "refresh", Kind: ErrRejected, Code: "no_scope"}
	}
	// oauth2's TokenSource sends no scope on a refresh. The one request it
	// makes goes through a client of this call only, whose transport adds
	// scope to the form; oauth2 still does the client authentication and
	// parses answers and errors.
	ctx = egress.WithClass(ctx, egress.ClassRefresh)
	c := *p.tokenClient
	c.Transport = &scopeTransport{base: p.tokenClient.Transport, scope: strings.Join(scopes, p.spec.ScopeSeparator)}
	sctx := context.WithValue(ctx, oauth2.HTTPClient, &c)
	tok, err := p.config("").TokenSource(sctx, &oauth2.Token{RefreshToken: refreshToken}).Token()
	if err != nil {
		return nil, p.classify(ctx, "refresh", err)
	}
	return p.convert("refresh", tok)
}

// convert maps oauth2's token to ours, reading granted scopes and account
// fields from the raw response.
func (p *oauthProvider) convert(op string, tok *oauth2.Token) (*Token, error) {
	if tok.AccessToken == "" {
		return nil, &Error{Provider: p.spec.Name, Op: op, Kind: ErrBadResponse}
	}
	t := &Token{AccessToken: tok.AccessToken, TokenType: tok.TokenType, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry}
	if t.TokenType == "" || strings.EqualFold(t.TokenType, "bearer") {
		t.TokenType = "Bearer" // GitHub says "bearer"
	}
	switch s := tok.Extra("scope").(type) {
	case string:
		t.Scopes = splitScopes(s)
	case []any:
		// Twitch answers with a JSON array of scopes.
		t.Scopes = []string{}
		for _, x := range s {
			if x, ok := x.(string); ok && !slices.Contains(t.Scopes, x) {
				t.Scopes = append(t.Scopes, x)
			}
		}
	}
	if t.Scopes != nil && len(p.spec.AccountScopes) > 0 {
		t.Scopes = slices.DeleteFunc(t.Scopes, func(s string) bool { return slices.Contains(p.spec.AccountScopes, s) })
	}
	t.AccountID = extraString(tok, p.spec.AccountIDField)
	t.AccountLabel = extraString(tok, p.spec.AccountLabelField)
	return t, nil
}

// splitScopes splits a granted-scope list on spaces and commas: providers
// differ (GitHub asks for spaces and answers with commas).
func splitScopes(s string) []string {
	out := []string{}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' }) {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// extraString reads a dot path ("authed_user.id") from the raw token response.
func extraString(tok *oauth2.Token, path string) string {
	if path == "" {
		return ""
	}
	parts := strings.Split(path, ".")
	return walk(tok.Extra(parts[0]), parts[1:])
}

// jsonPath reads a dot path ("user.id") from a decoded JSON object.
func jsonPath(m map[string]any, path string) string {
	if path == "" {
		return ""
	}
	return walk(m, strings.Split(path, "."))
}

// walk follows keys from v and returns the string or number found there.
func walk(v any, keys []string) string {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[k]
	}
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case json.Number:
		return x.String()
	}
	return ""
}

// classify turns an oauth2 or transport error into an *Error. It never keeps
// oauth2's error text, which may quote the provider's response body.
func (p *oauthProvider) classify(ctx context.Context, op string, err error) error {
	e := &Error{Provider: p.spec.Name, Op: op}
	var re *oauth2.RetrieveError
	var ue *url.Error
	var ne net.Error
	switch {
	case errors.As(err, &re):
		e.Code = sanitizeCode(re.ErrorCode)
		if re.Response != nil {
			e.Status = re.Response.StatusCode
		}
		e.Kind = p.kindOf(e.Status, re.ErrorCode)
	case ctx.Err() != nil:
		e.Kind, e.Err = ErrUnavailable, ctx.Err()
	case errors.Is(err, egress.ErrTooLarge):
		e.Kind = ErrBadResponse
	case errors.Is(err, egress.ErrRedirect):
		// An answer, and not the one asked for: retrying will not help.
		e.Kind = ErrRejected
	case errors.As(err, &ue), errors.As(err, &ne), errors.Is(err, context.DeadlineExceeded):
		e.Kind, e.Err = ErrUnavailable, err
	case strings.HasPrefix(err.Error(), "oauth2: cannot fetch token"):
		// Reading the response failed mid-way (timeout, reset); oauth2 flattens the cause.
		e.Kind = ErrUnavailable
	default:
		e.Kind = ErrBadResponse
	}
	return e
}

// kindOf classifies an HTTP status and OAuth error code. A 5xx is never taken
// for a dead grant, whatever its body says.
func (p *oauthProvider) kindOf(status int, code string) error {
	switch {
	case status >= 500 || status == http.StatusTooManyRequests ||
		code == "temporarily_unavailable" || code == "server_error":
		return ErrUnavailable
	case code != "" && slices.Contains(p.spec.InvalidGrantErrors, code):
		return ErrInvalidGrant
	case code == "access_denied":
		return ErrAccessDenied
	case code == "" && status >= 200 && status < 300:
		return ErrBadResponse
	default:
		return ErrRejected
	}
}

// Revoke implements RFC 7009 (or the bearer variant of Dropbox and Slack).
func (p *oauthProvider) Revoke(ctx context.Context, token, hint string) error {
	ctx = egress.WithClass(ctx, egress.ClassRevoke)
	fail := func(kind error, status int, code string, cause error) error {
		return &Error{Provider: p.spec.Name, Op: "revoke", Kind: kind, Status: status, Code: sanitizeCode(code), Err: cause}
	}
	if token == "" {
		return fail(ErrRejected, 0, "missing_token", nil)
	}
	var req *http.Request
	var err error
	switch p.spec.Revocation {
	case RevokeRFC7009:
		form := url.Values{"token": {token}}
		if hint != "" {
			form.Set("token_type_hint", hint)
		}
		if p.spec.AuthStyle == AuthParams {
			form.Set("client_id", p.spec.ClientID)
			form.Set("client_secret", p.spec.ClientSecret.Reveal())
		}
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, p.spec.RevocationURL, strings.NewReader(form.Encode()))
		if err != nil {
			return fail(ErrRejected, 0, "", nil)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if p.spec.AuthStyle != AuthParams {
			// RFC 6749 §2.3.1: id and secret are form-encoded before Basic.
			req.SetBasicAuth(url.QueryEscape(p.spec.ClientID), url.QueryEscape(p.spec.ClientSecret.Reveal()))
		}
	case RevokeBearer:
		if hint == "refresh_token" {
			return fail(ErrNotSupported, 0, "", nil)
		}
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, p.spec.RevocationURL, nil)
		if err != nil {
			return fail(ErrRejected, 0, "", nil)
		}
		req.Header.Set("Authorization", "Bearer "+token)
	default:
		return fail(ErrNotSupported, 0, "", nil)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return fail(ErrUnavailable, 0, "", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fail(ErrUnavailable, resp.StatusCode, "", nil)
	}
	var answer struct {
		OK    *bool  `json:"ok"` // Slack
		Error string `json:"error"`
	}
	_ = json.Unmarshal(body, &answer)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if answer.OK != nil && !*answer.OK {
			return fail(ErrRejected, resp.StatusCode, answer.Error, nil)
		}
		return nil
	}
	return fail(p.kindOf(resp.StatusCode, answer.Error), resp.StatusCode, answer.Error, nil)
}

// CheckIssuer applies RFC 9207 §2.4: an iss that differs from the provider's
// issuer is refused, and so is a missing one when the provider always sends
// it. When connectd does not know the issuer, a present iss cannot be checked
// and is ignored.
func (p *oauthProvider) CheckIssuer(iss string) error {
	fail := func(code string) error {
		return &Error{Provider: p.spec.Name, Op: "authorize", Kind: ErrIssuerMismatch, Code: code}
	}
	switch {
	case iss == "" && p.spec.IssParameterSupported:
		return fail("missing_iss")
	case iss == "", p.spec.Issuer == "":
		return nil
	case iss != p.spec.Issuer:
		return fail("wrong_iss")
	}
	return nil
}

// RevokeGrant revokes everything a stored credential holds, as well as the
// provider allows: the refresh token first (RFC 7009 §2.1: revoking it should
// end the whole grant) and then the access token. It returns the first
// failure; ErrNotSupported when the provider cannot revoke at all.
func RevokeGrant(ctx context.Context, p OAuth, accessToken, refreshToken string) error {
	style := p.Info().Revocation
	if style == RevokeNone {
		return &Error{Provider: p.Info().Name, Op: "revoke", Kind: ErrNotSupported}
	}
	var first error
	if refreshToken != "" && style == RevokeRFC7009 {
		first = p.Revoke(ctx, refreshToken, "refresh_token")
	}
	if accessToken != "" {
		if err := p.Revoke(ctx, accessToken, "access_token"); err != nil && first == nil {
			first = err
		}
	}
	return first
}
