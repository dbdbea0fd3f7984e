package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/scope"
)

// AuthStyle is how connectd authenticates to a token or revocation endpoint.
type AuthStyle string

// Client authentication styles (RFC 6749 §2.3.1).
const (
	AuthBasic  AuthStyle = "basic"  // client_secret_basic: HTTP Basic
	AuthParams AuthStyle = "params" // client_secret_post: client_id/client_secret in the form body
)

// RevocationStyle is how a provider revokes tokens.
type RevocationStyle string

// Revocation styles.
const (
	RevokeNone    RevocationStyle = ""        // no revocation endpoint
	RevokeRFC7009 RevocationStyle = "rfc7009" // POST token=…&token_type_hint=… with client authentication
	RevokeBearer  RevocationStyle = "bearer"  // POST with "Authorization: Bearer <access token>" (Dropbox, Slack)
)

// TokenResponse names a token-response shape.
type TokenResponse string

// Token-response shapes.
const (
	ResponseStandard  TokenResponse = ""           // RFC 6749 §5.1 (JSON, or form-encoded as GitHub sends by default)
	ResponseSlackUser TokenResponse = "slack_user" // Slack oauth.v2.access: the user token nested in authed_user
)

const (
	keyPlaceholder       = "{key}"        // where an API key goes in verify.value
	keyBase64Placeholder = "{key_base64}" // the same, base64-encoded (HTTP Basic)
	maxSecretFile        = 64 << 10       // bytes allowed in a client_secret_file
	defaultInvalidGrant  = "invalid_grant"
)

// Spec is one provider, resolved: template merged with the file's entry,
// references to client credentials read. Client secrets are Secret values.
type Spec struct {
	Name        string
	DisplayName string
	Kind        Kind
	Template    string // built-in template it came from, if any

	// APIBaseURL is where the provider's API lives, for connectd's proxy
	// (api.go): an https URL, a path prefix allowed, no query; filled like
	// the template's other URLs ({base_url}, {subdomain}, {tenant}). ""
	// when unknown: the proxy then refuses the provider.
	APIBaseURL string
	// APIAuth is how the proxy attaches the credential to an API request;
	// zero: the default for the kind (see apiAuth).
	APIAuth APIAuth
	// RateLimits are the provider's documented limits the proxy keeps
	// (ratelimit.go; the providers file's rate_limits replace them).
	RateLimits []RateLimit

	// oauth2
	ClientID     string // the deployment's own app at the provider (an organization may have its own: WithApp)
	ClientSecret Secret
	// SharedApp is which organizations without an app of their own at the
	// provider may use the deployment's (shared_app; "": SharedDefault).
	SharedApp             SharedAppPolicy
	Issuer                string
	Discovery             bool // fill endpoints from RFC 8414 / OIDC discovery of Issuer at start-up
	AuthorizeURL          string
	TokenURL              string
	RevocationURL         string
	Revocation            RevocationStyle
	Scopes                []string // default scopes, requested when the caller asks for none
	AlwaysScopes          []string // added to every authorize request (e.g. offline_access)
	ScopeSeparator        string   // " " or ","
	ScopeParam            string   // authorize parameter for scopes ("scope"; Slack user tokens: "user_scope")
	PKCE                  bool
	AuthStyle             AuthStyle // "" until discovery decides (then basic)
	AuthorizeParams       map[string]string
	AcceptJSON            bool          // send Accept: application/json to the token endpoint (GitHub)
	TokenResponse         TokenResponse // response shape
	IssParameterSupported bool
	InvalidGrantErrors    []string // OAuth error codes meaning the grant is dead (default: invalid_grant)
	AccountIDField        string   // dot path in the token response, e.g. "authed_user.id"
	AccountLabelField     string   // dot path, e.g. "team.name"
	// AccountURL is the provider's own "who am I" endpoint, asked (GET, the
	// new access token as a bearer token) when the token answer names no
	// account: AccountURLIDField and AccountURLLabelField are dot paths in
	// its JSON answer ("id", "user.id"). Only a provider that names no
	// account either way, nor in a verified ID token, leaves a round trip
	// unnamed, and connect then takes it for a new account.
	AccountURL           string
	AccountURLIDField    string
	AccountURLLabelField string
	// AccountScopes are asked for on every authorization only so that the
	// provider names the account (openid for an ID token, read:me), and are
	// taken out of the granted scopes: connectd's own, never a client's to
	// approve or receive a say over.
	AccountScopes []string
	// NarrowOnRefresh: the provider honours "scope" on the refresh-token
	// grant (RFC 6749 §6), issuing an access token limited to a subset of
	// the grant, so each client can receive only what it was approved for.
	// Off unless a template or the providers file says so: a provider that
	// ignores the parameter would hand back the whole grant.
	NarrowOnRefresh bool
	// RefreshRotates: the provider issues a new refresh token on (some)
	// refreshes and may refuse the old one afterwards. Informational: the
	// vault keeps whatever the answer holds and refreshes once.
	RefreshRotates bool
	// RefreshIdleLifetime: a refresh token not used for this long lapses
	// at the provider (0: it does not lapse from disuse, or the provider
	// does not say). A health job refreshes idle connections before then.
	RefreshIdleLifetime time.Duration
	// RefreshReuseGrace: after rotating a refresh token the provider keeps
	// accepting the old one this long (0: it does not, or it does not
	// say). There, a refresh whose answer was lost (a timeout, a replica
	// killed mid-call) is retried with the same token instead of costing
	// the user the connection.
	RefreshReuseGrace time.Duration
	// SelectAccountParams are the authorize parameters that ask the
	// provider to let the user choose (or add) an account instead of
	// continuing with the one signed in: prompt=select_account (OpenID
	// Connect Core 1.0 §3.1.2.1) or the provider's own. connect sends them
	// only when a client asks to connect another account, each replacing
	// the authorize parameter of the same name, so a value that must keep
	// an AuthorizeParams one says so itself (Google: prompt=consent
	// select_account). nil: the provider has none. An entry with
	// discovery gets prompt=select_account unless it gives its own
	// (discoveredSelectAccount).
	SelectAccountParams map[string]string

	// api_key
	Verify *VerifySpec
	// KeyPattern is an anchored regular expression (RE2) a key must match
	// before it is stored or sent anywhere ("" accepts any well-formed key).
	KeyPattern string

	// ScopeDescriptions are short descriptions of scopes in the user's terms
	// ("Full control of your repositories"), shown beside each scope token
	// on the consent and account pages: the template's (scopetext.go), with
	// the providers file's scope_descriptions over them. A scope without
	// one shows as its token alone.
	ScopeDescriptions map[string]string
	// LogoURL is an https image of the provider's logo (logo_url), shown
	// on its pages; "" shows the monogram shipped for the template, or the
	// name's initial.
	LogoURL string

	// Template facts for operators (docs/providers.md); no behaviour.
	Docs        string // the provider's own documentation the template follows
	PKCESupport string // "required", "supported", "ignored" or "unverified"

	// BaseURLHosts are the host patterns a base_url must match ("*" is one
	// label); empty for a template that takes any host (GitLab
	// self-managed). See CheckInstanceURL.
	BaseURLHosts []string

	// template defaults for {base_url} and {tenant}
	baseURL, tenant string
}

