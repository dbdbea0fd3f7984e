package clientauth

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/jose"
)

// ErrInvalidAssertion means a client assertion (RFC 7523, private_key_jwt)
// was refused: malformed, an algorithm outside the allow-list, a signature
// by no key the client registered, iss or sub not the client, aud not
// exactly the endpoint's, expired or living too long, or a jti already used.
// The wrapped text says which (logged, never answered).
var ErrInvalidAssertion = errors.New("clientauth: invalid client assertion")

// Limits on client assertions.
const (
	// MaxAssertionLifetime bounds exp - iat, and exp - now: an assertion is
	// made for one request, and its jti is remembered until it expires.
	MaxAssertionLifetime = 5 * time.Minute
	maxAssertionBytes    = 8 << 10
	maxJTI               = 256
	maxJWKSBytes         = 64 << 10
	// The key cache of registered JWKS URLs (keyCache, the issuers' own
	// kind): remoteKeysLifetime is the longest an answer is used;
	// unknownKeyInterval the least time between fetches brought forward by
	// an unknown key (a key just published: rotation); maxRemoteSets the
	// URLs remembered.
	remoteKeysLifetime = 5 * time.Minute
	unknownKeyInterval = 10 * time.Second
	maxRemoteSets      = 10_000
)

// algorithms is the signature allow-list (jose's: asymmetric only).
var algorithms = jose.Algorithms()

// AssertionAlgorithms is the signature allow-list of client assertions (the
// user tokens' own: asymmetric only, never none or HS*), for metadata.
func AssertionAlgorithms() []string { return slices.Clone(algorithms) }

// assertionClaims are the claims of a client assertion.
type assertionClaims struct {
	jwt.RegisteredClaims
}

// LooksLikeAssertion reports whether a bearer credential is a JWT (a client
// assertion) rather than a client key: not cks_-prefixed, three segments.
func LooksLikeAssertion(cred string) bool {
	return !strings.HasPrefix(cred, KeyPrefix) && strings.Count(cred, ".") == 2
}

// AssertionIssuer is the unverified iss of a client assertion, for keying a
// rate-limit budget only (never for any decision).
func AssertionIssuer(raw string) (string, bool) {
	if len(raw) > maxAssertionBytes {
		return "", false
	}
	var c assertionClaims
	if _, _, err := jwt.NewParser().ParseUnverified(raw, &c); err != nil || c.Issuer == "" {
		return "", false
	}
	return c.Issuer, true
}

// AuthenticateAssertion returns the client whose registered key signed raw,
// an RFC 7523 client assertion for audience (OIDC Core §9 private_key_jwt):
// iss and sub the client id, aud exactly audience (one value), exp at most
// MaxAssertionLifetime after iat and after now, an alg of the asymmetric
// allow-list, a key of the client's registered JWK Set or JWKS URL, and a
// jti never seen before for that client on any replica (client_assertions).
// Errors: ErrInvalidAssertion, wrapped; ErrClientDisabled;
// ErrIssuerUnavailable (a 503: the client's JWKS URL could not be fetched
// and no keys of it may verify, or a kid it lacks may be newer than it and
// it was fetched less than unknownKeyInterval ago).
func (c *Clients) AuthenticateAssertion(ctx context.Context, raw, audience string) (Client, error) {
	bad := func(format string, args ...any) (Client, error) {
		return Client{}, fmt.Errorf("%w: "+format, append([]any{ErrInvalidAssertion}, args...)...)
	}
	if raw == "" || len(raw) > maxAssertionBytes || audience == "" {
		return bad("empty or oversized")
	}
	var pre assertionClaims
	tok, _, err := jwt.NewParser().ParseUnverified(raw, &pre)
	if err != nil {
		return bad("malformed")
	}
	if alg, _ := tok.Header["alg"].(string); !slices.Contains(algorithms, alg) {
		return bad("algorithm %q not allowed", alg)
	}
	if err := assertionType(tok.Header["typ"]); err != nil {
		return bad("%v", err)
	}
	if err := jose.NoCrit(tok.Header); err != nil {
		return bad("%v", err)
	}
	if pre.Issuer == "" || pre.Issuer != pre.Subject || !strings.HasPrefix(pre.Issuer, "cli_") || len(pre.Issuer) > 64 {
		return bad("iss and sub must both be the client id")
	}
	cl, err := c.Get(ctx, pre.Issuer)
	if errors.Is(err, ErrClientNotFound) {
		return bad("no such client")
	}
	if err != nil {
		return Client{}, err
	}
	var verdict error // the key cache's, on an unknown kid
	kf, err := c.assertionKeys(ctx, cl, &verdict)
	if err != nil {
		return Client{}, err
	}
	now := c.now()
	parser := jwt.NewParser(
		jwt.WithValidMethods(algorithms),
		jwt.WithLeeway(c.skew),
		jwt.WithTimeFunc(func() time.Time { return now }),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithIssuer(cl.ID),
		jwt.WithSubject(cl.ID),
	)
	var claims assertionClaims
	if _, err := parser.ParseWithClaims(raw, &claims, kf); err != nil {
		if verdict != nil && !errors.Is(verdict, jose.ErrUnknownKey) {
			return Client{}, verdict // its keys cannot be brought up to date now: 503
		}
		return bad("%v", err) // jwt's text: no secret in it
	}
	if len(claims.Audience) != 1 || claims.Audience[0] != audience {
		return bad("aud must be exactly %s", audience)
	}
	// Only once the assertion is the client's own: an unsigned one must
	// not learn which client ids are disabled (cut off).
	if cl.Disabled {
		return Client{}, ErrClientDisabled
	}
	if claims.IssuedAt == nil || claims.ExpiresAt.Sub(claims.IssuedAt.Time) > MaxAssertionLifetime ||
		claims.ExpiresAt.Sub(now) > MaxAssertionLifetime+c.skew {
		return bad("exp must be at most %s after iat and now", MaxAssertionLifetime)
	}
	if claims.ID == "" || len(claims.ID) > maxJTI {
		return bad("jti must be 1-%d characters", maxJTI)
	}
	// Acceptable until exp + skew on this replica's clock.
	spent, err := c.spendJTI(ctx, cl.ID, claims.ID, claims.ExpiresAt.Add(c.skew))
	if err != nil {
		return Client{}, fmt.Errorf("clientauth: record assertion: %w", err)
	}
	if !spent {
		return bad("jti already used (a replayed assertion)")
	}
	c.touch(ctx, cl.ID, now.UTC())
	return cl, nil
}

