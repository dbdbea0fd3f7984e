package clientauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/names"
)

// ProxyRules restrict what a client may do through the proxy at one
// provider: a call is allowed only when a rule matches its method and path.
type ProxyRules struct {
	Rules []string `json:"rules"` // "METHOD PATTERN"
	// Description is the operator's words for the consent page.
	Description string `json:"description"`
	parsed      []Rule // Rules parsed, as loaded (decodeRules); nil: parsed on use
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
	for p, r := range m {
		r.parsed = make([]Rule, 0, len(r.Rules))
		for _, text := range r.Rules {
			rule, err := ParseRule(text)
			if err != nil {
				break // matched by parsing each rule on use: one that does not parse matches nothing
			}
			r.parsed = append(r.parsed, rule)
		}
		if len(r.parsed) != len(r.Rules) {
			r.parsed = nil
		}
		m[p] = r
	}
	return m, nil
}

// CheckProxyRules checks a rule set: 1–50 rules, each ParseRule's form, at
// most 512 bytes, whose pattern a path the proxy sends could match
// (neverSent); a description of at most 300 characters of text.
func CheckProxyRules(r ProxyRules) error {
	if len(r.Rules) == 0 || len(r.Rules) > maxRules {
		return fmt.Errorf("%w: 1-%d proxy rules are required", ErrInvalidClient, maxRules)
	}
	for i, text := range r.Rules {
		if len(text) > maxRuleBytes {
			return fmt.Errorf("%w: proxy rule %d is over %d bytes", ErrInvalidClient, i+1, maxRuleBytes)
		}
		rule, err := ParseRule(text)
		if err != nil {
			return fmt.Errorf("%w: proxy rule %d %s", ErrInvalidClient, i+1, err.Error())
		}
		if why := neverSent(rule.Pattern); why != "" {
			return fmt.Errorf("%w: proxy rule %d can never match: the proxy sends no path with %s", ErrInvalidClient, i+1, why)
		}
	}
	if utf8.RuneCountInString(r.Description) > maxDescription || !utf8.ValidString(r.Description) ||
		strings.ContainsFunc(r.Description, unicode.IsControl) {
		return fmt.Errorf("%w: the rules' description is at most %d characters of text", ErrInvalidClient, maxDescription)
	}
	return nil
}

// Rule is one request rule: calls of Method to a path matching Pattern are
// allowed, or, when Ask, allowed only once the user approved them
// (issue 36, package approval).
type Rule struct {
	Method, Pattern string
	// Ask: a matching call waits for the user's approval; Words are the
	// operator's for the approval page ("Open issues in your
	// repositories"), Standing the longest the user may allow matching
	// calls for at once (0: only the one request).
	Ask      bool
	Words    string
	Standing time.Duration
}

// Key is what names the rule in an approval: its method and pattern (the
// words and the bound may be reworded without voiding what users allowed).
func (r Rule) Key() string { return r.Method + " " + r.Pattern }

// Limits of an ask rule.
const (
	maxAskWords = 200
	MaxStanding = 24 * time.Hour
	minStanding = time.Minute
)

var errRuleForm = errors.New(`must be "METHOD /path/pattern" (e.g. "GET /repos/*/issues*") or ` +
	`"METHOD /path/pattern ask[:DURATION] \"words for the user\"" (e.g. "POST /repos/*/issues ask:1h \"Open issues in your repositories\"")`)

