package server

import (
	"context"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/session"
)

// identity wires who-is-calling: user-token verification, browser login,
// sessions and MCP-server client keys. Every issuer, a development one
// included, comes from Identity.Issuers: the development identity provider
// is the demo's (cmd/connectd-demo), never part of connectd (issue 23 §5).
type identity struct {
	verifier    *mcpauth.Verifier
	sessions    *session.Store
	sessionKeys []session.Key // as configured, or the ephemeral dev key
	login       *mcpauth.Login
	clients     *clientauth.Clients
	auth        *clientauth.Authenticator
}

// newIdentity builds the identity services. orgs is where the
// organizations' own issuers are (the verifier's IssuerSource) and whether
// each accepts the deployment's issuers (the /v1 authenticator's OrgTrust).
func newIdentity(ctx context.Context, cfg Config, orgs *org.Store) (*identity, error) {
	ic, logger := cfg.Identity, cfg.Logger
	client, err := outboundClient(cfg)
	if err != nil {
		return nil, err
	}
	id := &identity{}
	if len(ic.Issuers) == 0 {
		logger.WarnContext(ctx, "no trusted issuers configured (CONNECTD_ISSUERS): user tokens and logins will be refused")
	}

	keys := ic.SessionKeys
	if len(keys) == 0 {
		if !cfg.Dev {
			return nil, &ConfigError{Var: "CONNECTD_SESSION_KEYS",
				Problem: "is required (comma-separated, newest first; generate one with: openssl rand -base64 64 | tr -d '\\n')"}
		}
		keys = []session.Key{session.NewKey()}
		logger.WarnContext(ctx, "CONNECTD_SESSION_KEYS not set: using an ephemeral session key (dev mode); sessions end when connectd stops")
	}
	id.sessionKeys = keys
	sessions, err := session.New(session.Config{Pool: cfg.Pool, Keys: keys, MaxAge: ic.SessionMaxAge,
		IdleTimeout: ic.SessionIdleTimeout, CacheTTL: ic.SessionCacheTTL, CacheSize: cfg.Cache.Size})
	if err != nil {
		return nil, err
	}
	id.verifier, err = mcpauth.NewVerifier(mcpauth.VerifierConfig{
		Issuers:    ic.Issuers,
		Source:     orgs,
		HTTPClient: client,
		AllowHTTP:  cfg.Dev,
		Skew:       ic.TokenSkew,
		Logger:     logger,
	})
	if err != nil {
		return nil, &ConfigError{Var: "CONNECTD_ISSUERS", Problem: err.Error()}
	}
	login, err := mcpauth.NewLogin(mcpauth.LoginConfig{
		Pool:        cfg.Pool,
		Verifier:    id.verifier,
		RedirectURL: cfg.PublicURL.String() + "/login/callback",
		Logger:      logger,
		Now:         cfg.Now,
	})
	if err != nil {
		id.verifier.Close()
		return nil, err
	}
	id.sessions, id.login = sessions, login
	id.clients = clientauth.NewClients(clientauth.ClientsConfig{Pool: cfg.Pool, AllowHTTP: cfg.Dev, Logger: logger, HTTPClient: client, Skew: ic.TokenSkew,
		CacheTTL: cfg.Cache.ClientKeyTTL, CacheSize: cfg.Cache.Size, Now: cfg.Now})
	id.auth = clientauth.NewAuthenticator(id.clients, id.verifier, orgs, cfg.PublicURL.String())
	return id, nil
}

// Close stops background JWKS refreshes.
func (id *identity) Close() { id.verifier.Close() }
