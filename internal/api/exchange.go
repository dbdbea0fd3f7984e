package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/refusal"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
)

// RFC 8693 names.
const (
	// GrantTokenExchange is the grant_type of a token exchange.
	GrantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	// TokenTypeAccessToken is the one subject, requested and issued token
	// type connectd speaks: the user's MCP access token goes in, the
	// provider's access token (or API key) comes out.
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
)

// TokenPath is connectd's OAuth token endpoint (RFC 8693 token exchange),
// beside /oauth/callback; its RFC 8414 metadata is at MetadataPath.
const (
	TokenPath    = "/oauth/token"
	MetadataPath = "/.well-known/oauth-authorization-server"
)

// AudiencePrefix starts the audience that names the provider (and,
// optionally, the connection) a token exchange asks for:
// "connectd:provider:github" or "connectd:provider:github:cn_…".
const AudiencePrefix = "connectd:provider:"

// TokenEndpoint is the absolute URL of the token endpoint: the aud a client
// assertion for it must carry.
func (s *Server) TokenEndpoint() string { return s.publicURL + TokenPath }

// exchangeDoc is the RFC 8693 §2.2.1 answer, with the connection it came
// from (connectd's addition; what the token read's account says).
type exchangeDoc struct {
	AccessToken     string     `json:"access_token"`
	IssuedTokenType string     `json:"issued_token_type"`
	TokenType       string     `json:"token_type"`
	ExpiresIn       *int64     `json:"expires_in,omitempty"`
	Scope           string     `json:"scope,omitempty"`
	Account         accountDoc `json:"account"`
}

// exchange handles POST /oauth/token: RFC 8693 token exchange, the standard
// door to the token read's decision. The MCP server authenticates as an
// OAuth client (its client key as client secret, Basic or in the body, or
// a private_key_jwt assertion); the subject token is the user's MCP access
// token, verified exactly as X-User-Token is; the target names the provider
// and optionally the connection. The credential comes from readToken, as
// the token read's does. Errors are the token read's, in RFC 6749 §5.2
// form (oauthError).
func (s *Server) exchange(w http.ResponseWriter, r *http.Request) error {
	req := &exchangeRequest{}
	err := serveJSON(w, r, req, endpoint[exchangeRequest, released]{
		decode: func(r *http.Request, req *exchangeRequest) error {
			var err error
			req.form, err = tokenForm(r)
			return err
		},
		caller: s.exchangeCaller,
		call: func(_ http.ResponseWriter, r *http.Request, c caller, req *exchangeRequest) (released, error) {
			rel, err := s.readToken(r, &c, &req.tokenRequest)
			if err != nil {
				return released{}, withMint(err, *req)
			}
			return rel, nil
		},
		encode: s.writeExchangeDoc,
	})
	if err != nil {
		return s.oauthError(err, req.method)
	}
	return nil
}

// exchangeRequest is a parsed token exchange.
type exchangeRequest struct {
	subjectToken string
	tokenRequest
	form   url.Values // the form body, as tokenForm read it
	method string     // how the client authenticated (for the Basic challenge)
}

// exchangeCaller authenticates the token endpoint's caller: the client
// first (an unauthenticated caller learns nothing else), then the target is
// read, then the user of the subject token.
func (s *Server) exchangeCaller(r *http.Request, req *exchangeRequest) (caller, error) {
	client, method, err := s.auth.AuthenticateTokenClient(r, req.form, s.TokenEndpoint())
	req.method = method
	if err != nil {
		s.sampleRefusal(r, clientauth.Client{}, err)
		return caller{}, err
	}
	parsed, err := parseExchange(req.form, s.publicURL)
	if err != nil {
		return caller{}, err
	}
	parsed.form, parsed.method = req.form, method
	*req = parsed
	if _, err := s.catalog.Get(req.provider); err != nil {
		return caller{}, problem.Detail(refusal.ErrTarget, "unknown provider %q", req.provider)
	}
	id, err := s.auth.Identify(r.Context(), client, req.subjectToken)
	if err != nil {
		s.sampleRefusal(r, client, err)
		return caller{}, err
	}
	return caller{client: client, id: id, user: identity.User{Issuer: id.Issuer, Subject: id.Subject}}, nil
}

