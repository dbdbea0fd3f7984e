package mcpauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/jose"
)

// Issuer is one trusted MCP authorization server.
type Issuer struct {
	// ID is a short name for URLs and logs, e.g. "main" (lower-case letters,
	// digits, '-' and '_').
	ID string
	// URL is the issuer identifier, compared byte for byte with tokens' iss.
	URL string
	// JWKSURL is where its signing keys are; empty means take jwks_uri from
	// discovery.
	JWKSURL string
	// AllowPlainJWT accepts access tokens whose typ is JWT or absent, for
	// issuers that do not send RFC 9068's at+jwt.
	AllowPlainJWT bool
	// Login enables browser login at this issuer; ClientID (and ClientSecret
	// unless connectd is registered as a public client) are then required.
	Login        bool
	ClientID     string
	ClientSecret string `json:"-"` // never serialised, printed or logged
	// Scopes requested at login; "openid" is always included.
	Scopes []string
	// SwitchPrompt is the OIDC prompt (space-separated values of "login",
	// "select_account", "consent") sent when a user signs out of connectd
	// to continue as another account ("Sign out and continue"): an issuer
	// that keeps its own session would sign the same account straight back
	// in. Nil: DefaultSwitchPrompt of the URL; "" sends none.
	SwitchPrompt *string
}

// DefaultSwitchPrompt is the prompt asked of issuer URL when a user
// switches accounts: "login" (OpenID Connect Core §3.1.2.1; Okta, Entra
// ID, Keycloak, Auth0), "select_account" at Google, which refuses
// "login".
func DefaultSwitchPrompt(url string) string {
	if url == "https://accounts.google.com" {
		return "select_account"
	}
	return "login"
}

// switchPrompt is the prompt this issuer is asked when a user switches.
func (i Issuer) switchPrompt() string {
	if i.SwitchPrompt != nil {
		return *i.SwitchPrompt
	}
	return DefaultSwitchPrompt(i.URL)
}

// checkPrompt checks an OIDC prompt value for a switch: "" or
// space-separated "login", "select_account", "consent", each once ("none"
// would sign the same account back in, or fail).
func checkPrompt(p string) error {
	seen := map[string]bool{}
	for _, v := range strings.Fields(p) {
		if v != "login" && v != "select_account" && v != "consent" || seen[v] {
			return fmt.Errorf("switch_prompt %q: space-separated login, select_account, consent (each once), or \"\" for none", p)
		}
		seen[v] = true
	}
	if strings.Join(strings.Fields(p), " ") != p {
		return fmt.Errorf("switch_prompt %q: single spaces between values", p)
	}
	return nil
}

// String describes the issuer without its client secret, so an Issuer
// printed or logged by mistake leaks nothing.
func (i Issuer) String() string {
	return fmt.Sprintf("Issuer{ID:%s URL:%s JWKSURL:%s Login:%t ClientID:%s}", i.ID, i.URL, i.JWKSURL, i.Login, i.ClientID)
}

// LogValue keeps the client secret out of structured logs.
func (i Issuer) LogValue() slog.Value { return slog.StringValue(i.String()) }

var issuerIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// Validate checks the issuer's configuration. allowHTTP permits http:// URLs
// (development only).
func (i Issuer) Validate(allowHTTP bool) error {
	if !issuerIDPattern.MatchString(i.ID) {
		return errors.New("id must be 1-32 lower-case letters, digits, '-' or '_'")
	}
	if err := egress.CheckURL(i.URL, allowHTTP); err != nil {
		return fmt.Errorf("url %w", err)
	}
	if err := CheckIssuer(i.URL); err != nil { // else no token of it could ever pass
		return fmt.Errorf("url: %w", err)
	}
	if i.JWKSURL != "" {
		if err := egress.CheckURL(i.JWKSURL, allowHTTP); err != nil {
			return fmt.Errorf("jwks_url %w", err)
		}
	}
	if i.Login && i.ClientID == "" {
		return errors.New("login needs a client_id")
	}
	if i.SwitchPrompt != nil {
		if err := checkPrompt(*i.SwitchPrompt); err != nil {
			return err
		}
	}
	return nil
}