const (
	spendJTISQL = `INSERT INTO client_assertions (client_id, jti, expires_at) VALUES ($1, $2, $3)
		ON CONFLICT DO NOTHING`
	sweepJTISQL = `DELETE FROM client_assertions WHERE expires_at < $1`
)

// jtiRetention is how long after the last instant an assertion or proof
// could be accepted its spent jti is kept. Acceptance is judged by each
// replica's clock, the sweep by the sweeping replica's: without it, a
// replica whose clock runs ahead sweeps the jti while one whose clock runs
// behind still accepts the assertion — a replay answered 200. With it,
// replicas whose clocks disagree by less than this cannot reopen a jti.
const jtiRetention = 5 * time.Minute

// spendJTI spends client's jti on every replica, by this one insert before
// anything is answered: a second use, concurrent or later, on any replica,
// inserts nothing and gets false. acceptableUntil is the last instant this
// replica's clock would accept the assertion or proof; the row is kept
// jtiRetention longer.
func (c *Clients) spendJTI(ctx context.Context, clientID, jti string, acceptableUntil time.Time) (bool, error) {
	tag, err := c.pool.Exec(ctx, spendJTISQL, clientID, jti, acceptableUntil.Add(jtiRetention))
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// assertionType accepts a client assertion's typ: absent, JWT, or
// client-authentication+jwt (media-type names are case-insensitive and may
// carry "application/"). Any other — dpop+jwt, at+jwt, … — is a JWT made for
// something else, never a client's proof of itself.
func assertionType(h any) error {
	if h == nil {
		return nil
	}
	typ, ok := h.(string)
	switch strings.TrimPrefix(strings.ToLower(typ), "application/") {
	case "jwt", "client-authentication+jwt":
		if ok {
			return nil
		}
	}
	return fmt.Errorf("typ %q is not a client assertion's (JWT or client-authentication+jwt)", typ)
}

// SweepAssertions deletes the spent jtis of assertions that have expired.
func (c *Clients) SweepAssertions(ctx context.Context) (int64, error) {
	tag, err := c.pool.Exec(ctx, sweepJTISQL, c.now())
	if err != nil {
		return 0, fmt.Errorf("clientauth: sweep client assertions: %w", err)
	}
	return tag.RowsAffected(), nil
}

// assertionKeys is the keyfunc over cl's registered keys: its JWK Set, or
// its JWKS URL's keys in the key cache (an unknown kid may fetch them again:
// keySet.keyfunc, whose verdict is left in *verdict).
func (c *Clients) assertionKeys(ctx context.Context, cl Client, verdict *error) (jwt.Keyfunc, error) {
	switch {
	case len(cl.JWKS) > 0:
		kf, err := keyfunc.NewJWKSetJSON(cl.JWKS)
		if err != nil {
			return nil, fmt.Errorf("clientauth: client %s: registered keys: %w", cl.ID, err)
		}
		return kf.KeyfuncCtx(ctx), nil
	case cl.JWKSURL != "":
		s := c.remote.Set(cl.JWKSURL)
		if err := s.Keys(ctx); err != nil {
			return nil, err
		}
		return s.Keyfunc(ctx, verdict), nil
	}
	return nil, fmt.Errorf("%w: client %s registered no key for private_key_jwt", ErrInvalidAssertion, cl.ID)
}

// AssertionKeys is what a client registers for private_key_jwt: a JWKS URL,
// or public keys (PEM, a JWK or a JWK Set); at most one. Neither: the client
// stops using private_key_jwt.
type AssertionKeys struct {
	JWKSURL   string
	PublicKey []byte
	// DropSecrets ends the client's keys (cks_…) at once: a client that
	// proves itself only with its private key holds no shared secret.
	DropSecrets bool
}

const (
	// Without keys, DPoP cannot be required either.
	setAssertionKeysSQL = `UPDATE clients SET jwks_url = $2, jwks = $3,
		dpop_required = dpop_required AND ($2::text IS NOT NULL OR $3::jsonb IS NOT NULL) WHERE id = $1`
	dropSecretsSQL = `UPDATE client_keys SET expires_at = $2 WHERE client_id = $1 AND (expires_at IS NULL OR expires_at > $2)`
)

// SetAssertionKeys registers (or, with neither field, removes) client id's
// keys for private_key_jwt. A JWKS URL must pass egress.CheckURL and what
// the egress client's guard can tell without resolving (an IP literal in a
// private range is refused now; a name is checked at every fetch). Public
// keys are stored as a JWK Set of public keys: RSA of at least 2048 bits,
// EC P-256/384/521 or Ed25519. Every replica's key cache learns of it.
func (c *Clients) SetAssertionKeys(ctx context.Context, id string, k AssertionKeys) error {
	var jwksURL *string
	var jwks []byte
	switch {
	case k.JWKSURL != "" && len(k.PublicKey) > 0:
		return fmt.Errorf("%w: a JWKS URL or a public key, not both", ErrInvalidClient)
	case k.JWKSURL != "":
		if err := egress.CheckURL(k.JWKSURL, c.allowHTTP); err != nil {
			return fmt.Errorf("%w: JWKS URL %w", ErrInvalidClient, err)
		}
		if err := egress.CheckDestination(c.rawClient, k.JWKSURL); err != nil {
			return fmt.Errorf("%w: JWKS URL %w", ErrInvalidClient, err)
		}
		jwksURL = &k.JWKSURL
	case len(k.PublicKey) > 0:
		set, err := parsePublicKey(k.PublicKey)
		if err != nil {
			return fmt.Errorf("%w: public key: %w", ErrInvalidClient, err)
		}
		jwks = set
	}
	if k.DropSecrets && jwksURL == nil && jwks == nil {
		return fmt.Errorf("%w: a client without keys for private_key_jwt needs its client key", ErrInvalidClient)
	}
	var found bool
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, setAssertionKeysSQL, id, jwksURL, jwks)
		if found = err == nil && tag.RowsAffected() > 0; !found {
			return err
		}
		if k.DropSecrets {
			if _, err := tx.Exec(ctx, dropSecretsSQL, id, c.now().UTC()); err != nil {
				return err
			}
		}
		// Every replica's key cache learns of it on commit.
		_, err = tx.Exec(ctx, notifySQL, InvalidationChannel, id)
		return err
	})
	c.forget(id)
	if err != nil {
		return fmt.Errorf("clientauth: set assertion keys: %w", err)
	}
	if !found {
		return fmt.Errorf("%w: %s", ErrClientNotFound, id)
	}
	return nil
}

