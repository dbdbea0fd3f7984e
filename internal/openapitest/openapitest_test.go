package openapitest

import (
	"strings"
	"testing"
)

// TestCheck: the checker refuses what docs/openapi.yaml does not describe,
// so a conformance pass means something.
func TestCheck(t *testing.T) {
	spec, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	const js = "application/json"
	tests := []struct {
		name, method, path string
		status             int
		body               string
		wantErr            string // "" = valid
	}{
		{"unlink ok", "DELETE", "/v1/connections/github", 200,
			`{"provider":"github","revoked_at_provider":true,"revocation":"revoked"}`, ""},
		{"unlink with an undocumented member", "DELETE", "/v1/connections/github", 200,
			`{"provider":"github","revoked_at_provider":true,"revocation":"revoked","extra":1}`, "does not describe"},
		{"unlink with an unknown revocation", "DELETE", "/v1/connections/github", 200,
			`{"provider":"github","revoked_at_provider":false,"revocation":"maybe"}`, "does not describe"},
		{"undocumented status", "DELETE", "/v1/connections/github", 418, `{"error":"teapot"}`, "does not list"},
		{"error envelope", "GET", "/v1/connections/github/token", 403,
			`{"error":"insufficient_scope","error_description":"x","request_id":"r","missing_scopes":["a"]}`, ""},
		{"error with a stray member", "GET", "/v1/connections/github/token", 403,
			`{"error":"insufficient_scope","secret":"x"}`, "does not describe"},
		{"status with a documented reason", "GET", "/v1/elicitations/abc", 200,
			`{"elicitation_id":"abc","status":"declined","reason":"user_denied","provider":"p","expires_at":"2026-11-30T12:00:00Z"}`, ""},
		{"status with an undocumented reason", "GET", "/v1/elicitations/abc", 200,
			`{"elicitation_id":"abc","status":"declined","reason":"bored","provider":"p","expires_at":"2026-11-30T12:00:00Z"}`, "does not describe"},
		{"status with a bad date", "GET", "/v1/elicitations/abc", 200,
			`{"elicitation_id":"abc","status":"pending","provider":"p","expires_at":"tomorrow"}`, "does not describe"},
		{"resolve, not the elicitation id route", "POST", "/v1/elicitations/resolve", 200,
			`{"elicitation_id":"abc","status":"pending","provider":"p","expires_at":"2026-11-30T12:00:00Z","request_state":"v1.x"}`, "does not describe"},
		{"undocumented route is not checked", "GET", "/v1/nothing", 404, `{"error":"not_found"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := spec.Check(tt.method, tt.path, tt.status, js, []byte(tt.body))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}
