package mcpauth

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/jose"
)

// algorithms is the signature allow-list (jose's: asymmetric only).
var algorithms = jose.Algorithms()

// UserTokenHeader carries the user's MCP access token on /v1 requests; the
// Authorization header carries the client key.
const UserTokenHeader = "X-User-Token"

// maxTokenBytes bounds what is parsed at all.
const maxTokenBytes = 16 << 10

// Identity is the user an MCP access token speaks for, as verified.
type Identity struct {
	Issuer   string // iss: the issuer URL
	Subject  string // sub: unique only within Issuer
	ClientID string // client_id (or azp): the MCP client the token was issued to
	Scopes   []string
	Expiry   time.Time
}

// IDToken is what connectd keeps from a verified OIDC ID token.
type IDToken struct {
	Issuer  string
	Subject string
	Expiry  time.Time
}

// VerifierConfig configures a Verifier. Zero durations take the defaults.
type VerifierConfig struct {
	// Issuers are the deployment's trusted issuers (CONNECTD_ISSUERS).
	Issuers []Issuer
	// Source, when set, is where the organizations' own issuers are found
	// (VerifyAccessTokenIn, LookupIn, logins at them).
	Source IssuerSource
	// HTTPClient fetches discovery documents, JWKS and tokens. Its transport is
	// kept (an SSRF guard belongs there); mcpauth adds a body size limit and
	// turns off redirect following.
	HTTPClient *http.Client
	// AllowHTTP permits http:// issuer, JWKS and endpoint URLs (dev mode only).
	AllowHTTP bool
	// Skew is the clock skew tolerated on exp, nbf and iat (default 30s).
	Skew time.Duration
	// RefreshInterval is the longest a JWKS answer is used before it is
	// fetched again (default 1h), so revoked keys disappear; the answer's
	// Cache-Control max-age or Expires may make it shorter, down to a minute.
	RefreshInterval time.Duration
	// UnknownKIDInterval is the least time between a JWKS fetch and one
	// brought forward by a token with an unknown kid, so a rotated key is
	// picked up within it; also the first retry after a failed fetch, doubling
	// up to a minute while the JWKS keeps failing (default 5s). While it
	// fails, the last keys verify for an hour past their answer's lifetime
	// at most, then tokens are 503 (ErrIssuerUnavailable).
	UnknownKIDInterval time.Duration
	// RetryAfter is how long a failed discovery is not retried (default 10s).
	RetryAfter time.Duration
	// HTTPTimeout bounds each outbound request (default 10s).
	HTTPTimeout time.Duration
	// TokenCacheSize bounds how many verified access tokens are remembered
	// (by hash, until they expire); default 65536, negative disables.
	TokenCacheSize int
	Now            func() time.Time
	Logger         *slog.Logger
}

// Verifier verifies MCP user access tokens and OIDC ID tokens against the
// trusted issuers. It is safe for concurrent use; Close ends its JWKS fetches
// under way.
type Verifier struct {
	issuers []*issuerState
	byURL   map[string]*issuerState
	byID    map[string]*issuerState
	source  IssuerSource
	sourced sync.Map // issuer URL → *issuerState of the source's issuers, made on first use

	client             *http.Client
	allowHTTP          bool
	skew               time.Duration
	refreshInterval    time.Duration
	unknownKIDInterval time.Duration
	retryAfter         time.Duration
	httpTimeout        time.Duration
	now                func() time.Time
	logger             *slog.Logger
	tokens             *tokenCache
	keys               *jose.Cache // the issuers' JWKS
}

