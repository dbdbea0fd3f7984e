package api

import (
	"net/http"
	"strings"
	"time"

	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/release"
	"github.com/connectd/connectd/internal/web"
)

// The token read (GET /v1/connections/{provider}/token) and the token
// exchange (POST /oauth/token, exchange.go) are one operation, readToken,
// in two answer formats: each route decodes its request and authenticates
// its caller its own way, then both ask readToken and encode what it
// released (writeTokenDoc, writeExchangeDoc).

// tokenRequest is what a token read or exchange asks for: the provider, the
// connection (account, "" for the client's only one there) and the scopes
// the token must carry.
type tokenRequest struct {
	provider string
	account  string
	required []string
}

// readToken is the release of a raw credential to client c, for the
// token read and token exchange alike (release.Read: refused to a
// proxy-only client), the read sampled into the audit trail naming the
// connection.
func (s *Server) readToken(r *http.Request, c *caller, req *tokenRequest) (released, error) {
	rel, err := s.release(r, c, release.Read, req.provider, req.account, req.required)
	if err != nil {
		return released{}, err
	}
	s.sampleRead(r, c, req.provider, rel.approval.ConnectionID)
	return rel, nil
}

type tokenDoc struct {
	Provider    string     `json:"provider"`
	Account     accountDoc `json:"account"`
	Kind        string     `json:"kind"`
	TokenType   string     `json:"token_type"`
	AccessToken string     `json:"access_token"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	Scopes      []string   `json:"scopes"`
}

// token handles GET /v1/connections/{provider}/token[?scopes=a,b][&account=<id>].
func (s *Server) token(w http.ResponseWriter, r *http.Request) error {
	return serveJSON(w, r, &tokenRequest{}, endpoint[tokenRequest, released]{
		decode: decodeTokenRead,
		caller: authenticated[tokenRequest](s),
		call: func(_ http.ResponseWriter, r *http.Request, c caller, req *tokenRequest) (released, error) {
			return s.readToken(r, &c, req)
		},
		encode: writeTokenDoc,
	})
}

// decodeTokenRead reads a token read's provider, account and scopes (the
// scopes checked before the caller is authenticated).
func decodeTokenRead(r *http.Request, req *tokenRequest) error {
	q := r.URL.Query() // parsed once: each Query() call parses the query string anew
	req.provider, req.account = r.PathValue("provider"), q.Get("account")
	if q := q.Get("scopes"); q != "" {
		req.required = dedupe(strings.FieldsFunc(q, func(r rune) bool { return r == ',' || r == ' ' }))
		if err := validScopes(req.required); err != nil {
			return err
		}
	}
	return nil
}

// writeTokenDoc is the token read's answer format.
func writeTokenDoc(w http.ResponseWriter, rel released) error {
	cred := rel.cred
	doc := tokenDoc{Provider: rel.provider, Account: accountDoc{ID: rel.approval.ConnectionID, DisplayName: cred.DisplayName()},
		Kind: string(rel.info.Kind), TokenType: cred.TokenType,
		AccessToken: cred.AccessToken, Scopes: elicitation.NonNil(cred.Scopes)}
	if doc.TokenType == "" {
		doc.TokenType = "Bearer"
	}
	if !cred.Expiry.IsZero() {
		t := cred.Expiry.UTC()
		doc.ExpiresAt = &t
	}
	web.WriteJSON(w, http.StatusOK, doc)
	return nil
}
