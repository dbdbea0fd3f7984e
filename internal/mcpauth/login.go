package mcpauth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/oauth2"

	"github.com/connectd/connectd/internal/egress"
)

// MaxLoginStateTTL is the longest a login may take between redirect and
// callback.
const MaxLoginStateTTL = 10 * time.Minute

// MinBindingBytes is the least entropy accepted as a browser's state-binding
// secret.
const MinBindingBytes = 32

// LoginConfig configures the OIDC relying party.
type LoginConfig struct {
	Pool     *pgxpool.Pool
	Verifier *Verifier // issuers, discovery, JWKS and the outbound HTTP client
	// RedirectURL is connectd's callback, registered at every issuer:
	// <public URL>/login/callback.
	RedirectURL string
	// StateTTL is how long a login may take (default and maximum 10 minutes).
	StateTTL time.Duration
	Now      func() time.Time
	Logger   *slog.Logger
}

// Login is connectd's OIDC relying party for browser login at the MCP
// authorization servers: authorization code flow with PKCE S256 and a nonce.
//
// A login's state is a fresh 256-bit random value; the database keeps only its
// SHA-256 (table login_states) together with the SHA-256 of the browser's
// state-binding secret. The PKCE verifier and the nonce are derived from the
// binding secret and the state with HMAC-SHA256 and stored nowhere: the state
// alone (seen in URLs) or the database alone is not enough to redeem a code.
type Login struct {
	pool     *pgxpool.Pool
	verifier *Verifier
	redirect string
	ttl      time.Duration
	now      func() time.Time
	logger   *slog.Logger

	mu        sync.Mutex
	lastSweep time.Time
}

