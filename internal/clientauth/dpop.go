package clientauth

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/connectd/connectd/internal/jose"
)

// DPoPHeader carries an RFC 9449 DPoP proof.
const DPoPHeader = "DPoP"

// ErrInvalidDPoP means a client that must prove its calls with DPoP, or a
// call made with the DPoP authorization scheme, came with a proof that was
// refused: more than one DPoP header, not typ dpop+jwt, a crit header, an
// algorithm outside the allow-list, a jwk that is none of the client's
// registered keys, a bad signature, htm or htu not this request's, ath not
// the hash of this request's Authorization credential, iat too old or in
// the future, or a jti already used.
var ErrInvalidDPoP = errors.New("clientauth: invalid DPoP proof")

// ErrMissingDPoP means a call that needs a DPoP proof (the client requires
// DPoP, or it used the DPoP authorization scheme) sent no DPoP header. It
// wraps ErrInvalidDPoP.
var ErrMissingDPoP = fmt.Errorf("%w: no DPoP proof", ErrInvalidDPoP)

// dpopWindow is how old a proof's iat may be (beside the skew): a proof is
// made for one request, at once.
const dpopWindow = time.Minute

type dpopClaims struct {
	jwt.RegisteredClaims
	HTM string `json:"htm"`
	HTU string `json:"htu"`
	ATH string `json:"ath"`
}

// AccessTokenHash is a DPoP proof's ath for the access token it is sent
// with (RFC 9449 §4.2): base64url(SHA-256(token)), unpadded. On /v1 the
// access token is the Authorization credential: the client key, or the
// client assertion.
func AccessTokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// VerifyDPoP checks proofs, the DPoP headers of a request of client cl
// whose Authorization credential is accessToken, with method to htu (scheme,
// host and path, without query): RFC 9449 §4.3, with the key bound to the
// client — the proof's jwk must be one of the keys cl registered for
// private_key_jwt (a newly published one is found as for assertions) — and
// ath required, the hash of accessToken. Exactly one header: none is
// ErrMissingDPoP, more than one ErrInvalidDPoP. Its jti is spent across
// replicas like an assertion's, before anything is answered.
func (c *Clients) VerifyDPoP(ctx context.Context, cl Client, proofs []string, accessToken, method, htu string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidDPoP}, args...)...)
	}
	switch {
	case len(proofs) == 0 || len(proofs) == 1 && proofs[0] == "":
		return fmt.Errorf("%w: send one %s header with every call", ErrMissingDPoP, DPoPHeader)
	case len(proofs) > 1:
		return bad("more than one %s header", DPoPHeader)
	}
	proof := proofs[0]
	if len(proof) > maxAssertionBytes {
		return bad("oversized")
	}
	var pre dpopClaims
	tok, _, err := jwt.NewParser().ParseUnverified(proof, &pre)
	if err != nil {
		return bad("malformed")
	}
	if typ, _ := tok.Header["typ"].(string); !strings.EqualFold(typ, "dpop+jwt") {
		return bad("typ must be dpop+jwt")
	}
	if err := jose.NoCrit(tok.Header); err != nil {
		return bad("%v", err)
	}
	if alg, _ := tok.Header["alg"].(string); !slices.Contains(algorithms, alg) {
		return bad("algorithm %q not allowed", alg)
	}
	raw, err := json.Marshal(tok.Header["jwk"])
	if err != nil || tok.Header["jwk"] == nil {
		return bad("the header must carry the public key (jwk)")
	}
	var m jwkset.JWKMarshal
	if err := json.Unmarshal(raw, &m); err != nil || m.D != "" || m.K != "" {
		return bad("jwk must be a public key")
	}
	jwk, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
	if err != nil {
		return bad("jwk: %v", err)
	}
	key, err := c.registeredKey(ctx, cl, jwk.Key(), pre.IssuedAt)
	if err != nil {
		return err
	}
	now := c.now()
	var claims dpopClaims
	parser := jwt.NewParser(jwt.WithValidMethods(algorithms), jwt.WithLeeway(c.skew),
		jwt.WithTimeFunc(func() time.Time { return now }), jwt.WithIssuedAt())
	if _, err := parser.ParseWithClaims(proof, &claims, func(*jwt.Token) (any, error) { return key, nil }); err != nil {
		return bad("%v", err)
	}
	if claims.HTM != method {
		return bad("htm is not this request's method")
	}
	if !sameHTU(claims.HTU, htu) {
		return bad("htu is not this request's URL")
	}
	if claims.ATH == "" || subtle.ConstantTimeCompare([]byte(claims.ATH), []byte(AccessTokenHash(accessToken))) != 1 {
		return bad("ath must be the hash of this request's Authorization credential")
	}
	if claims.IssuedAt == nil || now.Sub(claims.IssuedAt.Time) > dpopWindow+c.skew {
		return bad("iat must be within %s", dpopWindow)
	}
	if claims.ID == "" || len(claims.ID) > maxJTI {
		return bad("jti must be 1-%d characters", maxJTI)
	}
	// Acceptable until iat + window + skew on this replica's clock.
	spent, err := c.spendJTI(ctx, cl.ID, "dpop:"+claims.ID, claims.IssuedAt.Add(dpopWindow+c.skew))
	if err != nil {
		return fmt.Errorf("clientauth: record DPoP proof: %w", err)
	}
	if !spent {
		return bad("jti already used (a replayed proof)")
	}
	return nil
}

