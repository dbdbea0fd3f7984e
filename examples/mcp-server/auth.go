package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/time/rate"
)

// allowedAlgs are the signature algorithms accepted on access tokens: never
// "none" and never HMAC (a shared secret would let any holder mint tokens).
var allowedAlgs = []string{"ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA"}

// extraToken is the TokenInfo.Extra key under which the verified raw token
// travels to the tool handler, which forwards it to connectd.
const extraToken = "access_token"

// verifier checks the MCP access tokens of this server's callers: RFC 9068
// JWTs from one issuer, for this server's resource.
type verifier struct {
	issuer   string
	resource string
	kf       keyfunc.Keyfunc
	skew     time.Duration
}

// discoverJWKS reads the issuer's OIDC discovery document (falling back to
// RFC 8414 metadata) and returns its jwks_uri, after checking that the
// document names exactly this issuer.
func discoverJWKS(ctx context.Context, hc *http.Client, issuer string) (string, error) {
	base := strings.TrimSuffix(issuer, "/")
	var lastErr error
	for _, u := range []string{base + "/.well-known/openid-configuration", base + "/.well-known/oauth-authorization-server"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return "", err
		}
		resp, err := hc.Do(req)
		if err != nil {
			lastErr = err
			continue
		}
		var m struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m)
		resp.Body.Close()
		switch {
		case resp.StatusCode != http.StatusOK:
			lastErr = fmt.Errorf("%s answered %d", u, resp.StatusCode)
			continue
		case err != nil:
			lastErr = fmt.Errorf("%s: %w", u, err)
			continue
		case m.Issuer != issuer:
			return "", fmt.Errorf("discovery document at %s names another issuer", u)
		case m.JWKSURI == "":
			return "", fmt.Errorf("discovery document at %s has no jwks_uri", u)
		}
		return m.JWKSURI, nil
	}
	return "", fmt.Errorf("discover issuer %s: %w", issuer, lastErr)
}

func newVerifier(ctx context.Context, cfg Config, logger *slog.Logger) (*verifier, error) {
	jwksURL := cfg.JWKSURL
	if jwksURL == "" {
		var err error
		if jwksURL, err = discoverJWKS(ctx, cfg.HTTPClient, cfg.Issuer); err != nil {
			return nil, err
		}
	}
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{jwksURL}, keyfunc.Override{
		Client:      cfg.HTTPClient,
		HTTPTimeout: 10 * time.Second,
		// A kid the cache does not know (the issuer rotated) refetches the
		// keys, at most every 30 s.
		RefreshUnknownKID: rate.NewLimiter(rate.Every(30*time.Second), 1),
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(ctx context.Context, err error) {
				logger.WarnContext(ctx, "JWKS refresh failed", slog.String("jwks_url", u), slog.Any("error", err))
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", jwksURL, err)
	}
	return &verifier{issuer: cfg.Issuer, resource: cfg.Resource, kf: kf, skew: 30 * time.Second}, nil
}

// verify is an auth.TokenVerifier. The user is (iss, sub); the raw token is
// kept in TokenInfo.Extra for the tool handler to forward to connectd.
func (v *verifier) verify(ctx context.Context, raw string, _ *http.Request) (*auth.TokenInfo, error) {
	var claims struct {
		jwt.RegisteredClaims
		Scope string `json:"scope"`
	}
	tok, err := jwt.ParseWithClaims(raw, &claims, v.kf.KeyfuncCtx(ctx),
		jwt.WithValidMethods(allowedAlgs),
		jwt.WithIssuer(v.issuer),
		jwt.WithAudience(v.resource), // no token passthrough: only tokens issued for this server
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(v.skew),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", auth.ErrInvalidToken, err)
	}
	// RFC 9068: an access token says so, so that an ID token never passes
	// for one.
	if typ, _ := tok.Header["typ"].(string); !strings.EqualFold(typ, "at+jwt") && !strings.EqualFold(typ, "application/at+jwt") {
		return nil, fmt.Errorf("%w: not an RFC 9068 access token (typ %q)", auth.ErrInvalidToken, typ)
	}
	if claims.Subject == "" {
		return nil, fmt.Errorf("%w: no sub", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{
		Scopes:     strings.Fields(claims.Scope),
		Expiration: claims.ExpiresAt.Time,
		// The SDK binds a stateful MCP session to this value: another user
		// cannot use the session id.
		UserID: claims.Issuer + " " + claims.Subject,
		Extra:  map[string]any{extraToken: raw, "iss": claims.Issuer, "sub": claims.Subject},
	}, nil
}

// caller is the verified user of a tool call.
type caller struct {
	token   string // the raw MCP access token, forwarded to connectd as X-User-Token
	subject string
}

var errNoCaller = errors.New("no verified caller: the MCP endpoint must sit behind bearer authentication")

func callerOf(ti *auth.TokenInfo) (caller, error) {
	if ti == nil {
		return caller{}, errNoCaller
	}
	raw, _ := ti.Extra[extraToken].(string)
	sub, _ := ti.Extra["sub"].(string)
	if raw == "" {
		return caller{}, errNoCaller
	}
	return caller{token: raw, subject: sub}, nil
}
