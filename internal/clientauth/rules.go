package clientauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/connectd/connectd/internal/names"
)

// ProxyRules restrict what a client may do through the proxy at one
// provider: a call is allowed only when a rule matches its method and path.
type ProxyRules struct {
	Rules []string `json:"rules"` // "METHOD PATTERN"
	// Description is the operator's words for the consent page.
	Description string `json:"description"`
}

// Limits of a rule set.
const (
	maxRules       = 50
	maxRuleBytes   = 512
	maxDescription = 300
)

// proxyRulesColumn reads a client's rules by provider with its row.
const proxyRulesColumn = `(SELECT coalesce(jsonb_object_agg(r.provider, jsonb_build_object('rules', r.rules,
	'description', r.description)), '{}'::jsonb) FROM client_proxy_rules r WHERE r.client_id = c.id)`

func decodeRules(raw []byte) (map[string]ProxyRules, error) {
	var m map[string]ProxyRules
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("mcpauth: proxy rules: %w", err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}

// CheckProxyRules checks a rule set: 1–50 rules "METHOD PATTERN", METHOD an
// HTTP method token or "*", PATTERN a path starting with "/" (at most 512
// bytes, no white space or control character) that a path the proxy sends
// could match (neverSent); a description of at most 300 characters of text.
func CheckProxyRules(r ProxyRules) error {
	if len(r.Rules) == 0 || len(r.Rules) > maxRules {
		return fmt.Errorf("%w: 1-%d proxy rules are required", ErrInvalidClient, maxRules)
	}
	for i, rule := range r.Rules {
		method, pattern, ok := strings.Cut(rule, " ")
		if !ok || len(rule) > maxRuleBytes || !validMethod(method) || !strings.HasPrefix(pattern, "/") ||
			strings.ContainsFunc(pattern, func(c rune) bool { return unicode.IsSpace(c) || unicode.IsControl(c) }) {
			return fmt.Errorf("%w: proxy rule %d must be \"METHOD /path/pattern\" (e.g. \"GET /repos/*/issues*\")", ErrInvalidClient, i+1)
		}
		if why := neverSent(pattern); why != "" {
			return fmt.Errorf("%w: proxy rule %d can never match: the proxy sends no path with %s", ErrInvalidClient, i+1, why)
		}
	}
	if utf8.RuneCountInString(r.Description) > maxDescription || !utf8.ValidString(r.Description) ||
		strings.ContainsFunc(r.Description, unicode.IsControl) {
		return fmt.Errorf("%w: the rules' description is at most %d characters of text", ErrInvalidClient, maxDescription)
	}
	return nil
}

// neverSent names what of pattern no path the proxy sends can hold (its
// path rule: docs/api.md#the-path-rule), so that a rule the operator
// wrote for one never silently allows nothing: ";", an empty, "." or ".."
// segment, a lower-case escape, an escape of a letter, digit or "-._~"
// (the proxy sends those decoded).
func neverSent(pattern string) string {
	switch {
	case strings.Contains(pattern, ";"):
		return `";"`
	case strings.Contains(pattern, "//"):
		return "an empty segment"
	}
	for _, seg := range strings.Split(pattern, "/") {
		if seg == "." || seg == ".." {
			return `a "." or ".." segment`
		}
	}
	for i := strings.IndexByte(pattern, '%'); i >= 0 && i+2 < len(pattern); {
		h := pattern[i+1 : i+3]
		if strings.ToUpper(h) != h {
			return "a lower-case escape (write %" + strings.ToUpper(h) + ")"
		}
		if c, err := strconv.ParseUint(h, 16, 8); err == nil && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' ||
			c >= '0' && c <= '9' || strings.IndexByte("-._~", byte(c)) >= 0) {
			return "an escaped letter, digit or \"-._~\" (write it as it is)"
		}
		j := strings.IndexByte(pattern[i+1:], '%')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return ""
}

func validMethod(m string) bool {
	if m == "*" {
		return true
	}
	if m == "" || len(m) > 16 {
		return false
	}
	for _, c := range m {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

// ErrProxyNotAllowed: the call is outside the client's request rules at
// the provider.
var ErrProxyNotAllowed = errors.New("mcpauth: the client's request rules do not allow this call")

// Allows reports whether a call of method to path matches one of the
// rules. path is the API path exactly as the provider will receive it
// below its API base, starting with "/" (package proxy's Clean form: still
// escaped, an escaped "/" stays "%2F"); a pattern matches it byte for byte,
// case-sensitively, "*" standing for any run of characters. Methods are
// case-sensitive too: a rule's method is the call's, "*", or, for a HEAD
// call, GET (HEAD is GET without the body: a GET rule allows it; a HEAD
// rule allows HEAD alone).
func (r ProxyRules) Allows(method, path string) bool { return r.Matching(method, path) != "" }

// Matching is the pattern of the first rule that matches a call of method
// to path, as Allows matches them; "" for none (a pattern starts with
// "/"). The access receipts name a proxied call by it.
func (r ProxyRules) Matching(method, path string) string {
	for _, rule := range r.Rules {
		m, pattern, _ := strings.Cut(rule, " ")
		if (m == "*" || m == method || method == http.MethodHead && m == http.MethodGet) && globMatch(pattern, path) {
			return pattern
		}
	}
	return ""
}

// globMatch matches s against pattern, where "*" stands for any run of
// characters (slashes too) and everything else for itself.
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}

const (
	upsertRulesSQL = `WITH changed AS (INSERT INTO client_proxy_rules (client_id, provider, rules, description)
		VALUES ($1, $2, $3, $4) ON CONFLICT (client_id, provider) DO UPDATE
		SET rules = EXCLUDED.rules, description = EXCLUDED.description RETURNING client_id)
		SELECT pg_notify('` + InvalidationChannel + `', client_id) FROM changed`
	deleteRulesSQL = `WITH changed AS (DELETE FROM client_proxy_rules WHERE client_id = $1 AND provider = $2
		RETURNING client_id) SELECT pg_notify('` + InvalidationChannel + `', client_id) FROM changed`
)

// SetProxyRules sets (or, with none, clears) the client's proxy rules at
// provider; every replica's key cache learns of it by notification.
func (c *Clients) SetProxyRules(ctx context.Context, id, provider string, r *ProxyRules) error {
	if !names.ValidProvider(provider) {
		return fmt.Errorf("%w: provider id %q", ErrInvalidClient, provider)
	}
	if _, err := c.Get(ctx, id); err != nil {
		return err
	}
	var err error
	if r == nil {
		_, err = c.pool.Exec(ctx, deleteRulesSQL, id, provider)
	} else {
		if err := CheckProxyRules(*r); err != nil {
			return err
		}
		_, err = c.pool.Exec(ctx, upsertRulesSQL, id, provider, r.Rules, strings.TrimSpace(r.Description))
	}
	c.forget(id)
	if err != nil {
		return fmt.Errorf("mcpauth: set proxy rules: %w", err)
	}
	return nil
}