// issuerState is one issuer's lazily discovered metadata and its keys in
// the JWKS cache.
type issuerState struct {
	cfg Issuer

	mu       sync.Mutex // held while discovering
	meta     *egress.Metadata
	keys     *jose.Set
	failedAt time.Time // last failed set-up; retried after retryAfter
}

// ready discovers the issuer and finds its keys in the JWKS cache on first
// use (the first fetch is the cache's own: see jose.Set). A failure is
// remembered for retryAfter so an unreachable issuer costs one attempt per
// interval, not one per request.
func (v *Verifier) ready(ctx context.Context, st *issuerState) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	needMeta := st.cfg.JWKSURL == "" || st.cfg.Login
	if st.keys != nil && (!needMeta || st.meta != nil) {
		return nil
	}
	if !st.failedAt.IsZero() {
		if wait := v.retryAfter - v.now().Sub(st.failedAt); wait > 0 {
			return unavailable(wait, "issuer %s: set-up failed recently", st.cfg.ID)
		}
	}
	if needMeta && st.meta == nil {
		m, err := v.discover(ctx, st.cfg.URL)
		if err != nil {
			st.failedAt = v.now()
			v.logger.WarnContext(ctx, "issuer discovery failed", slog.String("issuer", st.cfg.ID), slog.Any("error", err))
			return unavailable(v.retryAfter, "issuer %s: %w", st.cfg.ID, err)
		}
		st.meta = m
	}
	if st.keys == nil {
		jwksURL := st.cfg.JWKSURL
		if jwksURL == "" {
			jwksURL = st.meta.JWKSURI
		}
		st.keys = v.keys.Set(jwksURL)
	}
	st.failedAt = time.Time{}
	return nil
}

// discover fetches the issuer's metadata (egress.Discover: RFC 8414, then
// OIDC discovery; a document naming another issuer is refused: mix-up
// defence) and checks the endpoints connectd will call or send browsers to.
// Both fetches together are bounded by twice the HTTP timeout.
func (v *Verifier) discover(ctx context.Context, issuer string) (*egress.Metadata, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*v.httpTimeout)
	defer cancel()
	m, err := egress.Discover(ctx, v.client, issuer)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	if err := egress.CheckURL(m.JWKSURI, v.allowHTTP); err != nil {
		return nil, fmt.Errorf("discovery jwks_uri %w", err)
	}
	for _, e := range []string{m.AuthorizationEndpoint, m.TokenEndpoint} {
		if e == "" {
			continue
		}
		if err := egress.CheckURL(e, v.allowHTTP); err != nil {
			return nil, fmt.Errorf("discovery endpoint %w", err)
		}
	}
	return m, nil
}

// supportsS256 reports whether the issuer may be asked for PKCE S256: it says
// so, or says nothing (many issuers omit the list).
func supportsS256(m *egress.Metadata) bool {
	return len(m.CodeChallengeMethodsSupported) == 0 || slices.Contains(m.CodeChallengeMethodsSupported, "S256")
}

// IssuerSource is where issuers besides the configured (deployment) ones
// are found: the organizations' own (package org's Store). An issuer it
// knows belongs to exactly one organization, org; its id and URL are no
// deployment issuer's. ok is false when it knows none of that id or URL;
// an error means it could not say (a token or login at such an issuer is
// then ErrIssuerUnavailable, never refused). It is asked on every use of a
// source issuer (a token, a cached token, a login), so it answers warm
// calls from memory.
type IssuerSource interface {
	LookupIssuer(ctx context.Context, idOrURL string) (is Issuer, org string, ok bool, err error)
}

// sourceRetryAfter is the Retry-After of a source that could not answer.
const sourceRetryAfter = 5 * time.Second

// maxSourceIssuers bounds the JWKS cache's sets kept for source issuers
// beyond the deployment's (a bound, not a limit: an evicted set is made
// again on next use).
const maxSourceIssuers = 4096