// ParseRule reads one rule: "METHOD PATTERN", or "METHOD PATTERN
// ask[:DURATION] \"WORDS\"" for a call the user approves first. METHOD is
// an upper-case HTTP method token or "*"; PATTERN starts with "/" and holds
// no white space or control character; DURATION (1m to 24h) bounds how long
// the user may allow matching calls for; WORDS (1–200 characters of text,
// no '"') say what the call does, to the user.
func ParseRule(text string) (Rule, error) {
	method, rest, ok := strings.Cut(text, " ")
	pattern, ask, asks := strings.Cut(rest, " ")
	if !ok || !validMethod(method) || !strings.HasPrefix(pattern, "/") ||
		strings.ContainsFunc(pattern, func(c rune) bool { return unicode.IsSpace(c) || unicode.IsControl(c) }) {
		return Rule{}, errRuleForm
	}
	r := Rule{Method: method, Pattern: pattern}
	if !asks {
		return r, nil
	}
	verb, words, ok := strings.Cut(ask, " ")
	if !ok || !strings.HasPrefix(words, `"`) || !strings.HasSuffix(words, `"`) || len(words) < 3 {
		return Rule{}, errRuleForm
	}
	words = words[1 : len(words)-1]
	if utf8.RuneCountInString(words) > maxAskWords || !utf8.ValidString(words) || strings.TrimSpace(words) != words ||
		strings.ContainsFunc(words, func(c rune) bool { return c == '"' || unicode.IsControl(c) }) {
		return Rule{}, fmt.Errorf("needs its words for the user: 1-%d characters of text, no '\"', no leading or trailing space", maxAskWords)
	}
	r.Ask, r.Words = true, words
	if bound, ok := strings.CutPrefix(verb, "ask:"); ok {
		d, err := time.ParseDuration(bound)
		if err != nil || d < minStanding || d > MaxStanding {
			return Rule{}, fmt.Errorf("ask:%s: the longest a user may allow such calls for is a duration from 1m to 24h (ask:1h)", bound)
		}
		r.Standing = d
	} else if verb != "ask" {
		return Rule{}, errRuleForm
	}
	return r, nil
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
// rules (one that asks included: Match tells those apart).
func (r ProxyRules) Allows(method, path string) bool {
	_, ok := r.Match(method, path)
	return ok
}

// Match returns the rule a call of method to path is under, and whether any
// matches. When a rule that asks matches, the call is under the first such
// rule, whatever else matches too: an operator who wrote "ask" for a call
// is never overruled by a broader rule that allows it. path is the API path
// exactly as the provider will receive it below its API base, starting with
// "/" (package proxy's Clean form: still escaped, an escaped "/" stays
// "%2F"); a pattern matches it byte for byte, case-sensitively, "*"
// standing for any run of characters. Methods are case-sensitive too: a
// rule's method is the call's, "*", or, for a HEAD call, GET (HEAD is GET
// without the body: a GET rule allows it; a HEAD rule allows HEAD alone).
// A rule that does not parse (none is stored: CheckProxyRules) matches
// nothing.
func (r ProxyRules) Match(method, path string) (Rule, bool) {
	var (
		allowed Rule
		found   bool // by value, not a pointer to it: a call's match allocates nothing
	)
	for i, text := range r.Rules {
		var rule Rule
		if i < len(r.parsed) {
			rule = r.parsed[i]
		} else {
			var err error
			if rule, err = ParseRule(text); err != nil {
				continue
			}
		}
		m := rule.Method
		if !(m == "*" || m == method || method == http.MethodHead && m == http.MethodGet) || !globMatch(rule.Pattern, path) {
			continue
		}
		if rule.Ask {
			return rule, true
		}
		if !found {
			allowed, found = rule, true
		}
	}
	return allowed, found
}

// asks reports whether a rule at any provider asks the user: such a client
// is proxy-only whatever its flag says (SetProxyRules sets it too).
func asks(m map[string]ProxyRules) bool {
	for _, r := range m {
		if r.Asks() {
			return true
		}
	}
	return false
}

// Asks reports whether a rule of r asks the user.
func (r ProxyRules) Asks() bool {
	for _, rule := range r.parsed {
		if rule.Ask {
			return true
		}
	}
	if len(r.parsed) == len(r.Rules) {
		return false
	}
	for _, text := range r.Rules {
		if rule, err := ParseRule(text); err == nil && rule.Ask {
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
// provider; every replica's key cache learns of it by notification. Rules
// that ask the user make the client proxy-only in the same transaction: a
// client that could read the token could call the provider without asking.
func (c *Clients) SetProxyRules(ctx context.Context, id, provider string, r *ProxyRules) error {
	if !names.ValidProvider(provider) {
		return fmt.Errorf("%w: provider id %q", ErrInvalidClient, provider)
	}
	if _, err := c.Get(ctx, id); err != nil {
		return err
	}
	if r != nil {
		if err := CheckProxyRules(*r); err != nil {
			return err
		}
	}
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if r == nil {
			_, err := tx.Exec(ctx, deleteRulesSQL, id, provider)
			return err
		}
		if _, err := tx.Exec(ctx, upsertRulesSQL, id, provider, r.Rules, strings.TrimSpace(r.Description)); err != nil {
			return err
		}
		if r.Asks() {
			_, err := tx.Exec(ctx, askMakesProxyOnlySQL, id)
			return err
		}
		return nil
	})
	c.forget(id)
	if err != nil {
		return fmt.Errorf("mcpauth: set proxy rules: %w", err)
	}
	return nil
}

// asksSQL is true when a rule of client $1 asks the user: a rule's pattern
// holds no space, so a third word is "ask".
const asksSQL = `EXISTS (SELECT 1 FROM client_proxy_rules r, unnest(r.rules) t WHERE r.client_id = $1 AND t LIKE '% % %')`

const askMakesProxyOnlySQL = `UPDATE clients SET proxy_only = true WHERE id = $1 AND NOT proxy_only`

// ErrAsksUser: a client whose rules ask the user cannot be given raw
// credentials (SetProxyOnly off).
var ErrAsksUser = fmt.Errorf("%w: the client's proxy rules ask the user before some calls, so it must stay proxy-only "+
	"(a client that reads the token could call the provider without asking); clear those rules first", ErrInvalidClient)