// writeExchangeDoc is the token exchange's answer format (RFC 8693 §2.2.1).
func (s *Server) writeExchangeDoc(w http.ResponseWriter, rel released) error {
	cred := rel.cred
	doc := exchangeDoc{AccessToken: cred.AccessToken, IssuedTokenType: TokenTypeAccessToken, TokenType: cred.TokenType,
		Scope:   strings.Join(cred.Scopes, " "),
		Account: accountDoc{ID: rel.approval.ConnectionID, DisplayName: cred.DisplayName()}}
	if doc.TokenType == "" {
		doc.TokenType = "Bearer"
	}
	if !cred.Expiry.IsZero() {
		in := max(int64(cred.Expiry.Sub(s.now())/time.Second), 0)
		doc.ExpiresIn = &in
	}
	w.Header().Set("Pragma", "no-cache") // RFC 6749 §5.1, beside WriteJSON's Cache-Control: no-store
	web.WriteJSON(w, http.StatusOK, doc)
	return nil
}

// tokenForm reads the request's form body (RFC 6749 §3.2: POST,
// application/x-www-form-urlencoded, no parameter twice).
func tokenForm(r *http.Request) (url.Values, error) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		return nil, problem.Detail(problem.ErrInvalid, "the body must be application/x-www-form-urlencoded")
	}
	if err := r.ParseForm(); err != nil {
		return nil, problem.Detail(problem.ErrInvalid, "the form body cannot be read")
	}
	for k, vs := range r.PostForm {
		if len(vs) > 1 {
			kind := problem.ErrInvalid
			if k == "resource" || k == "audience" {
				kind = refusal.ErrTarget // RFC 8693 allows several; connectd releases one credential per request
			}
			return nil, problem.Detail(kind, "%s is given more than once", k)
		}
	}
	return r.PostForm, nil
}

// parseExchange checks the token exchange parameters and reads the target:
// audience "connectd:provider:<provider>[:<connection id>]" and/or resource
// "<public URL>/v1/connections/<provider>[?account=<connection id>]"; when
// both are given they must name the same.
func parseExchange(form url.Values, publicURL string) (exchangeRequest, error) {
	bad := func(format string, args ...any) (exchangeRequest, error) {
		return exchangeRequest{}, problem.Detail(problem.ErrInvalid, format, args...)
	}
	switch gt := form.Get("grant_type"); gt {
	case GrantTokenExchange:
	case "":
		return bad("grant_type is required")
	default:
		return exchangeRequest{}, problem.Detail(refusal.ErrGrantType, "the only grant_type is %s", GrantTokenExchange)
	}
	req := exchangeRequest{subjectToken: form.Get("subject_token")}
	if req.subjectToken == "" {
		return bad("subject_token is required: the user's MCP access token")
	}
	if t := form.Get("subject_token_type"); t != TokenTypeAccessToken {
		return bad("subject_token_type must be %s", TokenTypeAccessToken)
	}
	if t := form.Get("requested_token_type"); t != "" && t != TokenTypeAccessToken {
		return bad("requested_token_type must be %s (or absent)", TokenTypeAccessToken)
	}
	if form.Has("actor_token") || form.Has("actor_token_type") {
		return bad("actor_token is not supported: the client is the actor, authenticated as an OAuth client")
	}
	var targets [][2]string
	if a := form.Get("audience"); a != "" {
		rest, ok := strings.CutPrefix(a, AudiencePrefix)
		if !ok {
			return invalidTarget("audience must be %s<provider>[:<connection id>]", AudiencePrefix)
		}
		p, acct, _ := strings.Cut(rest, ":")
		targets = append(targets, [2]string{p, acct})
	}
	if res := form.Get("resource"); res != "" {
		u, err := url.Parse(res)
		base := publicURL + "/v1/connections/"
		if err != nil || u.Fragment != "" || !strings.HasPrefix(u.Scheme+"://"+u.Host+u.Path, base) {
			return invalidTarget("resource must be %s<provider>[?account=<connection id>]", base)
		}
		q := u.Query()
		if len(q) > 1 || len(q) == 1 && len(q["account"]) != 1 {
			return invalidTarget("resource takes only an account query parameter")
		}
		targets = append(targets, [2]string{strings.TrimPrefix(u.Scheme+"://"+u.Host+u.Path, base), q.Get("account")})
	}
	if len(targets) == 0 {
		return invalidTarget("name the provider: audience=%s<provider> or resource=%s/v1/connections/<provider>",
			AudiencePrefix, publicURL)
	}
	if len(targets) == 2 && targets[0] != targets[1] {
		return invalidTarget("audience and resource name different targets")
	}
	req.provider, req.account = targets[0][0], targets[0][1]
	if !names.ValidProvider(req.provider) {
		return invalidTarget("unknown provider %q", req.provider)
	}
	if req.account != "" && !vault.ValidID(req.account) {
		return invalidTarget("the account must be a connection id (cn_…)")
	}
	if sc := form.Get("scope"); sc != "" {
		req.required = dedupe(strings.Fields(sc))
		if err := validScopes(req.required); err != nil {
			return exchangeRequest{}, err
		}
	}
	return req, nil
}