// parsePublicKey reads PEM (a public key or certificate), a JWK or a JWK
// Set, and returns the JWK Set of its public keys.
func parsePublicKey(raw []byte) ([]byte, error) {
	var keys []jwkset.JWK
	if block, _ := pem.Decode(raw); block != nil {
		var key any
		var err error
		if block.Type == "CERTIFICATE" {
			var cert *x509.Certificate
			if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
				key = cert.PublicKey
			}
		} else {
			key, err = jwkset.LoadX509KeyInfer(block)
		}
		if err != nil {
			return nil, fmt.Errorf("PEM %s: %w", block.Type, err)
		}
		if err := jose.CheckPublic(key); err != nil {
			return nil, err
		}
		k, err := jwkset.NewJWKFromKey(key, jwkset.JWKOptions{})
		if err != nil {
			return nil, err
		}
		keys = []jwkset.JWK{k}
	} else {
		set := raw
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, errors.New("neither PEM nor JSON (a JWK or JWK Set)")
		}
		if _, isSet := probe["keys"]; !isSet {
			set = append(append([]byte(`{"keys":[`), raw...), "]}"...)
		}
		var err error
		if keys, err = jose.PublicKeys(set); err != nil {
			return nil, err
		}
	}
	out := jwkset.JWKSMarshal{}
	for _, k := range keys {
		out.Keys = append(out.Keys, k.Marshal())
	}
	return json.Marshal(out)
}
