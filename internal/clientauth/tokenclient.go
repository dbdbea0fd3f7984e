package clientauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/names"
)

// Client authentication methods at connectd's OAuth token endpoint (RFC 6749
// §2.3.1, OIDC Core §9), as RFC 8414 metadata names them.
const (
	AuthClientSecretBasic = "client_secret_basic"
	AuthClientSecretPost  = "client_secret_post"
	AuthPrivateKeyJWT     = "private_key_jwt"
)

// AssertionType is the client_assertion_type of an RFC 7523 client
// assertion.
const AssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// ErrAuthMethods means a token request used more than one way of client
// authentication (RFC 6749 §2.3: a client MUST NOT use more than one), or
// an unknown client_assertion_type: invalid_request, not invalid_client.
var ErrAuthMethods = errors.New("clientauth: more than one client authentication method, or an unknown one")

// AuthenticateTokenClient authenticates the client of a request to the
// OAuth token endpoint from its Authorization: Basic header
// (client_secret_basic: client id and client key, each form-urlencoded),
// the client_id and client_secret form fields (client_secret_post), or a
// client assertion (private_key_jwt, checked against audience: the token
// endpoint's URL). The client secret is the client's key (cks_…); a
// client_id, when given, must be the id of the client that key or assertion
// belongs to. It returns the method used, so a refusal of Basic can carry
// its challenge. Errors are the sentinels of AuthenticateClient, and
// ErrAuthMethods.
func (a *Authenticator) AuthenticateTokenClient(r *http.Request, form url.Values, audience string) (Client, string, error) {
	ctx := r.Context()
	var methods []string
	basicID, basicSecret, basic := r.BasicAuth()
	if basic {
		methods = append(methods, AuthClientSecretBasic)
	} else if r.Header.Get("Authorization") != "" {
		return Client{}, "", fmt.Errorf("%w: the token endpoint takes Authorization: Basic only", ErrInvalidClientKey)
	}
	if form.Has("client_secret") {
		methods = append(methods, AuthClientSecretPost)
	}
	if form.Has("client_assertion") || form.Has("client_assertion_type") {
		if form.Get("client_assertion_type") != AssertionType {
			return Client{}, "", fmt.Errorf("%w: client_assertion_type must be %s", ErrAuthMethods, AssertionType)
		}
		methods = append(methods, AuthPrivateKeyJWT)
	}
	switch len(methods) {
	case 0:
		return Client{}, "", ErrMissingClientKey
	case 1:
	default:
		return Client{}, methods[0], fmt.Errorf("%w: %s", ErrAuthMethods, strings.Join(methods, ", "))
	}
	method := methods[0]
	var (
		c   Client
		err error
		id  = form.Get("client_id")
	)
	switch method {
	case AuthClientSecretBasic:
		// RFC 6749 §2.3.1: both are form-urlencoded before Base64.
		var err1, err2 error
		if basicID, err1 = url.QueryUnescape(basicID); err1 == nil {
			basicSecret, err2 = url.QueryUnescape(basicSecret)
		}
		if err1 != nil || err2 != nil {
			return Client{}, method, fmt.Errorf("%w: the Basic credentials are not form-urlencoded", ErrInvalidClientKey)
		}
		if basicID == "" {
			return Client{}, method, fmt.Errorf("%w: the Basic user name must be the client id", ErrInvalidClientKey)
		}
		if id != "" && id != basicID {
			return Client{}, method, fmt.Errorf("%w: client_id differs from the Basic user name", ErrInvalidClientKey)
		}
		id = basicID
		c, err = a.clients.Authenticate(ctx, basicSecret)
	case AuthClientSecretPost:
		if id == "" {
			return Client{}, method, fmt.Errorf("%w: client_secret_post needs client_id", ErrInvalidClientKey)
		}
		c, err = a.clients.Authenticate(ctx, form.Get("client_secret"))
	case AuthPrivateKeyJWT:
		c, err = a.clients.AuthenticateAssertion(ctx, form.Get("client_assertion"), audience)
	}
	if err != nil {
		return Client{}, method, err
	}
	if id != "" && id != c.ID {
		return Client{}, method, fmt.Errorf("%w: the credentials are not client %s's", ErrInvalidClientKey, id)
	}
	// A client that must prove possession of its key (DPoP on /v1) does
	// so here with its assertion: its client key alone is worth nothing.
	if c.DPoPRequired && method != AuthPrivateKeyJWT {
		return Client{}, method, fmt.Errorf("%w: this client must use private_key_jwt", ErrInvalidClientKey)
	}
	return c, method, nil
}

// Identify verifies raw, a user's MCP access token, for client c: what
// Authenticate checks of X-User-Token, and of a token that arrives another
// way (an RFC 8693 subject_token) — the one rule of whose tokens a client
// accepts. aud must name one of c's resources, and the issuer must be one
// c's organization trusts: one of its own, or a deployment issuer while the
// organization accepts them (OrgTrust; the default organization always
// does). Errors are the user-token sentinels; ErrUntrustedIssuer for
// another organization's issuer.
func (a *Authenticator) Identify(ctx context.Context, c Client, raw string) (mcpauth.Identity, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return mcpauth.Identity{}, mcpauth.ErrMissingUserToken
	}
	org, deployment := c.Org, true
	if org == "" {
		org = names.DefaultOrg
	}
	if a.orgs != nil && org != names.DefaultOrg {
		var err error
		if deployment, err = a.orgs.DeploymentIssuers(ctx, org); err != nil {
			return mcpauth.Identity{}, fmt.Errorf("clientauth: the issuers organization %s trusts: %w", org, err)
		}
	}
	return a.verifier.VerifyAccessTokenIn(ctx, raw, c.Resources, org, deployment)
}