func invalidTarget(format string, args ...any) (exchangeRequest, error) {
	return exchangeRequest{}, problem.Detail(refusal.ErrTarget, format, args...)
}

// withMint adds to an answer that asks the MCP server to send the user
// through a connect link (its row's mint) what it needs to mint that
// link: the POST /v1/elicitations body for this request.
func withMint(err error, req exchangeRequest) error {
	e := web.AsError(err)
	if !e.Mint() {
		return err
	}
	c := *e
	c.Fields = maps.Clone(e.Fields)
	if c.Fields == nil {
		c.Fields = map[string]any{}
	}
	mint := map[string]any{"provider": req.provider, "scopes": elicitation.NonNil(req.required)}
	if acct, ok := c.Fields["account"].(map[string]any); ok && acct["id"] != nil {
		mint["account"] = acct["id"] // the connection to authorize again
	} else if req.account != "" {
		mint["account"] = req.account
	}
	c.Fields["mint"] = mint
	return &c
}

// oauthError is err as the token endpoint answers it: the error table's
// answer in RFC 6749 §5.2 form (web.AsOAuthError), the Basic challenge to
// a refused client that used Basic.
func (s *Server) oauthError(err error, method string) error {
	return web.AsOAuthError(err, method == clientauth.AuthClientSecretBasic)
}

// metadata handles GET /.well-known/oauth-authorization-server: RFC 8414
// metadata of connectd's token endpoint. connectd has no authorization
// endpoint (users consent on connect pages, not through an OAuth
// authorization request), so it lists no response types.
func (s *Server) metadata(w http.ResponseWriter, r *http.Request) error {
	doc := map[string]any{
		"issuer":                                s.publicURL,
		"token_endpoint":                        s.TokenEndpoint(),
		"grant_types_supported":                 []string{GrantTokenExchange},
		"token_endpoint_auth_methods_supported": s.authMethods(),
		"token_endpoint_auth_signing_alg_values_supported": clientauth.AssertionAlgorithms(),
		"service_documentation":                            "https://github.com/connectd/connectd/blob/main/docs/api.md#token-exchange",
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("connect: metadata: %w", err)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "public, max-age=3600")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(append(body, '\n'))
	return nil
}

// authMethods are the token endpoint's client authentication methods.
func (s *Server) authMethods() []string {
	return []string{clientauth.AuthClientSecretBasic, clientauth.AuthClientSecretPost, clientauth.AuthPrivateKeyJWT}
}
