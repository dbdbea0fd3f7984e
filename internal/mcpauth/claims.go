package mcpauth

import "github.com/golang-jwt/jwt/v5"

// verifiedClaims returns every claim of an ID token that VerifyIDToken has
// already accepted. Parsing without verification is safe only because of
// that: the caller must never hand it a token it has not verified.
func verifiedClaims(raw string) map[string]any {
	c := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(raw, c); err != nil {
		return map[string]any{}
	}
	return c
}
