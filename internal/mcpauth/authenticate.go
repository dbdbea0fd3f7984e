package mcpauth

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/connectd/connectd/internal/web"
)

// UserTokenHeader carries the user's MCP access token on /v1 requests; the
// Authorization header carries the client key.
const UserTokenHeader = "X-User-Token"

// Authenticator authenticates /v1 API requests: the calling MCP server by its
// client key, then the user by their access token, which must have been issued
// for one of that client's resources.
type Authenticator struct {
	clients  *Clients
	verifier *Verifier
}

// NewAuthenticator returns an Authenticator over the client registry and the
// token verifier.
func NewAuthenticator(clients *Clients, verifier *Verifier) *Authenticator {
	return &Authenticator{clients: clients, verifier: verifier}
}

// AuthenticateClient authenticates only the calling MCP server. Errors are
// *web.Error values ready for web.API (see APIError).
func (a *Authenticator) AuthenticateClient(r *http.Request) (Client, error) {
	key, ok := web.Bearer(r.Header.Get("Authorization"))
	if !ok {
		return Client{}, APIError(ErrMissingClientKey)
	}
	c, err := a.clients.Authenticate(r.Context(), key)
	if err != nil {
		return Client{}, APIError(err)
	}
	return c, nil
}

// Authenticate authenticates the calling MCP server and the user it acts for.
// The client key is checked first, so an unauthenticated caller learns nothing
// about tokens; the user token must carry one of the client's resources in
// aud. Errors are *web.Error values ready for web.API (see APIError). When the
// client key is good but the user token is not, the client is returned with
// the error, so the refusal can be attributed to it.
func (a *Authenticator) Authenticate(r *http.Request) (Client, Identity, error) {
	c, err := a.AuthenticateClient(r)
	if err != nil {
		return Client{}, Identity{}, err
	}
	raw := strings.TrimSpace(r.Header.Get(UserTokenHeader))
	if raw == "" {
		return c, Identity{}, APIError(ErrMissingUserToken)
	}
	id, err := a.verifier.VerifyAccessToken(r.Context(), raw, c.Resources)
	if err != nil {
		return c, Identity{}, APIError(err)
	}
	return c, id, nil
}

// Challenges sent in WWW-Authenticate (RFC 6750 §3): no error code when no
// credentials were sent at all.
const (
	challengeMissing = `Bearer realm="connectd"`
	challengeInvalid = `Bearer realm="connectd", error="invalid_token"`
)

// APIError turns an authentication error into the *web.Error the API answers
// with; errors it does not know are returned unchanged (a 500). The codes are
// stable and documented in docs/identity.md:
//
//	401 invalid_client       client key missing, malformed, unknown, past its overlap,
//	                         or its client is disabled (the description says which)
//	401 missing_user_token   no X-User-Token
//	401 token_expired        exp passed
//	401 token_not_yet_valid  nbf or iat in the future
//	401 untrusted_issuer     iss is not a trusted issuer
//	401 wrong_audience       aud is not one of the client's resources (token passthrough)
//	401 invalid_token        anything else: malformed (claims not valid UTF-8 JSON included),
//	                         alg, typ, signature, unknown key; or sub/iss is not an
//	                         identity connectd accepts (CheckSubject; the description says so)
//	503 jwks_unavailable     the issuer's discovery document or JWKS could not be fetched,
//	                         or the token's kid is unknown and the JWKS was fetched too
//	                         recently to fetch it again; Retry-After says when to retry
func APIError(err error) error {
	invalid := func(code, desc string) *web.Error {
		return &web.Error{Status: http.StatusUnauthorized, Code: code, Description: desc, Err: err,
			Header: http.Header{"Www-Authenticate": {challengeInvalid}}}
	}
	switch {
	case errors.Is(err, ErrMissingClientKey):
		return &web.Error{Status: http.StatusUnauthorized, Code: "invalid_client", Err: err,
			Description: "an Authorization: Bearer client key is required",
			Header:      http.Header{"Www-Authenticate": {challengeMissing}}}
	case errors.Is(err, ErrInvalidClientKey):
		return invalid("invalid_client", "the client key is not valid")
	case errors.Is(err, ErrClientDisabled):
		return invalid("invalid_client", "the client is disabled")
	case errors.Is(err, ErrMissingUserToken):
		return &web.Error{Status: http.StatusUnauthorized, Code: "missing_user_token", Err: err,
			Description: "the user's access token is required in " + UserTokenHeader,
			Header:      http.Header{"Www-Authenticate": {challengeMissing}}}
	case errors.Is(err, ErrIssuerUnavailable):
		return &web.Error{Status: http.StatusServiceUnavailable, Code: "jwks_unavailable", Err: err,
			Description: "the token issuer's keys could not be fetched; retry later",
			Header:      http.Header{"Retry-After": {retryAfter(err)}}}
	case errors.Is(err, ErrTokenExpired):
		return invalid("token_expired", "the user token has expired")
	case errors.Is(err, ErrTokenNotYetValid):
		return invalid("token_not_yet_valid", "the user token is not valid yet")
	case errors.Is(err, ErrUntrustedIssuer):
		return invalid("untrusted_issuer", "the user token's issuer is not trusted")
	case errors.Is(err, ErrWrongAudience):
		return invalid("wrong_audience", "the user token was not issued for this client's resource")
	case errors.Is(err, ErrIdentity):
		return invalid("invalid_token", "the user token's sub or iss is not an identity connectd accepts")
	case errors.Is(err, ErrInvalidToken):
		return invalid("invalid_token", "the user token is not valid")
	default:
		return err
	}
}

// retryAfter is the Retry-After of a 503 for err: in whole seconds (at least
// one) when err says when its keys can be fetched again, else 30.
func retryAfter(err error) string {
	var u *unavailableError
	if !errors.As(err, &u) {
		return "30"
	}
	return strconv.Itoa(int(max(1, (u.retry+time.Second-1)/time.Second))) // rounded up
}
