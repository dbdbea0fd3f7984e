package devidp

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// User is a demo account.
type User struct {
	Subject string
	Name    string
	Email   string
}

// Users are the accounts the picker offers.
var Users = []User{
	{Subject: "alice", Name: "Alice", Email: "alice@example.test"},
	{Subject: "bob", Name: "Bob", Email: "bob@example.test"},
	// The demo's administrator (make demo names it in CONNECTD_ADMIN_SUBJECTS).
	{Subject: "admin", Name: "Admin", Email: "admin@example.test"},
}

// Client is an OAuth client registered at the provider.
type Client struct {
	ID string
	// Secret authenticates the client at the token endpoint (basic or post);
	// empty makes it a public client, which PKCE alone protects.
	Secret       string
	RedirectURIs []string // compared exactly
}

// Config configures a Provider.
type Config struct {
	// Issuer is the absolute URL the Handler is reachable at, without a
	// trailing slash; it is the iss of every token.
	Issuer  string
	Clients []Client
	// AccessTokenTTL and IDTokenTTL default to 1h and 5m.
	AccessTokenTTL time.Duration
	IDTokenTTL     time.Duration
	Now            func() time.Time
	Logger         *slog.Logger
	// IDTokenClaims, when set, may change an ID token's claims just before it
	// is signed: tests use it to play a broken or malicious provider.
	IDTokenClaims func(jwt.MapClaims)
}

// Provider is the development OIDC provider.
type Provider struct {
	cfg Config

	mu    sync.Mutex
	keys  []*signingKey // keys[0] signs; keys[1], if any, is still published
	codes map[string]*grant
}

type signingKey struct {
	kid  string
	priv *ecdsa.PrivateKey
}

// grant is an issued authorization code and what it was issued for.
type grant struct {
	clientID, redirectURI, challenge, nonce, subject, scope, resource string
	expires                                                           time.Time
}

const codeTTL = time.Minute

// New returns a provider with a fresh ES256 key.
func New(cfg Config) (*Provider, error) {
	u, err := url.Parse(cfg.Issuer)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.HasSuffix(cfg.Issuer, "/") {
		return nil, errors.New("devidp: Issuer must be an absolute http(s) URL without a trailing slash")
	}
	if cfg.AccessTokenTTL <= 0 {
		cfg.AccessTokenTTL = time.Hour
	}
	if cfg.IDTokenTTL <= 0 {
		cfg.IDTokenTTL = 5 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Provider{cfg: cfg, codes: map[string]*grant{}}
	if err := p.Rotate(); err != nil {
		return nil, err
	}
	return p, nil
}

// Issuer returns the issuer URL.
func (p *Provider) Issuer() string { return p.cfg.Issuer }

// Rotate makes a new key the signing key. The previous key stays in the JWKS
// (tokens it signed still verify); the one before it is dropped.
func (p *Provider) Rotate() error {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("devidp: generate key: %w", err)
	}
	k := &signingKey{kid: randomString(12), priv: priv}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = append([]*signingKey{k}, p.keys...)
	if len(p.keys) > 2 {
		p.keys = p.keys[:2]
	}
	return nil
}

// KeyID returns the kid of the current signing key.
func (p *Provider) KeyID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keys[0].kid
}

// Sign signs claims with the current key (ES256, its kid). typ is the header's
// typ; empty leaves it out.
func (p *Provider) Sign(typ string, claims jwt.MapClaims) (string, error) {
	p.mu.Lock()
	k := p.keys[0]
	p.mu.Unlock()
	t := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	t.Header["kid"] = k.kid
	if typ != "" {
		t.Header["typ"] = typ
	} else {
		delete(t.Header, "typ")
	}
	return t.SignedString(k.priv)
}

