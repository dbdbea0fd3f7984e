package clientauth

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
// bytes, no white space or control character); a description of at most
// 300 characters of text.
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
	}
	if utf8.RuneCountInString(r.Description) > maxDescription || !utf8.ValidString(r.Description) ||
		strings.ContainsFunc(r.Description, unicode.IsControl) {
		return fmt.Errorf("%w: the rules' description is at most %d characters of text", ErrInvalidClient, maxDescription)
	}
	return nil
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

// Allows reports whether a call of method to path (the API path, starting
// with "/") matches one of the rules. HEAD is a GET for the rules.
func (r ProxyRules) Allows(method, path string) bool {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	for _, rule := range r.Rules {
		m, pattern, _ := strings.Cut(rule, " ")
		if (m == "*" || m == method) && globMatch(pattern, path) {
			return true
		}
	}
	return false
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
