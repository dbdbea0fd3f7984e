package web_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/proxy"
	"github.com/connectd/connectd/internal/web"
)

// TestProxyRows (issue 33): the proxy's refusals are rows of the one table;
// the route wraps them with the provider's name and picks nothing itself.
func TestProxyRows(t *testing.T) {
	t.Parallel()
	about := func(err error) error { return problem.About("github", fmt.Errorf("proxy call: %w", err)) }
	for _, tt := range []struct {
		err            error
		status         int
		code           string
		header, value  string
		descHasSubject bool
	}{
		{about(proxy.ErrPath), 400, "invalid_proxy_path", "", "", false},
		{about(proxy.ErrMethod), 405, "method_not_allowed", "Allow", "GET, HEAD, POST, PUT, PATCH, DELETE", false},
		{about(proxy.ErrOverride), 400, "proxy_override_refused", "", "", false},
		{about(clientauth.ErrProxyNotAllowed), 403, "proxy_not_allowed", "", "", true},
		{about(proxy.ErrNotSupported), 404, "proxy_not_supported", "", "", true},
		{about(proxy.ErrTooLarge), 413, "request_too_large", "", "", false},
		{about(proxy.ErrResponseTooLarge), 502, "provider_response_too_large", "", "", true},
		{about(proxy.ErrRefused), 401, "provider_unauthorized", "", "", true},
		{about(&proxy.HeldError{Until: time.Now().Add(30 * time.Second), Left: 29*time.Second + time.Millisecond}), 429,
			"provider_rate_limited", "Retry-After", "30", true},
		{about(&proxy.HeldError{Left: time.Millisecond}), 429, "provider_rate_limited", "Retry-After", "1", true},
		{about(proxy.ErrBusy), 503, "provider_unavailable", "Retry-After", "1", true},
		{about(fmt.Errorf("%w: dial tcp: refused", proxy.ErrUnavailable)), 503, "provider_unavailable", "Retry-After", "5", true},
		{about(fmt.Errorf("%w (within 15s)", proxy.ErrTimeout)), 504, "provider_timeout", "Retry-After", "5", true},
		{fmt.Errorf("%w: %q", proxy.ErrBadTimeout, "soon"), 400, "invalid_request", "", "", false},
	} {
		e := web.AsError(tt.err)
		if e.Status != tt.status || e.Code != tt.code || !errors.Is(e, tt.err) {
			t.Errorf("%v: %d %s, want %d %s (the cause kept for the log)", tt.err, e.Status, e.Code, tt.status, tt.code)
		}
		if tt.header != "" && e.Header.Get(tt.header) != tt.value {
			t.Errorf("%v: %s %q, want %q", tt.err, tt.header, e.Header.Get(tt.header), tt.value)
		}
		if tt.descHasSubject != strings.Contains(e.Description, "github") || strings.Contains(e.Description, "dial") {
			t.Errorf("%v: description %q", tt.err, e.Description)
		}
	}
}
