package client_test

import (
	"errors"
	"os"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/connectd/connectd/client"
)

// specCodes are the error codes docs/openapi.yaml lists (the Error schema's
// enum): every code a /v1 answer may carry.
func specCodes(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas struct {
				Error struct {
					Properties struct {
						Error struct {
							Enum []string `yaml:"enum"`
						} `yaml:"error"`
					} `yaml:"properties"`
				} `yaml:"Error"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	codes := doc.Components.Schemas.Error.Properties.Error.Enum
	if len(codes) < 20 {
		t.Fatalf("docs/openapi.yaml lists %d error codes", len(codes))
	}
	return codes
}

// genericCodes need no action of their own from an MCP server: they match no
// family (a 5xx is still ErrUnavailable-free: internal_error is a bug).
var genericCodes = []string{"internal_error", "unsupported_media_type", "cross_origin_request"}

// TestErrorCodesMatchTheSpec (issue 23 §3): every error code the spec lists
// is one the client maps to an error family, or one of the generic ones, and
// the client knows no code the spec does not list.
func TestErrorCodesMatchTheSpec(t *testing.T) {
	t.Parallel()
	families := []error{client.ErrNotConnected, client.ErrConsentRequired, client.ErrInsufficientScope,
		client.ErrReauthorizationRequired, client.ErrNotFound, client.ErrInvalidClient, client.ErrUserToken,
		client.ErrUnknownProvider, client.ErrProviderNotAllowed, client.ErrInvalidRequest, client.ErrRequestState,
		client.ErrRateLimited, client.ErrUnavailable, client.ErrAccountRequired, client.ErrApprovalRequired}
	spec := specCodes(t)
	for _, code := range spec {
		// A 400 status matches no family by itself: only the code can.
		e := &client.APIError{Status: 400, Code: code}
		mapped := slices.ContainsFunc(families, func(f error) bool { return errors.Is(e, f) })
		if generic := slices.Contains(genericCodes, code); mapped == generic {
			t.Errorf("code %q: mapped to a family %t, generic %t", code, mapped, generic)
		}
	}
	for _, code := range client.KnownCodes() {
		if !slices.Contains(spec, code) {
			t.Errorf("the client knows %q, which docs/openapi.yaml does not list", code)
		}
	}
}