// clone returns a deep copy of a template.
func (s Spec) clone() Spec {
	s.Scopes = slices.Clone(s.Scopes)
	s.AlwaysScopes = slices.Clone(s.AlwaysScopes)
	s.AccountScopes = slices.Clone(s.AccountScopes)
	s.AuthorizeParams = maps.Clone(s.AuthorizeParams)
	s.SelectAccountParams = maps.Clone(s.SelectAccountParams)
	s.InvalidGrantErrors = slices.Clone(s.InvalidGrantErrors)
	s.BaseURLHosts = slices.Clone(s.BaseURLHosts)
	s.RateLimits = slices.Clone(s.RateLimits)
	s.ScopeDescriptions = maps.Clone(s.ScopeDescriptions)
	if s.Verify != nil {
		v := *s.Verify
		v.Headers = maps.Clone(v.Headers)
		s.Verify = &v
	}
	return s
}

// VerifySpec is an API key verification request: the key is placed in one
// header, and the provider must answer ExpectStatus.
type VerifySpec struct {
	Method string // GET, POST or HEAD
	URL    string
	Header string // e.g. "Authorization"
	// Value is the header value with "{key}" where the key goes ("Bearer
	// {key}"), or "{key_base64}" for the key base64-encoded ("Basic
	// {key_base64}", the key typed as id:secret).
	Value        string
	Headers      map[string]string // fixed extra headers (an API version), never the key
	ExpectStatus int
}

// Config is a parsed, validated providers file.
type Config struct {
	Providers []Spec
	Dev       bool // http:// endpoints were allowed; discovered endpoints get the same rule
	// NoSecrets: parsed with ParseOptions.NoSecrets, for names and form
	// only; New refuses it.
	NoSecrets bool
}

// ErrNoSecrets: a catalog was asked of a providers file read without its
// secrets (ParseOptions.NoSecrets).
var ErrNoSecrets = errors.New("provider: the providers file was read without its secrets (this command needs them)")

// ParseOptions supplies what parsing needs from outside.
type ParseOptions struct {
	// Dev allows http:// URLs (never other schemes).
	Dev bool
	// Getenv resolves client_id_env / client_secret_env. Default os.Getenv.
	Getenv func(string) string
	// ReadFile reads client_secret_file. Default os.ReadFile.
	ReadFile func(string) ([]byte, error)
	// NoSecrets parses for a command that calls no provider (an operator
	// command reading the database): client_id_env, client_secret_env and
	// client_secret_file are checked for form but not read, so a shell
	// without the providers' secrets can run it, and the result holds no
	// secret (nor a client id given by reference). Such a Config must never
	// build a catalog.
	NoSecrets bool
}

