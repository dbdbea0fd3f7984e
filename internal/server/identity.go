package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"net/http"
	"slices"

	"github.com/connectd/connectd/internal/admin"
	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/web"
)

// devIdPPath is where the development identity provider is mounted.
const devIdPPath = "/dev/idp"

// identity wires who-is-calling: user-token verification, browser login,
// sessions and, in dev mode, the development identity provider.
type identity struct {
	verifier    *mcpauth.Verifier
	sessions    *session.Store
	sessionKeys []session.Key // as configured, or the ephemeral dev key
	login       *mcpauth.Login
	clients     *mcpauth.Clients
	auth        *mcpauth.Authenticator
	devIdP      *devidp.Provider
}

// newIdentity builds the identity services.
func newIdentity(ctx context.Context, cfg Config) (*identity, error) {
	ic, logger := cfg.Identity, cfg.Logger
	issuers := slices.Clone(ic.Issuers)
	self := "" // the dev IdP is fetched from connectd's own listener
	if ic.DevIdP {
		self = cfg.ListenAddr
	}
	client, err := outboundClient(cfg, self)
	if err != nil {
		return nil, err
	}
	id := &identity{}
	if ic.DevIdP {
		issuerURL := cfg.PublicURL.String() + devIdPPath
		var b [32]byte
		_, _ = rand.Read(b[:])
		secret := base64.RawURLEncoding.EncodeToString(b[:])
		p, err := devidp.New(devidp.Config{
			Issuer: issuerURL,
			Clients: []devidp.Client{{ID: "connectd", Secret: secret,
				RedirectURIs: []string{cfg.PublicURL.String() + "/login/callback", cfg.PublicURL.String() + admin.CallbackPath}}},
			Logger: logger,
		})
		if err != nil {
			return nil, err
		}
		id.devIdP = p
		issuers = append(issuers, mcpauth.Issuer{ID: "dev", URL: issuerURL, Login: true, ClientID: "connectd", ClientSecret: secret})
		logger.WarnContext(ctx, "development identity provider enabled: anyone can sign in as a demo user",
			slog.String("issuer", issuerURL))
	}
	if len(issuers) == 0 {
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
		Issuers:    issuers,
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
	id.clients = mcpauth.NewClients(mcpauth.ClientsConfig{Pool: cfg.Pool, AllowHTTP: cfg.Dev, Logger: logger,
		CacheTTL: cfg.Cache.ClientKeyTTL, CacheSize: cfg.Cache.Size, Now: cfg.Now})
	id.auth = mcpauth.NewAuthenticator(id.clients, id.verifier)
	return id, nil
}

// routes registers the development identity provider, when enabled.
func (id *identity) routes(mux *web.Mux) {
	if id.devIdP != nil {
		mux.Handle(web.Route{Pattern: devIdPPath + "/", Kind: web.KindPage, Class: web.ClassLogin,
			Handler: http.StripPrefix(devIdPPath, id.devIdP.Handler())})
	}
}

// Close stops background JWKS refreshes.
func (id *identity) Close() { id.verifier.Close() }