// NewVerifier checks the issuer configuration and returns a Verifier. It makes
// no network request: each issuer is discovered on first use, so connectd
// starts even while an issuer is down.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	v := &Verifier{
		byURL:              map[string]*issuerState{},
		byID:               map[string]*issuerState{},
		allowHTTP:          cfg.AllowHTTP,
		skew:               orDefault(cfg.Skew, 30*time.Second),
		refreshInterval:    orDefault(cfg.RefreshInterval, time.Hour),
		unknownKIDInterval: orDefault(cfg.UnknownKIDInterval, 5*time.Second),
		retryAfter:         orDefault(cfg.RetryAfter, 10*time.Second),
		httpTimeout:        orDefault(cfg.HTTPTimeout, 10*time.Second),
		now:                cfg.Now,
		logger:             cfg.Logger,
		source:             cfg.Source,
	}
	if cfg.Skew < 0 || cfg.RefreshInterval < 0 || cfg.UnknownKIDInterval < 0 {
		return nil, errors.New("mcpauth: negative skew or interval")
	}
	if v.now == nil {
		v.now = time.Now
	}
	v.tokens = newTokenCache(cmp.Or(cfg.TokenCacheSize, 65536), v.skew, v.now)
	if v.logger == nil {
		v.logger = slog.New(slog.DiscardHandler)
	}
	v.client = egress.Bound(cfg.HTTPClient, egress.Limits{Timeout: v.httpTimeout})
	for _, is := range cfg.Issuers {
		if err := is.Validate(cfg.AllowHTTP); err != nil {
			return nil, fmt.Errorf("mcpauth: issuer %q: %w", is.ID, err)
		}
		if v.byURL[is.URL] != nil || v.byID[is.ID] != nil {
			return nil, fmt.Errorf("mcpauth: issuer %s configured twice", is.ID)
		}
		st := &issuerState{cfg: is}
		v.issuers = append(v.issuers, st)
		v.byURL[is.URL], v.byID[is.ID] = st, st
	}
	v.keys = jose.NewCache(jose.CacheConfig{Client: v.client, Lifetime: v.refreshInterval,
		UnknownKeyInterval: v.unknownKIDInterval, Skew: v.skew, Timeout: v.httpTimeout,
		MaxSets: max(1, len(v.issuers)+sourceSets(cfg.Source)), Now: v.now, Logger: v.logger, What: "issuer"})
	return v, nil
}