// ConfigError names the provider entry and field at fault. It never includes
// a secret's value.
type ConfigError struct {
	Index    int    // entry index in "providers", -1 for the file as a whole
	Provider string // entry name, when known
	Field    string // JSON field, e.g. "token_url" or "verify.url"
	Problem  string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	if e.Index >= 0 {
		fmt.Fprintf(&b, "providers[%d]", e.Index)
		if e.Provider != "" {
			fmt.Fprintf(&b, " (%s)", e.Provider)
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Problem)
	return b.String()
}

// file is the providers file.
type file struct {
	Providers []json.RawMessage `json:"providers"`
}

// fileEntry is one entry of the providers file. Pointers mark "not given", so
// a template value is kept.
type fileEntry struct {
	Name        string `json:"name"`
	Template    string `json:"template"`
	Kind        Kind   `json:"kind"`
	DisplayName string `json:"display_name"`
	// ScopeDescriptions are merged over the template's; a "" value removes one.
	ScopeDescriptions map[string]string `json:"scope_descriptions"`
	LogoURL           string            `json:"logo_url"`

	APIBaseURL    *string `json:"api_base_url"` // "" removes the template's
	APIAuthHeader string  `json:"api_auth_header"`
	APIAuthValue  string  `json:"api_auth_value"`
	// RateLimits replace the template's limits ([] removes them).
	RateLimits *[]fileRateLimit `json:"rate_limits"`

	ClientID         string          `json:"client_id"`
	ClientIDEnv      string          `json:"client_id_env"`
	ClientSecretEnv  string          `json:"client_secret_env"`
	ClientSecretFile string          `json:"client_secret_file"`
	ClientSecret     json.RawMessage `json:"client_secret"` // refused with a clear message
	SharedApp        string          `json:"shared_app"`    // "default" or "all"

	BaseURL               string            `json:"base_url"`
	Subdomain             string            `json:"subdomain"`
	Tenant                string            `json:"tenant"`
	Issuer                string            `json:"issuer"`
	Discovery             *bool             `json:"discovery"`
	AuthorizeURL          string            `json:"authorize_url"`
	TokenURL              string            `json:"token_url"`
	RevocationURL         string            `json:"revocation_url"`
	Revocation            *RevocationStyle  `json:"revocation"`
	Scopes                []string          `json:"scopes"`
	AlwaysScopes          []string          `json:"always_scopes"`
	ScopeSeparator        *string           `json:"scope_separator"`
	ScopeParam            string            `json:"scope_param"`
	PKCE                  *bool             `json:"pkce"`
	AuthStyle             AuthStyle         `json:"auth_style"`
	AuthorizeParams       map[string]string `json:"authorize_params"`
	SelectAccountParams   map[string]string `json:"select_account_params"` // merged over the template's; a "" value removes one
	AcceptJSON            *bool             `json:"accept_json"`
	TokenResponse         *string           `json:"token_response"`
	IssParameterSupported *bool             `json:"iss_parameter_supported"`
	InvalidGrantErrors    []string          `json:"invalid_grant_errors"`
	AccountIDField        *string           `json:"account_id_field"`
	AccountLabelField     *string           `json:"account_label_field"`
	AccountURL            *string           `json:"account_url"`
	AccountURLIDField     *string           `json:"account_url_id_field"`
	AccountURLLabelField  *string           `json:"account_url_label_field"`
	NarrowOnRefresh       *bool             `json:"narrow_on_refresh"`
	RefreshRotates        *bool             `json:"refresh_rotates"`
	RefreshIdleLifetime   *string           `json:"refresh_idle_lifetime"` // a Go duration, "2160h"; "0": does not lapse
	RefreshReuseGrace     *string           `json:"refresh_reuse_grace"`   // a Go duration, "30m"; "0": no grace

	Verify     *fileVerify `json:"verify"`
	KeyPattern *string     `json:"key_pattern"`
}

type fileVerify struct {
	Method       string            `json:"method"`
	URL          string            `json:"url"`
	Header       string            `json:"header"`
	Value        string            `json:"value"`
	Headers      map[string]string `json:"headers"`
	ExpectStatus int               `json:"expect_status"`
}

// ParseConfig parses and validates a providers file (JSON; see
// docs/providers.md). Unknown fields, bad or non-http(s) URLs (non-https
// outside dev mode), inline client secrets, missing references and duplicate
// names are errors: a *ConfigError naming the entry and field.
func ParseConfig(data []byte, opts ParseOptions) (*Config, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.ReadFile == nil {
		opts.ReadFile = os.ReadFile
	}
	var f file
	if err := strictDecode(data, &f); err != nil {
		return nil, &ConfigError{Index: -1, Problem: "not a valid providers file: " + err.Error() + at(data, err)}
	}
	cfg := &Config{Dev: opts.Dev, NoSecrets: opts.NoSecrets}
	seen := map[string]int{}
	for i, raw := range f.Providers {
		var e fileEntry
		if err := strictDecode(raw, &e); err != nil {
			return nil, &ConfigError{Index: i, Provider: peekName(raw), Problem: err.Error()}
		}
		spec, err := resolve(i, &e, opts)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[spec.Name]; dup {
			return nil, &ConfigError{Index: i, Provider: spec.Name, Field: "name",
				Problem: fmt.Sprintf("duplicate of providers[%d]", j)}
		}
		seen[spec.Name] = i
		cfg.Providers = append(cfg.Providers, *spec)
	}
	return cfg, nil
}

// strictDecode decodes exactly one JSON value, refusing unknown fields and
// trailing data.
// unwrapped keeps a decoding error reachable by errors.As (at) without
// adding its text twice.
type unwrapped struct{ err error }

func (u unwrapped) Error() string { return "" }
func (u unwrapped) Unwrap() error { return u.err }

func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s%w", strings.TrimPrefix(err.Error(), "json: "), unwrapped{err})
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// at says where in data a decoding error is (" at line L, column C"), for
// the errors that know their offset (a syntax error, a value of the wrong
// type); "" for the others.
func at(data []byte, err error) string {
	var off int64
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	default:
		return ""
	}
	off = min(max(off, 1), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:])
	return fmt.Sprintf(" (at line %d, column %d)", line, col)
}