// registeredKey is the one of cl's registered keys that equals pub: of its
// JWK Set, or of its JWKS URL's keys in the key cache, fetched again for a
// proof issued at iat (unverified) that may be newer than them, as for an
// unknown kid (keySet.unknownKey).
func (c *Clients) registeredKey(ctx context.Context, cl Client, pub any, iat *jwt.NumericDate) (crypto.PublicKey, error) {
	match := func(keys []jwkset.JWK) crypto.PublicKey {
		for _, k := range keys {
			if e, ok := k.Key().(interface{ Equal(crypto.PublicKey) bool }); ok && e.Equal(pub) {
				return k.Key()
			}
		}
		return nil
	}
	none := fmt.Errorf("%w: jwk is none of the client's registered keys", ErrInvalidDPoP)
	switch {
	case len(cl.JWKS) > 0:
		keys, err := jose.PublicKeys(cl.JWKS)
		if err != nil {
			return nil, fmt.Errorf("clientauth: client %s: registered keys: %w", cl.ID, err)
		}
		if key := match(keys); key != nil {
			return key, nil
		}
		return nil, none
	case cl.JWKSURL != "":
		s := c.remote.Set(cl.JWKSURL)
		if err := s.Keys(ctx); err != nil {
			return nil, err
		}
		var key crypto.PublicKey
		found := func() bool {
			keys, err := s.Verifying(ctx)
			key = match(keys)
			return err == nil && key != nil
		}
		if found() {
			return key, nil
		}
		switch err := s.UnknownKey(ctx, iat, found); {
		case err == nil:
			return key, nil
		case errors.Is(err, jose.ErrUnknownKey):
			return nil, none
		default:
			return nil, err
		}
	}
	return nil, fmt.Errorf("%w: the client registered no key", ErrInvalidDPoP)
}

// sameHTU compares a proof's htu with the request's URL: scheme and host
// case-insensitively, the path exactly, query and fragment ignored (RFC 9449
// §4.3 step 9).
func sameHTU(got, want string) bool {
	g, err1 := url.Parse(got)
	w, err2 := url.Parse(want)
	return err1 == nil && err2 == nil && strings.EqualFold(g.Scheme, w.Scheme) && strings.EqualFold(g.Host, w.Host) &&
		g.EscapedPath() == w.EscapedPath()
}

const setDPoPSQL = `UPDATE clients SET dpop_required = $2 WHERE id = $1 AND ($2 = false OR jwks_url IS NOT NULL OR jwks IS NOT NULL)`

// SetDPoPRequired makes every /v1 call of client id need a DPoP proof by
// one of its private_key_jwt keys (or no longer). A client without such
// keys cannot require it (ErrInvalidClient). Every replica's key cache
// learns of it.
func (c *Clients) SetDPoPRequired(ctx context.Context, id string, required bool) error {
	tag, err := c.pool.Exec(ctx, setDPoPSQL, id, required)
	if err == nil && tag.RowsAffected() > 0 {
		_, err = c.pool.Exec(ctx, notifySQL, InvalidationChannel, id)
	}
	c.forget(id)
	if err != nil {
		return fmt.Errorf("clientauth: set DPoP: %w", err)
	}
	if tag.RowsAffected() == 0 {
		if _, err := c.Get(ctx, id); err != nil {
			return err
		}
		return fmt.Errorf("%w: register keys for private_key_jwt first (clients jwt-keys)", ErrInvalidClient)
	}
	return nil
}
