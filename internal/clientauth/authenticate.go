package clientauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/connectd/connectd/internal/mcpauth"
)

// OrgTrust says whether an organization's MCP servers accept user tokens of
// the deployment's issuers besides its own (package org's Store: always
// for the default organization, answered from memory when warm).
type OrgTrust interface {
	DeploymentIssuers(ctx context.Context, org string) (bool, error)
}

// Authenticator authenticates /v1 API requests: the calling MCP server by its
// client key, then the user by their access token, which must have been issued
// for one of that client's resources by an issuer that client's organization
// trusts.
type Authenticator struct {
	clients     *Clients
	verifier    *mcpauth.Verifier
	orgs        OrgTrust
	origin      string // connectd's public origin: DPoP proofs' htu is it and the path
	apiAudience string // the aud of a client assertion on /v1: origin + "/v1"
}

// NewAuthenticator returns an Authenticator over the client registry, the
// token verifier and the organizations' trust (nil: every organization
// accepts the deployment's issuers). publicURL is connectd's public origin:
// a client assertion presented as the /v1 bearer must carry aud
// <publicURL>/v1, a DPoP proof htu <publicURL><path>; "" refuses assertions
// and DPoP there.
func NewAuthenticator(clients *Clients, verifier *mcpauth.Verifier, orgs OrgTrust, publicURL string) *Authenticator {
	a := &Authenticator{clients: clients, verifier: verifier, orgs: orgs, origin: strings.TrimRight(publicURL, "/")}
	if a.origin != "" {
		a.apiAudience = a.origin + "/v1"
	}
	return a
}

// AuthenticateClient authenticates only the calling MCP server, by the
// Authorization credential — "Bearer <credential>", or "DPoP <credential>"
// (RFC 9449 §7.1) with a DPoP proof — its client key (cks_…), or a client
// assertion (private_key_jwt: a JWT for the /v1 audience, its jti
// single-use). A DPoP proof is checked when the client requires DPoP or the
// DPoP scheme is used; its ath must be the hash of the credential. Errors
// are this package's sentinels (ErrMissingClientKey, ErrInvalidClientKey,
// ErrClientDisabled, ErrInvalidAssertion, ErrMissingDPoP, ErrInvalidDPoP),
// wrapped; internal/web's error table answers them.
func (a *Authenticator) AuthenticateClient(r *http.Request) (Client, error) {
	return a.authenticateClient(r, true)
}

// authenticateClient is AuthenticateClient; dpop says whether the request's
// DPoP proof is checked (not when the request is checked again: its proof's
// jti is spent).
func (a *Authenticator) authenticateClient(r *http.Request, dpop bool) (Client, error) {
	key, scheme, ok := credential(r.Header.Get("Authorization"))
	if !ok {
		return Client{}, ErrMissingClientKey
	}
	var c Client
	var err error
	if LooksLikeAssertion(key) && strings.HasPrefix(r.Header.Get(mcpauth.UserTokenHeader), KeyPrefix) {
		return Client{}, ErrSwappedHeaders // a JWT where the key goes, a key where the user token goes
	}
	if LooksLikeAssertion(key) {
		if a.apiAudience == "" {
			return Client{}, ErrInvalidClientKey
		}
		c, err = a.clients.AuthenticateAssertion(r.Context(), key, a.apiAudience)
	} else {
		c, err = a.clients.Authenticate(r.Context(), key)
	}
	if err != nil {
		return Client{}, err
	}
	if dpop && (c.DPoPRequired || scheme == schemeDPoP) {
		if a.origin == "" {
			return Client{}, ErrInvalidDPoP
		}
		if err := a.clients.VerifyDPoP(r.Context(), c, r.Header.Values(DPoPHeader), key, r.Method,
			a.origin+r.URL.EscapedPath()); err != nil {
			return Client{}, err
		}
	}
	return c, nil
}

// Recheck tells whether the client that r authenticated as would still
// be accepted (by id), for a request that runs long (a long-poll, a
// proxied call) after its client changed: a client key is authenticated again; an
// assertion, whose jti is spent, is not presented twice — the client must
// still be enabled and still have keys for private_key_jwt. A DPoP proof is
// not checked again either (its jti is spent too).
func (a *Authenticator) Recheck(r *http.Request, clientID string) error {
	return a.recheck(r, clientID)
}

// Refused reports whether err says the client's credentials are refused
// now (no key, a bad or ended key, a disabled client, an assertion that no
// longer verifies) — not that they could not be checked (the database
// busy or down): a held request ends on the first, never on the second.
func Refused(err error) bool {
	return errors.Is(err, ErrMissingClientKey) || errors.Is(err, ErrInvalidClientKey) ||
		errors.Is(err, ErrClientDisabled) || errors.Is(err, ErrInvalidAssertion) || errors.Is(err, ErrSwappedHeaders)
}

func (a *Authenticator) recheck(r *http.Request, clientID string) error {
	if key, _, ok := credential(r.Header.Get("Authorization")); !ok || !LooksLikeAssertion(key) {
		_, err := a.authenticateClient(r, false)
		return err
	}
	now, err := a.clients.Get(r.Context(), clientID)
	switch {
	case errors.Is(err, ErrClientNotFound):
		return ErrInvalidAssertion
	case err != nil:
		return err
	case now.Disabled:
		return ErrClientDisabled
	case now.JWKSURL == "" && len(now.JWKS) == 0:
		return fmt.Errorf("%w: the client no longer has keys for private_key_jwt", ErrInvalidAssertion)
	}
	return nil
}

// Authenticate authenticates the calling MCP server and the user it acts for.
// The client key is checked first, so an unauthenticated caller learns nothing
// about tokens; the user token must carry one of the client's resources in
// aud and be issued by an issuer the client's organization trusts
// (Identify). Errors are this package's sentinels, wrapped (internal/web's error
// table answers them; docs/identity.md lists the codes). When the
// client key is good but the user token is not, the client is returned with
// the error, so the refusal can be attributed to it.
func (a *Authenticator) Authenticate(r *http.Request) (Client, mcpauth.Identity, error) {
	c, err := a.AuthenticateClient(r)
	if err != nil {
		return Client{}, mcpauth.Identity{}, err
	}
	id, err := a.Identify(r.Context(), c, r.Header.Get(mcpauth.UserTokenHeader))
	if err != nil {
		return c, mcpauth.Identity{}, err
	}
	return c, id, nil
}

// The authorization schemes a client credential travels in.
const (
	schemeBearer = "Bearer"
	schemeDPoP   = "DPoP" // RFC 9449 §7.1: with a DPoP proof
)

// ClientCredential extracts the client credential of an Authorization
// header, "Bearer <credential>" or "DPoP <credential>": how a client key or
// assertion travels (the rate limiter keys /v1 budgets by it too).
func ClientCredential(h string) (string, bool) {
	cred, _, ok := credential(h)
	return cred, ok
}

// credential is ClientCredential, with the scheme it came in.
func credential(h string) (cred, scheme string, ok bool) {
	scheme, cred, ok = strings.Cut(h, " ")
	switch {
	case !ok:
		return "", "", false
	case strings.EqualFold(scheme, schemeBearer):
		scheme = schemeBearer
	case strings.EqualFold(scheme, schemeDPoP):
		scheme = schemeDPoP
	default:
		return "", "", false
	}
	cred = strings.TrimSpace(cred)
	return cred, scheme, cred != ""
}
