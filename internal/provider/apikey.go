package provider

import (
	"context"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/connectd/connectd/internal/egress"
)

// MaxAPIKeyLength bounds an API key a user may store.
const MaxAPIKeyLength = 4096

// apiKeyProvider implements APIKey.
type apiKeyProvider struct {
	spec    Spec
	client  *http.Client
	pattern *regexp.Regexp // nil: any well-formed key
}

func (p *apiKeyProvider) Info() Info {
	return Info{Name: p.spec.Name, DisplayName: p.spec.DisplayName, Kind: KindAPIKey, Verifiable: p.spec.Verify != nil,
		APIBaseURL: p.spec.APIBaseURL, APIAuth: apiAuth(&p.spec), RateLimits: slices.Clone(p.spec.RateLimits),
		ScopeDescriptions: maps.Clone(p.spec.ScopeDescriptions), LogoURL: p.spec.LogoURL, Template: p.spec.Template}
}

// Verify checks the key's form (and the provider's key format, when the
// spec has one: a pasted key of another service is refused before it is
// sent anywhere), then (when configured) sends the verification request
// with the key in its header, through the egress-bound client.
func (p *apiKeyProvider) Verify(ctx context.Context, key string) error {
	fail := func(kind error, status int, cause error) error {
		return &Error{Provider: p.spec.Name, Op: "verify", Kind: kind, Status: status, Err: cause}
	}
	if key == "" || len(key) > MaxAPIKeyLength || strings.TrimSpace(key) != key {
		return fail(ErrInvalidKey, 0, nil)
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return fail(ErrInvalidKey, 0, nil)
		}
	}
	if p.pattern != nil && !p.pattern.MatchString(key) {
		return &Error{Provider: p.spec.Name, Op: "verify", Kind: ErrInvalidKey, Code: "key_format"}
	}
	v := p.spec.Verify
	if v == nil {
		return nil
	}
	req, err := http.NewRequestWithContext(egress.WithClass(ctx, egress.ClassToken), v.Method, v.URL, nil)
	if err != nil {
		return fail(ErrRejected, 0, nil)
	}
	for _, k := range slices.Sorted(maps.Keys(v.Headers)) {
		req.Header.Set(k, v.Headers[k])
	}
	req.Header.Set(v.Header, fillSecret(v.Value, keyPlaceholder, keyBase64Placeholder, key))
	resp, err := p.client.Do(req)
	if err != nil {
		return fail(ErrUnavailable, 0, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case resp.StatusCode == v.ExpectStatus:
		return nil
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return fail(ErrUnavailable, resp.StatusCode, nil)
	default:
		return fail(ErrInvalidKey, resp.StatusCode, nil)
	}
}
