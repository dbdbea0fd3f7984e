package web_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/internal/webhook"
)

// TestErrorTable: the errors of the packages below the handlers get their
// status, code and description from the one table, the description from the
// error's problem.Detail or naming the problem.About subject — never from
// the error's text, which may carry what the caller must not see.
func TestErrorTable(t *testing.T) {
	t.Parallel()
	secret := errors.New("pq: password=hunter2 at 10.0.0.7")
	tests := []struct {
		name   string
		err    error
		status int
		code   string
		desc   string
		fields map[string]any
		header string
	}{
		{"not connected", problem.About("github", fmt.Errorf("lookup: %w", vault.ErrNotConnected)), 404, "not_connected",
			"no github connection for this user", nil, ""},
		{"not connected, no subject", vault.ErrNotConnected, 404, "not_connected", "the user has no such connection", nil, ""},
		{"missing scopes", problem.About("github", fmt.Errorf("token: %w", &vault.MissingScopesError{Provider: "github", Missing: []string{"repo"}})),
			403, "insufficient_scope", "the github connection lacks required scopes; mint an elicitation with them",
			map[string]any{"missing_scopes": []any{"repo"}}, ""},
		{"reauthorization", problem.About("slack", errors.Join(secret, vault.ErrReauthorizationRequired)), 409, "reauthorization_required",
			"the slack connection must be authorized again; mint an elicitation", nil, ""},
		{"provider down", problem.About("slack", errors.Join(secret, vault.ErrProviderUnavailable)), 503, "provider_unavailable",
			"slack could not be reached to refresh the token; retry later", nil, "5"},
		{"undecryptable", problem.About("gitlab", fmt.Errorf("connection c1: %w: %v", keyring.ErrDecrypt, secret)), 409,
			"reauthorization_required", "the stored gitlab credential cannot be used; mint an elicitation", nil, ""},
		{"invalid, described", fmt.Errorf("create: %w", problem.Detail(webhook.ErrInvalid, "url must be at most %d bytes", 2048)),
			400, "invalid_request", "url must be at most 2048 bytes", nil, ""},
		{"not found, bare", errors.Join(secret, webhook.ErrNotFound), 404, "not_found", "no such resource", nil, ""},
		{"conflict", webhook.ErrExists, 409, "conflict", "this MCP server already has an endpoint at that URL", nil, ""},
		{"untyped", secret, 500, "internal_error", "internal server error", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := web.AsError(tt.err)
			if e.Status != tt.status || e.Code != tt.code || e.Description != tt.desc {
				t.Fatalf("got %d %q %q, want %d %q %q", e.Status, e.Code, e.Description, tt.status, tt.code, tt.desc)
			}
			if tt.fields != nil && fmt.Sprint(e.Fields) != fmt.Sprint(tt.fields) {
				t.Fatalf("fields %v, want %v", e.Fields, tt.fields)
			}
			if got := e.Header.Get("Retry-After"); got != tt.header {
				t.Fatalf("Retry-After %q, want %q", got, tt.header)
			}
			if tt.status < 500 && !errors.Is(e, tt.err) && !reflect.DeepEqual(e.Err, tt.err) {
				t.Fatalf("the cause %v is not kept for the log", tt.err)
			}
		})
	}
}
