package clientauth_test

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// unsigned is an alg none token with claims.
func unsigned(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "at+jwt"})
	c, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c) + "."
}