// peekName reads an entry's name for error messages, ignoring other problems.
func peekName(raw json.RawMessage) string {
	var n struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(raw, &n)
	if names.ValidProvider(n.Name) {
		return n.Name
	}
	return ""
}

// resolve merges an entry onto its template and validates the result.
func resolve(i int, e *fileEntry, opts ParseOptions) (*Spec, error) {
	fail := func(field, format string, args ...any) error {
		return &ConfigError{Index: i, Provider: e.Name, Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	if !names.ValidProvider(e.Name) {
		name := e.Name
		e.Name = ""
		if name == "" {
			return nil, fail("name", "is required")
		}
		return nil, fail("name", "must be 1-64 of a-z 0-9 _ . - starting with a letter or digit")
	}
	var s Spec
	if e.Template != "" {
		t, ok := builtins[e.Template]
		if !ok {
			return nil, fail("template", "unknown template %q (built-in: %s)", e.Template, strings.Join(Templates(), ", "))
		}
		s = t.clone()
		s.Template = e.Template
		if e.Kind != "" && e.Kind != s.Kind {
			return nil, fail("kind", "template %s is of kind %s", e.Template, s.Kind)
		}
	} else {
		switch e.Kind {
		case KindOAuth2, KindAPIKey:
			s.Kind = e.Kind
		case "":
			return nil, fail("kind", "is required without a template (oauth2 or api_key)")
		default:
			return nil, fail("kind", "must be oauth2 or api_key")
		}
	}
	s.Name = e.Name
	if e.DisplayName != "" {
		s.DisplayName = e.DisplayName
	}
	if s.DisplayName == "" {
		s.DisplayName = e.Name
	}
	if s.Template != "" {
		s.ScopeDescriptions = maps.Clone(scopeTextOf(s.Template))
	}
	if field, err := mergeScopeDescriptions(&s, e.ScopeDescriptions); err != nil {
		return nil, fail(field, "%s", err)
	}
	if e.LogoURL != "" {
		if err := egress.CheckLogoURL(e.LogoURL); err != nil {
			return nil, fail("logo_url", "%s", err)
		}
		s.LogoURL = e.LogoURL
	}
	if e.APIBaseURL != nil {
		s.APIBaseURL = *e.APIBaseURL
	}
	// api_auth_header and api_auth_value override the template's one by
	// one; what neither gives is the bearer default's.
	if e.APIAuthHeader != "" {
		s.APIAuth.Header = e.APIAuthHeader
	}
	if e.APIAuthValue != "" {
		s.APIAuth.Value = e.APIAuthValue
	}
	if s.APIAuth != (APIAuth{}) {
		if s.APIAuth.Header == "" {
			s.APIAuth.Header = defaultAPIAuth.Header
		}
		if s.APIAuth.Value == "" {
			s.APIAuth.Value = TokenPlaceholder
		}
		if field, err := checkAPIAuth(s.APIAuth); err != nil {
			return nil, fail(field, "%s", err)
		}
	}
	if e.RateLimits != nil {
		limits, err := parseRateLimits(*e.RateLimits)
		if err != nil {
			return nil, fail("rate_limits", "%s", err)
		}
		s.RateLimits = limits
	}
	for i, l := range s.RateLimits { // a template's pass the same rule
		if err := checkRateLimit(l); err != nil {
			return nil, fail("rate_limits", "[%d].%s", i, err)
		}
	}
	if s.Kind == KindAPIKey {
		return resolveAPIKey(&s, e, opts, fail)
	}
	return resolveOAuth(&s, e, opts, fail)
}

type failFunc func(field, format string, args ...any) error

func resolveAPIKey(s *Spec, e *fileEntry, opts ParseOptions, fail failFunc) (*Spec, error) {
	for field, set := range map[string]bool{
		"client_id": e.ClientID != "", "client_id_env": e.ClientIDEnv != "",
		"client_secret_env": e.ClientSecretEnv != "", "client_secret_file": e.ClientSecretFile != "",
		"client_secret": e.ClientSecret != nil, "shared_app": e.SharedApp != "", "base_url": e.BaseURL != "", "subdomain": e.Subdomain != "", "tenant": e.Tenant != "",
		"issuer": e.Issuer != "", "discovery": e.Discovery != nil, "authorize_url": e.AuthorizeURL != "",
		"token_url": e.TokenURL != "", "revocation_url": e.RevocationURL != "", "revocation": e.Revocation != nil,
		"scopes": e.Scopes != nil, "always_scopes": e.AlwaysScopes != nil, "scope_separator": e.ScopeSeparator != nil, "scope_param": e.ScopeParam != "",
		"pkce": e.PKCE != nil, "auth_style": e.AuthStyle != "", "authorize_params": e.AuthorizeParams != nil,
		"select_account_params": e.SelectAccountParams != nil, "accept_json": e.AcceptJSON != nil, "token_response": e.TokenResponse != nil,
		"iss_parameter_supported": e.IssParameterSupported != nil, "invalid_grant_errors": e.InvalidGrantErrors != nil,
		"account_id_field": e.AccountIDField != nil, "account_label_field": e.AccountLabelField != nil,
		"account_url": e.AccountURL != nil, "account_url_id_field": e.AccountURLIDField != nil,
		"account_url_label_field": e.AccountURLLabelField != nil,
		"narrow_on_refresh":       e.NarrowOnRefresh != nil, "refresh_rotates": e.RefreshRotates != nil,
		"refresh_idle_lifetime": e.RefreshIdleLifetime != nil, "refresh_reuse_grace": e.RefreshReuseGrace != nil,
	} {
		if set {
			return nil, fail(field, "does not apply to an api_key provider")
		}
	}
	if e.KeyPattern != nil {
		s.KeyPattern = *e.KeyPattern
	}
	if err := checkKeyPattern(s.KeyPattern); err != nil {
		return nil, fail("key_pattern", "%s", err)
	}
	if s.APIBaseURL != "" {
		if strings.Contains(s.APIBaseURL, "{") {
			return nil, fail("api_base_url", "must not contain a placeholder (an api_key entry has no base_url, subdomain or tenant)")
		}
		u, err := checkAPIBaseURL(s.APIBaseURL, opts.Dev)
		if err != nil {
			return nil, fail("api_base_url", "%s", err)
		}
		s.APIBaseURL = u
	}
	if e.Verify == nil {
		if s.Verify != nil {
			// A template's verification request passes the same rules.
			if err := checkVerify(s.Verify, opts.Dev, fail); err != nil {
				return nil, err
			}
		}
		return s, nil
	}
	v := &VerifySpec{
		Method: strings.ToUpper(e.Verify.Method), URL: e.Verify.URL, Header: e.Verify.Header,
		Value: e.Verify.Value, Headers: maps.Clone(e.Verify.Headers), ExpectStatus: e.Verify.ExpectStatus,
	}
	if v.Method == "" {
		v.Method = http.MethodGet
	}
	if v.Value == "" {
		v.Value = keyPlaceholder
	}
	if v.ExpectStatus == 0 {
		v.ExpectStatus = http.StatusOK
	}
	if err := checkVerify(v, opts.Dev, fail); err != nil {
		return nil, err
	}
	s.Verify = v
	return s, nil
}

// checkVerify validates a verification request, from the file or a
// template.
func checkVerify(v *VerifySpec, dev bool, fail failFunc) error {
	switch {
	case !slices.Contains([]string{http.MethodGet, http.MethodPost, http.MethodHead}, v.Method):
		return fail("verify.method", "must be GET, POST or HEAD")
	case v.URL == "":
		return fail("verify.url", "is required")
	case !validHeaderName(v.Header):
		return fail("verify.header", "must be an HTTP header name such as Authorization or X-API-Key")
	case strings.Count(v.Value, keyPlaceholder)+strings.Count(v.Value, keyBase64Placeholder) != 1:
		return fail("verify.value", "must contain %s exactly once (or %s)", keyPlaceholder, keyBase64Placeholder)
	case strings.ContainsAny(v.Value, "\r\n"):
		return fail("verify.value", "must be one line")
	case v.ExpectStatus < 100 || v.ExpectStatus > 599:
		return fail("verify.expect_status", "must be an HTTP status code")
	case strings.Contains(v.URL, "{key"):
		return fail("verify.url", "must not contain the key (it goes in verify.header)")
	}
	for k, val := range v.Headers {
		switch {
		case !validHeaderName(k) || strings.EqualFold(k, v.Header):
			return fail("verify.headers", "must map other HTTP header names to fixed values")
		case strings.Contains(val, "{key") || strings.ContainsAny(val, "\r\n"):
			return fail("verify.headers", "values must be fixed one-line text (the key goes in verify.header)")
		}
	}
	if err := egress.CheckURL(v.URL, dev); err != nil {
		return fail("verify.url", "%s", err)
	}
	return nil
}

// checkKeyPattern: an API key pattern must compile and be anchored at both
// ends, so that it describes the whole key.
func checkKeyPattern(p string) error {
	if p == "" {
		return nil
	}
	if !strings.HasPrefix(p, "^") || !strings.HasSuffix(p, "$") {
		return errors.New("must be anchored with ^ and $")
	}
	if _, err := regexp.Compile(p); err != nil {
		return errors.New("is not a valid regular expression")
	}
	return nil
}

func validHeaderName(h string) bool {
	if h == "" || len(h) > 128 {
		return false
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// reservedParams are authorize parameters connectd sets itself.
var reservedParams = []string{"response_type", "client_id", "redirect_uri", "state", "code_challenge",
	"code_challenge_method", "scope", "user_scope", "nonce"}

func resolveOAuth(s *Spec, e *fileEntry, opts ParseOptions, fail failFunc) (*Spec, error) {
	if e.Verify != nil {
		return nil, fail("verify", "applies only to an api_key provider")
	}
	if e.KeyPattern != nil {
		return nil, fail("key_pattern", "applies only to an api_key provider")
	}
	switch SharedAppPolicy(e.SharedApp) {
	case "", SharedDefault:
		s.SharedApp = SharedDefault
	case SharedAll:
		s.SharedApp = SharedAll
	default:
		return nil, fail("shared_app", `must be "default" (only the default organization uses this app) or "all" `+
			`(every organization without its own app at the provider uses it)`)
	}
	if e.ClientSecret != nil {
		return nil, fail("client_secret", "must not be given inline; use client_secret_env (an environment variable name) or client_secret_file (a path)")
	}
	// Client id: inline (it is not a secret) or by reference.
	switch {
	case e.ClientID != "" && e.ClientIDEnv != "":
		return nil, fail("client_id_env", "give client_id or client_id_env, not both")
	case e.ClientIDEnv != "" && opts.NoSecrets:
	case e.ClientIDEnv != "":
		s.ClientID = strings.TrimSpace(opts.Getenv(e.ClientIDEnv))
		if s.ClientID == "" {
			return nil, fail("client_id_env", "%s is not set", envName(e.ClientIDEnv))
		}
	case e.ClientID != "":
		s.ClientID = e.ClientID
	default:
		return nil, fail("client_id", "is required (client_id or client_id_env)")
	}
	switch {
	case e.ClientSecretEnv != "" && e.ClientSecretFile != "":
		return nil, fail("client_secret_file", "give client_secret_env or client_secret_file, not both")
	case (e.ClientSecretEnv != "" || e.ClientSecretFile != "") && opts.NoSecrets:
	case e.ClientSecretEnv != "":
		v := strings.TrimSpace(opts.Getenv(e.ClientSecretEnv))
		if v == "" {
			return nil, fail("client_secret_env", "%s is not set", envName(e.ClientSecretEnv))
		}
		s.ClientSecret = Secret(v)
	case e.ClientSecretFile != "":
		b, err := opts.ReadFile(e.ClientSecretFile)
		if err != nil {
			// The path is not repeated: a secret pasted into the field by
			// mistake must not end up in a log line.
			why := "read error"
			switch {
			case errors.Is(err, fs.ErrNotExist):
				why = "no such file"
			case errors.Is(err, fs.ErrPermission):
				why = "permission denied"
			}
			return nil, fail("client_secret_file", "cannot be read (%s)", why)
		}
		v := strings.TrimSpace(string(b))
		clear(b)
		if v == "" || len(v) > maxSecretFile {
			return nil, fail("client_secret_file", "the file must hold the secret (1 line)")
		}
		s.ClientSecret = Secret(v)
	default:
		return nil, fail("client_secret_env", "a client secret is required: client_secret_env or client_secret_file")
	}

	// Template parameters.
	// Template parameters: per-customer values pass the host rules
	// (host.go) before they become part of any URL.
	vars := map[string]string{}
	if e.BaseURL != "" {
		origin, err := CheckInstanceURL(e.BaseURL, s.BaseURLHosts, opts.Dev)
		if err != nil {
			return nil, fail("base_url", "%s", err)
		}
		vars["{base_url}"] = origin
	} else if s.baseURL != "" {
		vars["{base_url}"] = s.baseURL
	}
	if e.Subdomain != "" {
		sub, err := CheckSubdomain(e.Subdomain)
		if err != nil {
			return nil, fail("subdomain", "%s", err)
		}
		vars["{subdomain}"] = sub
	}
	if e.Tenant != "" {
		if !validTenant(e.Tenant) {
			return nil, fail("tenant", "must be a tenant id or domain")
		}
		vars["{tenant}"] = e.Tenant
	} else if s.tenant != "" {
		vars["{tenant}"] = s.tenant
	}

	// Overrides.
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&s.Issuer, e.Issuer)
	set(&s.AuthorizeURL, e.AuthorizeURL)
	set(&s.TokenURL, e.TokenURL)
	set(&s.RevocationURL, e.RevocationURL)
	set(&s.ScopeParam, e.ScopeParam)
	if e.Discovery != nil {
		s.Discovery = *e.Discovery
	}
	if e.Revocation != nil {
		s.Revocation = *e.Revocation
	} else if e.RevocationURL != "" && s.Revocation == RevokeNone {
		s.Revocation = RevokeRFC7009
	}
	if e.Scopes != nil {
		s.Scopes = slices.Clone(e.Scopes)
	}
	if e.AlwaysScopes != nil {
		s.AlwaysScopes = slices.Clone(e.AlwaysScopes)
	}
	if e.ScopeSeparator != nil {
		s.ScopeSeparator = *e.ScopeSeparator
	}
	// PKCE S256 on every authorization, whatever the provider advertises:
	// RFC 6749 §3.1 has servers ignore parameters they do not know, and a
	// provider that checks it stops injected codes (DESIGN invariant 3).
	if e.PKCE != nil && !*e.PKCE {
		return nil, fail("pkce", "cannot be false: connectd sends PKCE S256 on every authorization (servers that do not support it ignore it)")
	}
	s.PKCE = s.Kind == KindOAuth2
	if e.AuthStyle != "" {
		s.AuthStyle = e.AuthStyle
	}
	if e.AuthorizeParams != nil {
		if s.AuthorizeParams == nil {
			s.AuthorizeParams = map[string]string{}
		}
		maps.Copy(s.AuthorizeParams, e.AuthorizeParams)
	}
	// Merged like authorize_params; a parameter given as "" removes the
	// template's (or, with discovery, the default), so that a provider
	// that refuses it can be configured without.
	switch {
	case e.SelectAccountParams != nil:
		if s.SelectAccountParams == nil {
			s.SelectAccountParams = map[string]string{}
		}
		for k, v := range e.SelectAccountParams {
			if v == "" {
				delete(s.SelectAccountParams, k)
			} else {
				s.SelectAccountParams[k] = v
			}
		}
	case s.Discovery && s.SelectAccountParams == nil:
		s.SelectAccountParams = discoveredSelectAccount()
	}
	if len(s.SelectAccountParams) == 0 {
		s.SelectAccountParams = nil // {} or all removed: none
	}
	if e.AcceptJSON != nil {
		s.AcceptJSON = *e.AcceptJSON
	}
	if e.TokenResponse != nil {
		switch *e.TokenResponse {
		case "standard", "":
			s.TokenResponse = ResponseStandard
		case string(ResponseSlackUser):
			s.TokenResponse = ResponseSlackUser
		default:
			return nil, fail("token_response", "must be standard or slack_user")
		}
	}
	if e.IssParameterSupported != nil {
		s.IssParameterSupported = *e.IssParameterSupported
	}
	if e.InvalidGrantErrors != nil {
		s.InvalidGrantErrors = slices.Clone(e.InvalidGrantErrors)
	}
	if e.AccountIDField != nil {
		s.AccountIDField = *e.AccountIDField
	}
	if e.AccountLabelField != nil {
		s.AccountLabelField = *e.AccountLabelField
	}
	if e.AccountURL != nil {
		s.AccountURL = *e.AccountURL
	}
	if e.AccountURLIDField != nil {
		s.AccountURLIDField = *e.AccountURLIDField
	}
	if e.AccountURLLabelField != nil {
		s.AccountURLLabelField = *e.AccountURLLabelField
	}
	if e.NarrowOnRefresh != nil {
		s.NarrowOnRefresh = *e.NarrowOnRefresh
	}
	if e.RefreshRotates != nil {
		s.RefreshRotates = *e.RefreshRotates
	}
	if e.RefreshIdleLifetime != nil {
		d, err := time.ParseDuration(*e.RefreshIdleLifetime)
		if err != nil || d < 0 {
			return nil, fail("refresh_idle_lifetime", `must be a duration such as "2160h" ("0": does not lapse)`)
		}
		s.RefreshIdleLifetime = d
	}
	if e.RefreshReuseGrace != nil {
		d, err := time.ParseDuration(*e.RefreshReuseGrace)
		if err != nil || d < 0 || d > 24*time.Hour {
			return nil, fail("refresh_reuse_grace", `must be a duration up to 24h such as "30m" ("0": no grace)`)
		}
		s.RefreshReuseGrace = d
	}

	// Fill template variables.
	for _, p := range []*string{&s.Issuer, &s.AuthorizeURL, &s.TokenURL, &s.RevocationURL, &s.AccountURL, &s.APIBaseURL} {
		for k, v := range vars {
			*p = strings.ReplaceAll(*p, k, v)
		}
		if strings.Contains(*p, "{") {
			field := map[*string]string{&s.Issuer: "issuer", &s.AuthorizeURL: "authorize_url",
				&s.TokenURL: "token_url", &s.RevocationURL: "revocation_url", &s.AccountURL: "account_url",
				&s.APIBaseURL: "api_base_url"}[p]
			return nil, fail(field, "template %s needs %s", s.Template, missingVar(*p))
		}
	}

	if err := checkOAuth(s, opts.Dev, fail); err != nil {
		return nil, err
	}
	return s, nil
}

// checkOAuth fills the remaining defaults of a merged oauth2 entry and
// validates it.
func checkOAuth(s *Spec, dev bool, fail failFunc) error {
	if s.ScopeSeparator == "" {
		s.ScopeSeparator = " "
	}
	if s.ScopeSeparator != " " && s.ScopeSeparator != "," {
		return fail("scope_separator", `must be " " or ","`)
	}
	if s.ScopeParam == "" {
		s.ScopeParam = "scope"
	}
	if s.ScopeParam != "scope" && s.ScopeParam != "user_scope" {
		return fail("scope_param", "must be scope or user_scope")
	}
	for field, list := range map[string][]string{"scopes": s.Scopes, "always_scopes": s.AlwaysScopes} {
		for _, sc := range list {
			if !scope.Valid(sc) {
				return fail(field, "a scope must be non-empty printable ASCII without spaces, commas, quotes or backslashes")
			}
		}
	}
	switch s.AuthStyle {
	case AuthBasic, AuthParams:
	case "client_secret_basic":
		s.AuthStyle = AuthBasic
	case "client_secret_post":
		s.AuthStyle = AuthParams
	case "":
		if !s.Discovery {
			s.AuthStyle = AuthBasic // RFC 6749 §2.3.1: servers must support Basic
		}
	default:
		return fail("auth_style", "must be basic or params")
	}
	switch s.Revocation {
	case RevokeNone, RevokeRFC7009, RevokeBearer:
	default:
		return fail("revocation", "must be rfc7009 or bearer")
	}
	for _, f := range []struct {
		field  string
		params map[string]string
	}{{"authorize_params", s.AuthorizeParams}, {"select_account_params", s.SelectAccountParams}} {
		if err := checkParams(f.params); err != nil {
			return fail(f.field, "%s", err)
		}
	}
	for _, c := range s.InvalidGrantErrors {
		if sanitizeCode(c) == "" {
			return fail("invalid_grant_errors", "must list OAuth error codes")
		}
	}
	if len(s.InvalidGrantErrors) == 0 {
		s.InvalidGrantErrors = []string{defaultInvalidGrant}
	}
	if s.Discovery {
		if s.Issuer == "" {
			return fail("issuer", "is required for discovery")
		}
	} else {
		if s.AuthorizeURL == "" {
			return fail("authorize_url", "is required (or set issuer and discovery: true)")
		}
		if s.TokenURL == "" {
			return fail("token_url", "is required (or set issuer and discovery: true)")
		}
	}
	if (s.AccountURL == "") != (s.AccountURLIDField == "") {
		return fail("account_url_id_field", "account_url and account_url_id_field go together")
	}
	if s.Revocation != RevokeNone && s.RevocationURL == "" && !s.Discovery {
		return fail("revocation_url", "is required when revocation is %s", s.Revocation)
	}
	for _, f := range []struct {
		field, v string
	}{{"issuer", s.Issuer}, {"authorize_url", s.AuthorizeURL}, {"token_url", s.TokenURL}, {"revocation_url", s.RevocationURL},
		{"account_url", s.AccountURL}} {
		if f.v == "" {
			continue
		}
		if err := egress.CheckURL(f.v, dev); err != nil {
			return fail(f.field, "%s", err)
		}
	}
	if err := checkAuthorizeQuery(s.AuthorizeURL); err != nil {
		return fail("authorize_url", "%s", err)
	}
	if s.APIBaseURL != "" {
		u, err := checkAPIBaseURL(s.APIBaseURL, dev)
		if err != nil {
			return fail("api_base_url", "%s", err)
		}
		s.APIBaseURL = u
	}
	return nil
}

// checkParams validates extra authorize parameters (authorize_params,
// select_account_params): none that connectd sets itself (the browser would
// arrive with two states or two redirect URIs), names as RFC 6749 Appendix A
// spells a parameter name, and values of one line. A value is never
// repeated in the message.
func checkParams(params map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(params)) {
		switch {
		case slices.Contains(reservedParams, k):
			return fmt.Errorf("%s is set by connectd and cannot be overridden", k)
		case !validParamName(k):
			return fmt.Errorf("%q is not a parameter name (1-128 of A-Z a-z 0-9 - . _)", k)
		case strings.ContainsFunc(params[k], unicode.IsControl):
			return fmt.Errorf("%s: the value must be one line without control characters", k)
		}
	}
	return nil
}

// validParamName: RFC 6749 Appendix A, param-name = 1*name-char,
// name-char = "-" / "." / "_" / DIGIT / ALPHA; bounded.
func validParamName(k string) bool {
	if k == "" || len(k) > 128 {
		return false
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return false
		}
	}
	return true
}

// checkAuthorizeQuery refuses an authorize endpoint whose own query already
// carries a parameter connectd sets: the browser would arrive with two
// states or two redirect URIs, and which one a provider reads is up to it.
func checkAuthorizeQuery(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return nil // egress.CheckURL reports it
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return errors.New("has a malformed query")
	}
	for _, k := range reservedParams {
		if _, ok := q[k]; ok {
			return fmt.Errorf("must not carry %s in its query (connectd sets it)", k)
		}
	}
	return nil
}