// NewLogin returns the relying party.
func NewLogin(cfg LoginConfig) (*Login, error) {
	if cfg.Pool == nil || cfg.Verifier == nil {
		return nil, errors.New("mcpauth: NewLogin needs a pool and a verifier")
	}
	if err := egress.CheckURL(cfg.RedirectURL, cfg.Verifier.allowHTTP); err != nil {
		return nil, fmt.Errorf("mcpauth: redirect URL %w", err)
	}
	l := &Login{pool: cfg.Pool, verifier: cfg.Verifier, redirect: cfg.RedirectURL, ttl: cfg.StateTTL,
		now: cfg.Now, logger: cfg.Logger}
	if l.ttl <= 0 || l.ttl > MaxLoginStateTTL {
		l.ttl = MaxLoginStateTTL
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.logger == nil {
		l.logger = slog.New(slog.DiscardHandler)
	}
	return l, nil
}

// Issuers lists the deployment issuers browsers may log in at (the
// chooser's); an organization's own are not listed, but Start goes to one
// by id or URL.
func (l *Login) Issuers() []Issuer {
	var out []Issuer
	for _, is := range l.verifier.Issuers() {
		if is.Login {
			out = append(out, is)
		}
	}
	return out
}

const (
	insertStateSQL  = `INSERT INTO login_states (state_hash, binding_hash, issuer, return_to, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)`
	consumeStateSQL = `DELETE FROM login_states WHERE state_hash = $1 RETURNING binding_hash, issuer, return_to, expires_at`
	sweepStatesSQL  = `DELETE FROM login_states WHERE expires_at <= $1`
)

// Start begins a login at the issuer named by idOrURL — a deployment
// issuer, else an organization's (Verifier.LookupIn) — and returns the
// authorization URL to redirect the browser to. binding is the browser's
// state-binding secret (from its cookie); returnTo is stored opaquely and
// handed back by Finish (the caller validates it, both times). switching:
// the user signed out of connectd to continue as another account, and the
// issuer is asked to let them choose (Issuer.SwitchPrompt).
func (l *Login) Start(ctx context.Context, idOrURL, returnTo string, binding []byte, switching bool) (string, error) {
	st, _, err := l.verifier.resolve(ctx, idOrURL)
	switch {
	case errors.Is(err, ErrUntrustedIssuer):
		return "", ErrUnknownIssuer
	case err != nil:
		return "", err
	case !st.cfg.Login:
		return "", ErrUnknownIssuer
	}
	is := st.cfg
	if len(binding) < MinBindingBytes {
		return "", errors.New("mcpauth: state-binding secret too short")
	}
	if err := l.verifier.ready(ctx, st); err != nil {
		return "", err
	}
	if st.meta.AuthorizationEndpoint == "" || st.meta.TokenEndpoint == "" || !supportsS256(st.meta) {
		return "", fmt.Errorf("%w: issuer %s lacks an endpoint or PKCE S256", ErrIssuerUnavailable, is.ID)
	}
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms.
	state := base64.RawURLEncoding.EncodeToString(b[:])
	stateHash, bindingHash := sha256.Sum256([]byte(state)), sha256.Sum256(binding)
	now := l.now().UTC()
	if _, err := l.pool.Exec(ctx, insertStateSQL, stateHash[:], bindingHash[:], is.URL, returnTo, now, now.Add(l.ttl)); err != nil {
		return "", fmt.Errorf("mcpauth: store login state: %w", err)
	}
	l.maybeSweep(ctx, now)
	opts := []oauth2.AuthCodeOption{
		oauth2.S256ChallengeOption(derive(binding, "pkce", state)),
		oauth2.SetAuthURLParam("nonce", derive(binding, "nonce", state)),
	}
	if p := is.switchPrompt(); switching && p != "" {
		opts = append(opts, oauth2.SetAuthURLParam("prompt", p))
	}
	return l.oauth2Config(st).AuthCodeURL(state, opts...), nil
}

// Callback is what the browser brought back to /login/callback.
type Callback struct {
	State string
	Code  string
	Iss   string // RFC 9207 iss parameter, if any
	Error string // the error parameter, if the issuer refused
	// Binding is the browser's state-binding secret; nil if it had none.
	Binding []byte
}

// LoginResult is a completed login.
type LoginResult struct {
	Issuer   string // issuer URL
	Subject  string
	ReturnTo string
	// Claims are all claims of the verified ID token, for policy checks such
	// as an admin claim. Never logged or displayed.
	Claims map[string]any
}

// Finish completes a login: it consumes the state (a second use fails), checks
// that the same browser started it, checks the RFC 9207 iss parameter,
// redeems the code with the PKCE verifier and verifies the ID token (iss, aud,
// azp, nonce, exp).
func (l *Login) Finish(ctx context.Context, cb Callback) (LoginResult, error) {
	if cb.State == "" {
		return LoginResult{}, fmt.Errorf("%w: no state", ErrLoginState)
	}
	stateHash := sha256.Sum256([]byte(cb.State))
	var bindingHash []byte
	var issuer, returnTo string
	var expires time.Time
	err := l.pool.QueryRow(ctx, consumeStateSQL, stateHash[:]).Scan(&bindingHash, &issuer, &returnTo, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return LoginResult{}, fmt.Errorf("%w: unknown or already used", ErrLoginState)
	}
	if err != nil {
		return LoginResult{}, fmt.Errorf("mcpauth: consume login state: %w", err)
	}
	if !l.now().Before(expires) {
		return LoginResult{}, fmt.Errorf("%w: expired", ErrLoginState)
	}
	got := sha256.Sum256(cb.Binding)
	if len(cb.Binding) < MinBindingBytes || subtle.ConstantTimeCompare(got[:], bindingHash) != 1 {
		return LoginResult{}, ErrStateMismatch
	}
	// Found again: an organization's issuer may have been removed (or
	// its login turned off) since the login started.
	st, _, err := l.verifier.resolve(ctx, issuer)
	switch {
	case errors.Is(err, ErrUntrustedIssuer):
		return LoginResult{}, ErrUnknownIssuer
	case err != nil:
		return LoginResult{}, err
	case !st.cfg.Login || st.cfg.URL != issuer:
		return LoginResult{}, ErrUnknownIssuer
	}
	if err := l.verifier.ready(ctx, st); err != nil {
		return LoginResult{}, err
	}
	if (cb.Iss != "" || st.meta.AuthorizationResponseIssParameterSupported) && cb.Iss != issuer {
		return LoginResult{}, ErrIssuerMismatch
	}
	if cb.Error != "" {
		return LoginResult{}, fmt.Errorf("%w: %.64q", ErrLoginDenied, cb.Error)
	}
	if cb.Code == "" {
		return LoginResult{}, fmt.Errorf("%w: no code", ErrLoginFailed)
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, l.verifier.client)
	tok, err := l.oauth2Config(st).Exchange(ctx, cb.Code, oauth2.VerifierOption(derive(cb.Binding, "pkce", cb.State)))
	if err != nil {
		// RetrieveError's text holds the response body; keep only its code.
		if re := (*oauth2.RetrieveError)(nil); errors.As(err, &re) {
			return LoginResult{}, fmt.Errorf("%w: %.64q", ErrLoginFailed, re.ErrorCode)
		}
		return LoginResult{}, fmt.Errorf("%w: token endpoint of %s unreachable", ErrIssuerUnavailable, st.cfg.ID)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return LoginResult{}, fmt.Errorf("%w: no id_token in the token response", ErrLoginFailed)
	}
	id, err := l.verifier.VerifyIDToken(ctx, issuer, raw, st.cfg.ClientID, derive(cb.Binding, "nonce", cb.State))
	if err != nil {
		return LoginResult{}, err
	}
	return LoginResult{Issuer: id.Issuer, Subject: id.Subject, ReturnTo: returnTo, Claims: verifiedClaims(raw)}, nil
}

// Sweep deletes expired login states.
func (l *Login) Sweep(ctx context.Context) (int64, error) {
	tag, err := l.pool.Exec(ctx, sweepStatesSQL, l.now().UTC())
	if err != nil {
		return 0, fmt.Errorf("mcpauth: sweep login states: %w", err)
	}
	return tag.RowsAffected(), nil
}

// maybeSweep sweeps at most once a minute per process, piggybacking on logins.
func (l *Login) maybeSweep(ctx context.Context, now time.Time) {
	l.mu.Lock()
	due := now.Sub(l.lastSweep) >= time.Minute
	if due {
		l.lastSweep = now
	}
	l.mu.Unlock()
	if !due {
		return
	}
	if _, err := l.Sweep(ctx); err != nil {
		l.logger.WarnContext(ctx, "sweep login states", slog.Any("error", err))
	}
}

func (l *Login) oauth2Config(st *issuerState) *oauth2.Config {
	style := oauth2.AuthStyleInHeader
	if st.cfg.ClientSecret == "" {
		style = oauth2.AuthStyleInParams // public client: PKCE only
	}
	scopes := []string{"openid"}
	for _, s := range st.cfg.Scopes {
		if !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
	}
	return &oauth2.Config{
		ClientID:     st.cfg.ClientID,
		ClientSecret: st.cfg.ClientSecret,
		Endpoint: oauth2.Endpoint{
			AuthURL:   st.meta.AuthorizationEndpoint,
			TokenURL:  st.meta.TokenEndpoint,
			AuthStyle: style,
		},
		RedirectURL: l.redirect,
		Scopes:      scopes,
	}
}

// derive computes a per-login secret (PKCE verifier, nonce) from the browser's
// binding secret and the state: 43 base64url characters, as RFC 7636 wants.
func derive(binding []byte, purpose, state string) string {
	m := hmac.New(sha256.New, binding)
	m.Write([]byte("connectd login " + purpose + " v1\x00" + state))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
