package mcpauth

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// DPoPHeader carries an RFC 9449 DPoP proof.
const DPoPHeader = "DPoP"

// ErrInvalidDPoP means a client that must prove its calls with DPoP sent no
// proof, or one that was refused: not typ dpop+jwt, an algorithm outside the
// allow-list, a jwk that is none of the client's registered keys, a bad
// signature, htm or htu not this request's, iat too old or in the future, or
// a jti already used.
var ErrInvalidDPoP = errors.New("mcpauth: invalid DPoP proof")

// dpopWindow is how old a proof's iat may be (beside the skew): a proof is
// made for one request, at once.
const dpopWindow = time.Minute

type dpopClaims struct {
	jwt.RegisteredClaims
	HTM string `json:"htm"`
	HTU string `json:"htu"`
}

// VerifyDPoP checks proof, the DPoP header of a request of client cl with
// method to htu (scheme, host and path, without query): RFC 9449 §4.3, with
// the key bound to the client — the proof's jwk must be one of the keys cl
// registered for private_key_jwt (a newly published one is found as for
// assertions). Its jti is spent across replicas like an assertion's.
func (c *Clients) VerifyDPoP(ctx context.Context, cl Client, proof, method, htu string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidDPoP}, args...)...)
	}
	if proof == "" {
		return bad("this client must send a %s proof with every call", DPoPHeader)
	}
	if len(proof) > maxAssertionBytes {
		return bad("oversized")
	}
	tok, _, err := jwt.NewParser().ParseUnverified(proof, &dpopClaims{})
	if err != nil {
		return bad("malformed")
	}
	if typ, _ := tok.Header["typ"].(string); !strings.EqualFold(typ, "dpop+jwt") {
		return bad("typ must be dpop+jwt")
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
	key, err := c.registeredKey(ctx, cl, jwk.Key())
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
	if claims.IssuedAt == nil || now.Sub(claims.IssuedAt.Time) > dpopWindow+c.skew {
		return bad("iat must be within %s", dpopWindow)
	}
	if claims.ID == "" || len(claims.ID) > maxJTI {
		return bad("jti must be 1-%d characters", maxJTI)
	}
	tag, err := c.pool.Exec(ctx, spendJTISQL, cl.ID, "dpop:"+claims.ID, claims.IssuedAt.Add(dpopWindow+2*c.skew))
	if err != nil {
		return fmt.Errorf("mcpauth: record DPoP proof: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return bad("jti already used (a replayed proof)")
	}
	return nil
}

// registeredKey is the one of cl's registered keys that equals pub.
func (c *Clients) registeredKey(ctx context.Context, cl Client, pub any) (crypto.PublicKey, error) {
	find := func() (crypto.PublicKey, error) {
		var keys []jwkset.JWK
		switch {
		case len(cl.JWKS) > 0:
			var err error
			if keys, err = publicKeys(cl.JWKS); err != nil {
				return nil, fmt.Errorf("mcpauth: client %s: registered keys: %w", cl.ID, err)
			}
		case cl.JWKSURL != "":
			store, err := c.remote.keys(ctx, c, cl.JWKSURL)
			if err != nil {
				return nil, err
			}
			if keys, err = store.KeyReadAll(ctx); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%w: the client registered no key", ErrInvalidDPoP)
		}
		for _, k := range keys {
			if e, ok := k.Key().(interface{ Equal(crypto.PublicKey) bool }); ok && e.Equal(pub) {
				return k.Key(), nil
			}
		}
		return nil, nil
	}
	key, err := find()
	if err == nil && key == nil && cl.JWKSURL != "" && c.remote.refetchFor(c, cl.JWKSURL) {
		key, err = find() // a key just published
	}
	if err != nil {
		return nil, err
	}
	if key == nil {
		return nil, fmt.Errorf("%w: jwk is none of the client's registered keys", ErrInvalidDPoP)
	}
	return key, nil
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
		return fmt.Errorf("mcpauth: set DPoP: %w", err)
	}
	if tag.RowsAffected() == 0 {
		if _, err := c.Get(ctx, id); err != nil {
			return err
		}
		return fmt.Errorf("%w: register keys for private_key_jwt first (clients jwt-keys)", ErrInvalidClient)
	}
	return nil
}