// sourceSets is how many JWKS sets are kept for source issuers.
func sourceSets(src IssuerSource) int {
	if src == nil {
		return 0
	}
	return maxSourceIssuers
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Close ends the JWKS fetches under way.
func (v *Verifier) Close() { v.keys.Close() }

// Issuers lists the configured (deployment) issuers in configuration
// order; the source's are not listed.
func (v *Verifier) Issuers() []Issuer {
	out := make([]Issuer, len(v.issuers))
	for i, st := range v.issuers {
		out[i] = st.cfg
	}
	return out
}

// Lookup finds a deployment issuer by its id or its exact URL (LookupIn
// finds the organizations' too).
func (v *Verifier) Lookup(idOrURL string) (Issuer, bool) {
	st := v.byID[idOrURL]
	if st == nil {
		st = v.byURL[idOrURL]
	}
	if st == nil {
		return Issuer{}, false
	}
	return st.cfg, true
}

// claims are the JWT claims connectd reads from access and ID tokens.
type claims struct {
	jwt.RegisteredClaims
	ClientID        string `json:"client_id,omitempty"`
	AuthorizedParty string `json:"azp,omitempty"`
	Scope           string `json:"scope,omitempty"`
	Nonce           string `json:"nonce,omitempty"`
}

type tokenKind int

const (
	accessToken tokenKind = iota
	idToken
)

// VerifyAccessToken verifies an RFC 9068 access token of a deployment
// issuer, for a caller with no organization: VerifyAccessTokenIn with org
// "" and the deployment's issuers accepted.
func (v *Verifier) VerifyAccessToken(ctx context.Context, raw string, audiences []string) (Identity, error) {
	return v.VerifyAccessTokenIn(ctx, raw, audiences, "", true)
}

// VerifyAccessTokenIn verifies an RFC 9068 access token for a client of
// organization org: signature by a key of an issuer org trusts — a
// deployment issuer when deployment is true (the organization's
// DeploymentIssuers), or one of org's own (the IssuerSource's) — an
// asymmetric alg (RS*, PS*, ES*, EdDSA), typ at+jwt (unless the issuer
// allows plain JWTs), exp/nbf/iat within the skew, sub present, and aud
// containing at least one of audiences — the calling client's registered
// resources. An empty audiences list refuses every token. Any other
// issuer's token is ErrUntrustedIssuer; a source that cannot say whose
// the issuer is, ErrIssuerUnavailable. A token verified before (the
// verified-token cache, by hash) is checked again for the audience, the
// time window and this trust, every time: a token one organization's
// client presented is not thereby good for another's.
func (v *Verifier) VerifyAccessTokenIn(ctx context.Context, raw string, audiences []string, org string, deployment bool) (Identity, error) {
	if slices.Contains(audiences, "") { // copied only then: this runs on every /v1 request
		audiences = slices.DeleteFunc(slices.Clone(audiences), func(s string) bool { return s == "" })
	}
	if len(audiences) == 0 {
		return Identity{}, fmt.Errorf("%w: the client has no registered resource", ErrWrongAudience)
	}
	key := tokenKey(raw)
	now := v.now()
	if id, ok, wrongAud := v.tokens.get(key, audiences, now); ok {
		if _, err := v.trusted(ctx, id.Issuer, org, deployment); err != nil {
			return Identity{}, err
		}
		return id, nil
	} else if wrongAud {
		return Identity{}, fmt.Errorf("%w: aud is not one of the client's resources", ErrWrongAudience)
	}
	c, err := v.verify(ctx, raw, accessToken, audiences, func(iss string) (*issuerState, error) {
		return v.trusted(ctx, iss, org, deployment)
	})
	if err != nil {
		return Identity{}, err
	}
	clientID := c.ClientID
	if clientID == "" {
		clientID = c.AuthorizedParty
	}
	id := Identity{
		Issuer:   c.Issuer,
		Subject:  c.Subject,
		ClientID: clientID,
		Scopes:   strings.Fields(c.Scope),
		Expiry:   c.ExpiresAt.Time,
	}
	e := cachedToken{id: id, aud: slices.Clone(c.Audience)}
	if c.NotBefore != nil {
		e.nbf = c.NotBefore.UnixNano()
	}
	v.tokens.put(key, e)
	return id, nil
}

// TokenCacheStats reports the verified-token cache's counters (zero when
// disabled).
func (v *Verifier) TokenCacheStats() cache.Stats { return v.tokens.stats() }

// VerifyIDToken verifies an OIDC ID token from the issuer at issuerURL (a
// deployment issuer or an organization's): signature, alg, iss equal to
// issuerURL, aud containing clientID (and azp
// equal to it when there are several audiences), exp/iat within the skew, and
// nonce equal to the one the login sent.
func (v *Verifier) VerifyIDToken(ctx context.Context, issuerURL, raw, clientID, nonce string) (IDToken, error) {
	if clientID == "" || nonce == "" {
		return IDToken{}, errors.New("mcpauth: VerifyIDToken needs a client id and a nonce")
	}
	c, err := v.verify(ctx, raw, idToken, []string{clientID}, func(iss string) (*issuerState, error) {
		if iss != issuerURL {
			return nil, ErrUntrustedIssuer
		}
		st, _, err := v.resolve(ctx, iss)
		if err != nil {
			return nil, err
		}
		if st.cfg.URL != iss {
			return nil, ErrUntrustedIssuer
		}
		return st, nil
	})
	if err != nil {
		return IDToken{}, err
	}
	if (len(c.Audience) > 1 || c.AuthorizedParty != "") && c.AuthorizedParty != clientID {
		return IDToken{}, fmt.Errorf("%w: azp is not this client", ErrWrongAudience)
	}
	if subtle.ConstantTimeCompare([]byte(c.Nonce), []byte(nonce)) != 1 {
		return IDToken{}, ErrNonce
	}
	return IDToken{Issuer: c.Issuer, Subject: c.Subject, Expiry: c.ExpiresAt.Time}, nil
}

// verify does what both token kinds share. pick gives the state of the
// token's (unverified) iss if that issuer is acceptable here, else its
// refusal.
func (v *Verifier) verify(ctx context.Context, raw string, kind tokenKind, audiences []string,
	pick func(iss string) (*issuerState, error)) (*claims, error) {
	if raw == "" || len(raw) > maxTokenBytes {
		return nil, fmt.Errorf("%w: empty or oversized token", ErrMalformedToken)
	}
	// The JSON must decode to exactly what was signed: checked on the raw
	// segments, because the decoder would replace bad bytes silently.
	payload, err := claimsJSON(raw)
	if err != nil {
		return nil, err
	}
	// Read the header and iss unverified, only to choose what to check the
	// token against; everything is verified below.
	var pre claims
	tok, _, err := jwt.NewParser().ParseUnverified(raw, &pre)
	switch {
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return nil, ErrAlgorithm // alg missing or unknown to the library
	case err != nil:
		return nil, ErrMalformedToken
	}
	alg, _ := tok.Header["alg"].(string)
	if !slices.Contains(algorithms, alg) {
		return nil, fmt.Errorf("%w: %q", ErrAlgorithm, alg)
	}
	if pre.Issuer == "" {
		return nil, ErrUntrustedIssuer
	}
	st, err := pick(pre.Issuer)
	if err != nil {
		return nil, err
	}
	if err := checkType(tok.Header["typ"], kind, st.cfg.AllowPlainJWT); err != nil {
		return nil, err
	}
	if err := v.ready(ctx, st); err != nil {
		return nil, err
	}
	if err := st.keys.Keys(ctx); err != nil {
		return nil, err
	}
	var c claims
	parser := jwt.NewParser(
		jwt.WithValidMethods(algorithms),
		jwt.WithLeeway(v.skew),
		jwt.WithTimeFunc(v.now),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithIssuer(st.cfg.URL),
		jwt.WithAudience(audiences...),
	)
	var keyErr error // keyFunc's own verdict, returned as it is
	if _, err := parser.ParseWithClaims(raw, &c, v.keyFunc(ctx, st, &keyErr)); err != nil {
		if keyErr != nil {
			return nil, keyErr
		}
		return nil, v.classify(err, st)
	}
	if c.Subject == "" || c.IssuedAt == nil {
		return nil, fmt.Errorf("%w: sub and iat are required", ErrMalformedToken)
	}
	if err := signedIdentity(payload, c.Issuer, c.Subject); err != nil {
		return nil, err
	}
	return &c, nil
}

// checkType enforces the typ header: RFC 9068 access tokens are "at+jwt"
// (media-type names are case-insensitive and may carry "application/"); an
// ID token must not be one, so an access token is never taken for a login.
func checkType(h any, kind tokenKind, allowPlain bool) error {
	typ, ok := h.(string)
	if h != nil && !ok {
		return ErrTokenType
	}
	typ = strings.TrimPrefix(strings.ToLower(typ), "application/")
	switch {
	case typ == "at+jwt":
		if kind == idToken {
			return fmt.Errorf("%w: an access token is not an ID token", ErrTokenType)
		}
		return nil
	case typ == "jwt" || typ == "":
		if kind == idToken || allowPlain {
			return nil
		}
		return fmt.Errorf("%w: typ must be at+jwt", ErrTokenType)
	default:
		return fmt.Errorf("%w: %q", ErrTokenType, typ)
	}
}

// keyFunc resolves the verification key through the issuer's keys in the
// JWKS cache (jose.Set.Keyfunc: an unknown kid fetched now at most once per
// interval, refused when the cache is newer than the token, or 503 until a
// fetch is allowed; never waiting for the interval). Its verdict is left in
// *verdict, an unknown key as ErrSignature.
func (v *Verifier) keyFunc(ctx context.Context, st *issuerState, verdict *error) jwt.Keyfunc {
	inner := st.keys.Keyfunc(ctx, verdict)
	return func(t *jwt.Token) (any, error) {
		key, err := inner(t)
		if errors.Is(*verdict, jose.ErrUnknownKey) {
			*verdict = ErrSignature
		}
		return key, err
	}
}

// classify maps a jwt error onto this package's sentinels. A key that could not be found while the
// issuer's JWKS is unreachable is ErrIssuerUnavailable.
func (v *Verifier) classify(err error, st *issuerState) error {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return ErrMalformedToken
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		if !st.keys.Healthy() {
			return unavailable(st.keys.RetryIn(), "issuer %s: JWKS unreachable", st.cfg.ID)
		}
		return ErrSignature
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return ErrSignature
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return ErrWrongAudience
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return ErrUntrustedIssuer
	case errors.Is(err, jwt.ErrTokenExpired):
		return ErrTokenExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return ErrTokenNotYetValid
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return fmt.Errorf("%w: a required claim is missing", ErrMalformedToken)
	default:
		return ErrInvalidToken
	}
}