// resolve finds the issuer named by idOrURL: a deployment issuer (org ""),
// else the source's, with its state. ErrUntrustedIssuer when neither knows
// it; ErrIssuerUnavailable when the source could not say.
func (v *Verifier) resolve(ctx context.Context, idOrURL string) (*issuerState, string, error) {
	if st := v.byURL[idOrURL]; st != nil {
		return st, "", nil
	}
	if st := v.byID[idOrURL]; st != nil {
		return st, "", nil
	}
	// Only what could be an issuer's id or URL is asked about: never NUL,
	// bad UTF-8 or a megabyte the database would refuse (a 503 for junk).
	if v.source == nil || (!issuerIDPattern.MatchString(idOrURL) && CheckIssuer(idOrURL) != nil) {
		return nil, "", ErrUntrustedIssuer
	}
	is, org, ok, err := v.source.LookupIssuer(ctx, idOrURL)
	switch {
	case err != nil:
		v.logger.WarnContext(ctx, "issuer source unavailable", slog.Any("error", err))
		return nil, "", unavailable(sourceRetryAfter, "the organizations' issuers cannot be read")
	case !ok || org == "" || (is.ID != idOrURL && is.URL != idOrURL):
		return nil, "", ErrUntrustedIssuer
	}
	if cur, found := v.sourced.Load(is.URL); found && sameIssuer(cur.(*issuerState).cfg, is) {
		return cur.(*issuerState), org, nil
	}
	// New, or changed since (a new JWKS URL, client, secret...): a fresh
	// state, discovered again. What the old one verified stays verified
	// (the token cache), as for a key rotation.
	if err := is.Validate(v.allowHTTP); err != nil {
		v.logger.WarnContext(ctx, "organization issuer refused: invalid configuration", slog.String("org", org),
			slog.String("issuer", is.ID), slog.Any("error", err))
		return nil, "", ErrUntrustedIssuer
	}
	st := &issuerState{cfg: is}
	v.sourced.Store(is.URL, st)
	return st, org, nil
}

// sameIssuer reports whether a and b are the same configuration.
func sameIssuer(a, b Issuer) bool {
	return a.ID == b.ID && a.URL == b.URL && a.JWKSURL == b.JWKSURL && a.AllowPlainJWT == b.AllowPlainJWT &&
		a.Login == b.Login && a.ClientID == b.ClientID && a.ClientSecret == b.ClientSecret && slices.Equal(a.Scopes, b.Scopes)
}

// trusted finds the state of iss, a token's issuer URL, if the caller
// trusts it: a deployment issuer when deployment is true, or an issuer
// organization org owns. ErrUntrustedIssuer otherwise.
func (v *Verifier) trusted(ctx context.Context, iss, org string, deployment bool) (*issuerState, error) {
	if st := v.byURL[iss]; st != nil {
		if !deployment {
			return nil, fmt.Errorf("%w: the organization does not accept the deployment's issuers", ErrUntrustedIssuer)
		}
		return st, nil
	}
	if org == "" || v.source == nil {
		return nil, ErrUntrustedIssuer
	}
	st, owner, err := v.resolve(ctx, iss)
	if err != nil {
		return nil, err
	}
	if owner != org || st.cfg.URL != iss {
		return nil, fmt.Errorf("%w: another organization's issuer", ErrUntrustedIssuer)
	}
	return st, nil
}

// LookupIn finds an issuer by its id or exact URL: a deployment issuer (org
// ""), else an organization's (org its owner), from the IssuerSource. ok is
// false when neither knows it; err is ErrIssuerUnavailable when the source
// could not say.
func (v *Verifier) LookupIn(ctx context.Context, idOrURL string) (is Issuer, org string, ok bool, err error) {
	st, org, err := v.resolve(ctx, idOrURL)
	switch {
	case errors.Is(err, ErrUntrustedIssuer):
		return Issuer{}, "", false, nil
	case err != nil:
		return Issuer{}, "", false, err
	}
	return st.cfg, org, true, nil
}