// envName quotes an environment variable name in a message when it looks like
// one (upper case, digits, underscores); otherwise it may be a secret pasted
// into the wrong field, and is not repeated.
func envName(name string) string {
	if len(name) > 64 {
		return "the environment variable named there"
	}
	for i, r := range name {
		if !(r >= 'A' && r <= 'Z' || r == '_' || (r >= '0' && r <= '9' && i > 0)) {
			return "the environment variable named there"
		}
	}
	return "environment variable " + name
}

// missingVar names the providers-file field that fills the first
// placeholder left in a template URL.
func missingVar(u string) string {
	for _, v := range []struct{ ph, field string }{{"{base_url}", "base_url"}, {"{subdomain}", "subdomain"}, {"{tenant}", "tenant"}} {
		if strings.Contains(u, v.ph) {
			return v.field
		}
	}
	return "base_url, subdomain or tenant"
}

// MaxScopeDescription is the longest scope description accepted, in
// characters: a line beside a scope token, not a paragraph.
const MaxScopeDescription = 160

// mergeScopeDescriptions puts the providers file's scope_descriptions over
// s's: each key a valid scope, each value one line of plain text of at most
// MaxScopeDescription characters, or "" to remove the template's.
func mergeScopeDescriptions(s *Spec, file map[string]string) (string, error) {
	for _, sc := range slices.Sorted(maps.Keys(file)) {
		text := file[sc]
		field := "scope_descriptions." + sc
		if !scope.Valid(sc) {
			return "scope_descriptions", fmt.Errorf("key %q is not a valid scope", truncate(sc, 40))
		}
		if text == "" {
			delete(s.ScopeDescriptions, sc)
			continue
		}
		if err := checkScopeDescription(text); err != nil {
			return field, err
		}
		if s.ScopeDescriptions == nil {
			s.ScopeDescriptions = map[string]string{}
		}
		s.ScopeDescriptions[sc] = text
	}
	return "", nil
}

// checkScopeDescription: one line of text, no control characters, not
// blank, at most MaxScopeDescription characters.
func checkScopeDescription(text string) error {
	if !utf8.ValidString(text) {
		return errors.New("must be UTF-8 text")
	}
	if strings.TrimSpace(text) != text || text == "" {
		return errors.New("must not be blank or start or end with spaces")
	}
	if n := utf8.RuneCountInString(text); n > MaxScopeDescription {
		return fmt.Errorf("is %d characters long; at most %d", n, MaxScopeDescription)
	}
	for _, r := range text {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return errors.New("must be one line without control characters")
		}
	}
	return nil
}

// truncate bounds a value quoted in a message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
