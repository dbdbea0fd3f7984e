package web_test

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"testing"

	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/refusal"
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
		// The same mcpauth sentinel at sign-in and on /v1.
		{"ID token at sign-in", fmt.Errorf("%w: %w", refusal.ErrSignIn, errors.Join(secret, mcpauth.ErrInvalidToken)), 400,
			"invalid_id_token", "The issuer's answer could not be verified. Please start again.", nil, ""},
		{"user token on /v1", errors.Join(secret, mcpauth.ErrInvalidToken), 401, "invalid_token", "the user token is not valid", nil, ""},
		{"issuer at sign-in", fmt.Errorf("%w: %w", refusal.ErrSignIn, mcpauth.ErrIssuerUnavailable), 503, "issuer_unavailable",
			"The sign-in service cannot be reached. Please try again later.", nil, ""},
		{"issuer on /v1", mcpauth.ErrIssuerUnavailable, 503, "jwks_unavailable", "the token issuer's keys could not be fetched; retry later",
			nil, "30"},
		{"sign-in, the database", fmt.Errorf("%w: %w", refusal.ErrSignIn, secret), 500, "internal_error", "internal server error", nil, ""},
		{"return_to", problem.Detail(refusal.ErrReturnTo, "%s", "return_to must be an admin page."), 400, "invalid_return_to",
			"return_to must be an admin page.", nil, ""},
		{"request_state", fmt.Errorf("resolve: %w", refusal.ErrStateReplayed), 409, "request_state_replayed",
			"the request_state was already resolved; use the fresh one from that answer", nil, ""},
		{"consent, what to approve", problem.Detail(&refusal.ConsentError{Unapproved: []string{"repo"}}, "approve %s", "repo"), 403,
			"consent_required", "approve repo", map[string]any{"unapproved_scopes": []any{"repo"}, "account_changed": false}, ""},
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

// TestRowProperties: what a route that formats an answer reads of its row
// — a connect link to mint, a connection to name, a refused client — and
// the token endpoint's RFC 6749 form, which renames a /v1 code only by its
// row (the /v1 code kept in connectd_error), never by the code's text.
func TestRowProperties(t *testing.T) {
	t.Parallel()
	about := func(err error) error { return problem.About("github", err) }
	tests := []struct {
		name                string
		err                 error
		mint, names, client bool
		basic               bool
		status              int
		code, v1, challenge string
	}{
		{"not connected", about(vault.ErrNotConnected), true, false, false, false, 400, "not_connected", "", ""},
		{"reauthorization", about(vault.ErrReauthorizationRequired), true, true, false, false, 400, "reauthorization_required", "", ""},
		{"undecryptable", about(keyring.ErrDecrypt), true, true, false, false, 400, "reauthorization_required", "", ""},
		{"missing scopes", about(&vault.MissingScopesError{Missing: []string{"repo"}}), true, true, false, false, 400,
			"insufficient_scope", "", ""},
		{"consent", problem.Detail(refusal.ErrConsentRequired, "no"), true, false, false, false, 400, "consent_required", "", ""},
		{"account changed", about(vault.ErrAccountChanged), true, false, false, false, 400, "consent_required", "", ""},
		{"wrong audience", mcpauth.ErrWrongAudience, false, false, false, true, 400, "invalid_grant", "wrong_audience", ""},
		{"missing user token", mcpauth.ErrMissingUserToken, false, false, false, false, 400, "invalid_grant", "missing_user_token", ""},
		{"not the user's connection", problem.Detail(problem.ErrNotFound, "no such connection"), false, false, false, false, 400,
			"invalid_target", "not_found", ""},
		{"provider not allowed", refusal.ErrProviderNotAllowed, false, false, false, false, 400, "invalid_target",
			"provider_not_allowed", ""},
		{"proxy-only", refusal.ErrTokenReleaseDisabled, false, false, false, false, 400, "unauthorized_client",
			"token_release_disabled", ""},
		{"grant type", refusal.ErrGrantType, false, false, false, false, 400, "unsupported_grant_type", "", ""},
		{"client key, Basic", mcpauth.ErrInvalidClientKey, false, false, true, true, 401, "invalid_client", "", `Basic realm="connectd"`},
		{"client key, post", mcpauth.ErrMissingClientKey, false, false, true, false, 401, "invalid_client", "", ""},
		{"client assertion", mcpauth.ErrInvalidAssertion, false, false, true, false, 401, "invalid_client", "", ""},
		{"DPoP proof", mcpauth.ErrInvalidDPoP, false, false, true, false, 401, "invalid_dpop_proof", "", ""},
		{"issuer keys", mcpauth.ErrIssuerUnavailable, false, false, false, true, 503, "jwks_unavailable", "", ""},
		{"a handler's own", web.Errorf(http.StatusForbidden, "consent_required", "ad hoc"), false, false, false, false, 400,
			"consent_required", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := web.AsError(tt.err)
			if e.Mint() != tt.mint || e.NamesConnection() != tt.names || e.ClientRefused() != tt.client {
				t.Fatalf("%s: mint %v names %v client %v, want %v %v %v", e.Code, e.Mint(), e.NamesConnection(),
					e.ClientRefused(), tt.mint, tt.names, tt.client)
			}
			o := web.AsOAuthError(tt.err, tt.basic)
			v1, _ := o.Fields["connectd_error"].(string)
			if o.Status != tt.status || o.Code != tt.code || v1 != tt.v1 {
				t.Fatalf("token endpoint: %d %q (%q), want %d %q (%q)", o.Status, o.Code, v1, tt.status, tt.code, tt.v1)
			}
			if got := o.Header.Get("Www-Authenticate"); got != tt.challenge {
				t.Fatalf("WWW-Authenticate %q, want %q", got, tt.challenge)
			}
			if e.Code != web.AsError(tt.err).Code || (e.Fields["connectd_error"] != nil) {
				t.Fatal("the token endpoint's form changed the /v1 answer")
			}
		})
	}
}