// SignJSON signs payload, byte for byte, as a token's claims with the current
// key (ES256, its kid); typ as in Sign. Unlike Sign, which re-encodes claims
// (and so replaces invalid UTF-8), it lets tests play an issuer that signs
// any bytes at all.
func (p *Provider) SignJSON(typ string, payload []byte) (string, error) {
	p.mu.Lock()
	k := p.keys[0]
	p.mu.Unlock()
	h := map[string]string{"alg": "ES256", "kid": k.kid}
	if typ != "" {
		h["typ"] = typ
	}
	header, err := json.Marshal(h)
	if err != nil {
		return "", err
	}
	signing := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(payload)
	sig, err := jwt.SigningMethodES256.Sign(signing, k.priv)
	if err != nil {
		return "", fmt.Errorf("devidp: sign: %w", err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// AccessTokenClaims returns the claims of an RFC 9068 access token for
// subject, issued to clientID, for the given audiences.
func (p *Provider) AccessTokenClaims(subject, clientID, scope string, audience ...string) jwt.MapClaims {
	now := p.cfg.Now()
	return jwt.MapClaims{
		"iss":       p.cfg.Issuer,
		"sub":       subject,
		"aud":       audience,
		"client_id": clientID,
		"scope":     scope,
		"iat":       now.Unix(),
		"exp":       now.Add(p.cfg.AccessTokenTTL).Unix(),
		"jti":       randomString(16),
	}
}

// AccessToken mints an access token (typ at+jwt) for subject with the given
// audiences, as if issued to the client "mcp-client".
func (p *Provider) AccessToken(subject string, audience ...string) (string, error) {
	return p.Sign("at+jwt", p.AccessTokenClaims(subject, "mcp-client", "openid", audience...))
}

// Handler serves the provider's endpoints relative to the issuer URL:
// /.well-known/openid-configuration, /jwks, /authorize (GET shows the picker,
// POST answers it), /token, and the picker's stylesheet under /static/.
func (p *Provider) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /jwks", p.jwks)
	mux.HandleFunc("GET /authorize", p.authorizeForm)
	mux.HandleFunc("POST /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	// The picker's stylesheet (the page's /static/style.css), for when the
	// provider runs on a host of its own, as in the demo.
	static, _ := fs.Sub(templates.Static, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", web.Static(static)))
	return mux
}

func (p *Provider) discovery(w http.ResponseWriter, r *http.Request) {
	iss := p.cfg.Issuer
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         iss,
		"authorization_endpoint":                         iss + "/authorize",
		"token_endpoint":                                 iss + "/token",
		"jwks_uri":                                       iss + "/jwks",
		"response_types_supported":                       []string{"code"},
		"grant_types_supported":                          []string{"authorization_code"},
		"subject_types_supported":                        []string{"public"},
		"id_token_signing_alg_values_supported":          []string{"ES256"},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"client_secret_basic", "client_secret_post", "none"},
		"scopes_supported":                               []string{"openid", "profile", "email"},
		"authorization_response_iss_parameter_supported": true,
	})
}

func (p *Provider) jwks(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	keys := slices.Clone(p.keys)
	p.mu.Unlock()
	var out []map[string]string
	for _, k := range keys {
		b, err := k.priv.PublicKey.Bytes() // 0x04 || X || Y
		if err != nil {
			http.Error(w, "key encoding", http.StatusInternalServerError)
			return
		}
		out = append(out, map[string]string{
			"kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": k.kid,
			"x": base64.RawURLEncoding.EncodeToString(b[1:33]),
			"y": base64.RawURLEncoding.EncodeToString(b[33:]),
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": out})
}

// authRequest is a validated authorization request.
type authRequest struct {
	client                                                Client
	redirectURI, state, nonce, challenge, scope, resource string
}

// authParams are the request parameters the picker form carries through.
var authParams = []string{"client_id", "redirect_uri", "response_type", "scope", "state", "nonce",
	"code_challenge", "code_challenge_method", "resource"}

// parseAuthRequest validates an authorization request. It reports whether
// redirect_uri may receive an error redirect (only when it is registered).
func (p *Provider) parseAuthRequest(v url.Values) (authRequest, bool, error) {
	var c Client
	found := false
	for _, cl := range p.cfg.Clients {
		if cl.ID == v.Get("client_id") {
			c, found = cl, true
		}
	}
	if !found {
		return authRequest{}, false, errors.New("unknown client_id")
	}
	redirect := v.Get("redirect_uri")
	if !slices.Contains(c.RedirectURIs, redirect) {
		return authRequest{}, false, errors.New("redirect_uri is not registered for this client")
	}
	req := authRequest{client: c, redirectURI: redirect, state: v.Get("state"), nonce: v.Get("nonce"),
		challenge: v.Get("code_challenge"), scope: v.Get("scope"), resource: v.Get("resource")}
	switch {
	case v.Get("response_type") != "code":
		return req, true, errors.New("unsupported_response_type")
	case v.Get("code_challenge_method") != "S256" || len(req.challenge) != 43:
		return req, true, errors.New("invalid_request: PKCE S256 is required")
	}
	return req, true, nil
}

func (p *Provider) authorizeForm(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if _, _, err := p.parseAuthRequest(q); err != nil {
		http.Error(w, "devidp: "+err.Error(), http.StatusBadRequest)
		return
	}
	v := templates.DevIdPView{Action: p.cfg.Issuer + "/authorize", ClientID: q.Get("client_id")}
	for _, name := range authParams {
		if val := q.Get(name); val != "" {
			v.Fields = append(v.Fields, templates.HiddenField{Name: name, Value: val})
		}
	}
	for _, u := range Users {
		v.Users = append(v.Users, templates.DevIdPUser{Subject: u.Subject, Name: u.Name})
	}
	web.HTMLDocument(w.Header())
	w.Header().Set("Cache-Control", "no-store")
	if err := templates.DevIdPPage(v).Render(r.Context(), w); err != nil {
		p.cfg.Logger.ErrorContext(r.Context(), "devidp: render picker", slog.Any("error", err))
	}
}

func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "devidp: bad form", http.StatusBadRequest)
		return
	}
	req, canRedirect, err := p.parseAuthRequest(r.PostForm)
	if !canRedirect {
		http.Error(w, "devidp: "+err.Error(), http.StatusBadRequest)
		return
	}
	back := url.Values{"iss": {p.cfg.Issuer}}
	if req.state != "" {
		back.Set("state", req.state)
	}
	user := r.PostForm.Get("user")
	switch {
	case err != nil:
		code, _, _ := strings.Cut(err.Error(), ":")
		back.Set("error", code)
	case user == "":
		back.Set("error", "access_denied")
	case !slices.ContainsFunc(Users, func(u User) bool { return u.Subject == user }):
		http.Error(w, "devidp: unknown user", http.StatusBadRequest)
		return
	default:
		code := randomString(32)
		p.mu.Lock()
		p.codes[code] = &grant{clientID: req.client.ID, redirectURI: req.redirectURI, challenge: req.challenge,
			nonce: req.nonce, subject: user, scope: req.scope, resource: req.resource,
			expires: p.cfg.Now().Add(codeTTL)}
		p.mu.Unlock()
		back.Set("code", code)
	}
	sep := "?"
	if strings.Contains(req.redirectURI, "?") {
		sep = "&"
	}
	http.Redirect(w, r, req.redirectURI+sep+back.Encode(), http.StatusSeeOther)
}

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	client, ok := p.authenticateClient(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="devidp"`)
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	if r.PostForm.Get("grant_type") != "authorization_code" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	code := r.PostForm.Get("code")
	p.mu.Lock()
	g := p.codes[code]
	delete(p.codes, code) // single use, even when the request fails below
	p.mu.Unlock()
	now := p.cfg.Now()
	verifier := r.PostForm.Get("code_verifier")
	sum := sha256.Sum256([]byte(verifier))
	challenge := base64.RawURLEncoding.EncodeToString(sum[:])
	if g == nil || !now.Before(g.expires) || g.clientID != client.ID ||
		g.redirectURI != r.PostForm.Get("redirect_uri") ||
		subtle.ConstantTimeCompare([]byte(challenge), []byte(g.challenge)) != 1 {
		oauthError(w, http.StatusBadRequest, "invalid_grant")
		return
	}
	aud := client.ID
	if g.resource != "" {
		aud = g.resource
	}
	at, err := p.Sign("at+jwt", p.AccessTokenClaims(g.subject, client.ID, g.scope, aud))
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error")
		return
	}
	resp := map[string]any{
		"access_token": at,
		"token_type":   "Bearer",
		"expires_in":   int(p.cfg.AccessTokenTTL / time.Second),
		"scope":        g.scope,
	}
	if slices.Contains(strings.Fields(g.scope), "openid") {
		claims := jwt.MapClaims{
			"iss":       p.cfg.Issuer,
			"sub":       g.subject,
			"aud":       client.ID,
			"azp":       client.ID,
			"iat":       now.Unix(),
			"auth_time": now.Unix(),
			"exp":       now.Add(p.cfg.IDTokenTTL).Unix(),
		}
		if g.nonce != "" {
			claims["nonce"] = g.nonce
		}
		for _, u := range Users {
			if u.Subject == g.subject {
				claims["name"], claims["email"] = u.Name, u.Email
			}
		}
		if p.cfg.IDTokenClaims != nil {
			p.cfg.IDTokenClaims(claims)
		}
		idt, err := p.Sign("JWT", claims)
		if err != nil {
			oauthError(w, http.StatusInternalServerError, "server_error")
			return
		}
		resp["id_token"] = idt
	}
	writeJSON(w, http.StatusOK, resp)
}

// authenticateClient accepts client_secret_basic, client_secret_post, or no
// secret for a public client; secrets are compared in constant time.
func (p *Provider) authenticateClient(r *http.Request) (Client, bool) {
	id, secret, basic := r.BasicAuth()
	if basic {
		// RFC 6749 §2.3.1: both are form-urlencoded inside Basic.
		var err1, err2 error
		id, err1 = url.QueryUnescape(id)
		secret, err2 = url.QueryUnescape(secret)
		if err1 != nil || err2 != nil {
			return Client{}, false
		}
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	for _, c := range p.cfg.Clients {
		if c.ID != id {
			continue
		}
		if c.Secret == "" {
			return c, secret == ""
		}
		return c, subtle.ConstantTimeCompare([]byte(secret), []byte(c.Secret)) == 1
	}
	return Client{}, false
}

func oauthError(w http.ResponseWriter, status int, code string) {
	writeJSON(w, status, map[string]string{"error": code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms.
	return base64.RawURLEncoding.EncodeToString(b)
}
