package provider_test

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/provider"
)

func parse(data string, dev bool, env map[string]string) (*provider.Config, error) {
	return provider.ParseConfig([]byte(data), provider.ParseOptions{Dev: dev,
		Getenv: func(k string) string { return env[k] },
		ReadFile: func(p string) ([]byte, error) {
			if p == "/run/secrets/gh" {
				return []byte("file-secret\n"), nil
			}
			return nil, fs.ErrNotExist
		}})
}

func TestConfigErrorsNameTheField(t *testing.T) {
	t.Parallel()
	env := map[string]string{"GH_SECRET": "sup3r-s3cret-value", "GH_ID": "id-from-env"}
	tests := []struct {
		name      string
		file      string
		dev       bool
		wantField string
		wantMsg   string
	}{
		{"not JSON", `providers: []`, false, "", "not a valid providers file"},
		// A syntax error names its line and column (issue 38 item 6).
		{"syntax error, line and column", "{\"providers\": [\n  {\"name\": \"gh\",\n   \"template\": \"github\" \"client_id\": \"x\"}\n]}", false, "",
			"invalid character '\"' after object key:value pair (at line 3, column 25)"},
		{"wrong type, line and column", "{\n\"providers\": {}}", false, "", "(at line 2, column 14)"},
		{"unknown top-level field", `{"providers":[],"extra":1}`, false, "", `unknown field "extra"`},
		{"trailing data", `{"providers":[]} {}`, false, "", "after the JSON value"},
		{"unknown entry field", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"GH_SECRET","tokn_url":"https://x"}]}`, false, "", `providers[0] (gh): unknown field "tokn_url"`},
		{"missing name", `{"providers":[{"template":"github"}]}`, false, "name", "is required"},
		{"bad name", `{"providers":[{"name":"Git Hub","template":"github"}]}`, false, "name", "a-z"},
		{"unknown template", `{"providers":[{"name":"gh","template":"githab"}]}`, false, "template", "unknown template"},
		{"no kind", `{"providers":[{"name":"x"}]}`, false, "kind", "is required"},
		{"bad kind", `{"providers":[{"name":"x","kind":"saml"}]}`, false, "kind", "oauth2 or api_key"},
		{"inline client secret", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret":"sup3r-s3cret-value"}]}`, false, "client_secret", "must not be given inline"},
		{"no client id", `{"providers":[{"name":"gh","template":"github","client_secret_env":"GH_SECRET"}]}`, false, "client_id", "is required"},
		{"client id env unset", `{"providers":[{"name":"gh","template":"github","client_id_env":"NOPE","client_secret_env":"GH_SECRET"}]}`, false, "client_id_env", "NOPE is not set"},
		{"secret env unset", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"NOPE"}]}`, false, "client_secret_env", "NOPE is not set"},
		{"secret file unreadable", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_file":"/nope"}]}`, false, "client_secret_file", "cannot be read (no such file)"},
		{"secret pasted as env name", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"ghp_sup3r-s3cret-value"}]}`, false, "client_secret_env", "the environment variable named there is not set"},
		{"secret env and file", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"GH_SECRET","client_secret_file":"/run/secrets/gh"}]}`, false, "client_secret_file", "not both"},
		{"no secret", `{"providers":[{"name":"gh","template":"github","client_id":"x"}]}`, false, "client_secret_env", "required"},
		{"javascript URL", `{"providers":[{"name":"x","kind":"oauth2","client_id":"x","client_secret_env":"GH_SECRET","authorize_url":"javascript:alert(1)","token_url":"https://a.example/t"}]}`, false, "authorize_url", `scheme "javascript" is not allowed`},
		{"data URL", `{"providers":[{"name":"x","kind":"oauth2","client_id":"x","client_secret_env":"GH_SECRET","authorize_url":"https://a.example/a","token_url":"data:text/plain,hi"}]}`, true, "token_url", `scheme "data" is not allowed`},
		{"file URL", `{"providers":[{"name":"x","kind":"oauth2","client_id":"x","client_secret_env":"GH_SECRET","authorize_url":"https://a.example/a","token_url":"https://a.example/t","revocation_url":"file:///etc/passwd"}]}`, true, "revocation_url", `scheme "file" is not allowed`},
		{"http outside dev", `{"providers":[{"name":"x","kind":"oauth2","client_id":"x","client_secret_env":"GH_SECRET","authorize_url":"http://a.example/a","token_url":"https://a.example/t"}]}`, false, "authorize_url", "must use https"},
		{"relative URL", `{"providers":[{"name":"x","kind":"oauth2","client_id":"x","client_secret_env":"GH_SECRET","authorize_url":"/a","token_url":"https://a.example/t"}]}`, false, "authorize_url", "absolute"},
		{"URL with user info", `{"providers":[{"name":"x","kind":"oauth2","client_id":"x","client_secret_env":"GH_SECRET","authorize_url":"https://u:p@a.example/a","token_url":"https://a.example/t"}]}`, false, "authorize_url", "user info"},
		{"missing token URL", `{"providers":[{"name":"x","kind":"oauth2","client_id":"x","client_secret_env":"GH_SECRET","authorize_url":"https://a.example/a"}]}`, false, "token_url", "is required"},
		{"discovery without issuer", `{"providers":[{"name":"x","kind":"oauth2","client_id":"x","client_secret_env":"GH_SECRET","discovery":true}]}`, false, "issuer", "required for discovery"},
		{"http base_url outside dev", `{"providers":[{"name":"gl","template":"gitlab","base_url":"http://gitlab.internal","client_id":"x","client_secret_env":"GH_SECRET"}]}`, false, "base_url", "must use https"},
		{"bad tenant", `{"providers":[{"name":"ms","template":"microsoft","tenant":"a/b","client_id":"x","client_secret_env":"GH_SECRET"}]}`, false, "tenant", "tenant id"},
		{"bad auth style", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"GH_SECRET","auth_style":"jwt"}]}`, false, "auth_style", "basic or params"},
		{"bad separator", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"GH_SECRET","scope_separator":";"}]}`, false, "scope_separator", "must be"},
		{"bad scope", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"GH_SECRET","scopes":["a b"]}]}`, false, "scopes", "without spaces"},
		{"reserved authorize param", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"GH_SECRET","authorize_params":{"redirect_uri":"https://evil.example"}}]}`, false, "authorize_params", "redirect_uri is set by connectd"},
		{"authorize param name", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"GH_SECRET","authorize_params":{"a&b":"c"}}]}`, false, "authorize_params", `"a&b" is not a parameter name`},
		{"reserved select-account param", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"GH_SECRET","select_account_params":{"state":"fixed"}}]}`, false, "select_account_params", "state is set by connectd"},
		{"select-account redirect_uri", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"GH_SECRET","select_account_params":{"redirect_uri":"https://evil.example"}}]}`, false, "select_account_params", "redirect_uri is set by connectd"},
		{"select-account PKCE", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"GH_SECRET","select_account_params":{"code_challenge_method":"plain"}}]}`, false, "select_account_params", "code_challenge_method is set by connectd"},
		{"select-account scope", `{"providers":[{"name":"ms","template":"microsoft","client_id":"x","client_secret_env":"GH_SECRET","select_account_params":{"scope":"admin"}}]}`, false, "select_account_params", "scope is set by connectd"},
		{"select-account scope param", `{"providers":[{"name":"sl","template":"slack","client_id":"x","client_secret_env":"GH_SECRET","select_account_params":{"user_scope":"admin"}}]}`, false, "select_account_params", "user_scope is set by connectd"},
		{"select-account client_id", `{"providers":[{"name":"x","kind":"oauth2","client_id":"x","client_secret_env":"GH_SECRET","authorize_url":"https://a.example/a","token_url":"https://a.example/t","select_account_params":{"client_id":"other"}}]}`, false, "select_account_params", "client_id is set by connectd"},
		{"select-account response_type", `{"providers":[{"name":"x","kind":"oauth2","client_id":"x","client_secret_env":"GH_SECRET","issuer":"https://idp.example","discovery":true,"select_account_params":{"response_type":"token"}}]}`, false, "select_account_params", "response_type is set by connectd"},
		{"select-account param name", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"GH_SECRET","select_account_params":{"pro mpt":"select_account"}}]}`, false, "select_account_params", `"pro mpt" is not a parameter name`},
		{"select-account param value", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"GH_SECRET","select_account_params":{"prompt":"select_account\r\nX-Evil: 1"}}]}`, false, "select_account_params", "prompt: the value must be one line"},
		{"select-account params not an object", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"GH_SECRET","select_account_params":"prompt=select_account"}]}`, false, "", "select_account_params"},
		{"api_key with select_account_params", `{"providers":[{"name":"k","kind":"api_key","select_account_params":{"prompt":"select_account"}}]}`, false, "select_account_params", "does not apply to an api_key"},
		{"bad token_response", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"GH_SECRET","token_response":"xml"}]}`, false, "token_response", "standard or slack_user"},
		{"bad revocation", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"GH_SECRET","revocation":"carrier-pigeon"}]}`, false, "revocation", "rfc7009 or bearer"},
		{"revocation without URL", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"GH_SECRET","revocation":"rfc7009"}]}`, false, "revocation_url", "is required"},
		{"verify on oauth2", `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"GH_SECRET","verify":{"url":"https://a.example"}}]}`, false, "verify", "only to an api_key"},
		{"duplicate name", `{"providers":[{"name":"k","kind":"api_key"},{"name":"k","kind":"api_key"}]}`, false, "name", "duplicate of providers[0]"},
		{"api_key with token_url", `{"providers":[{"name":"k","kind":"api_key","token_url":"https://a.example"}]}`, false, "token_url", "does not apply to an api_key"},
		{"api_key verify URL scheme", `{"providers":[{"name":"k","kind":"api_key","verify":{"url":"file:///etc/passwd","header":"X-Key"}}]}`, true, "verify.url", `scheme "file"`},
		{"api_key verify no header", `{"providers":[{"name":"k","kind":"api_key","verify":{"url":"https://api.example/me"}}]}`, false, "verify.header", "header name"},
		{"api_key verify value without key", `{"providers":[{"name":"k","kind":"api_key","verify":{"url":"https://api.example/me","header":"Authorization","value":"Bearer"}}]}`, false, "verify.value", "{key} exactly once"},
		{"api_key key in URL", `{"providers":[{"name":"k","kind":"api_key","verify":{"url":"https://api.example/me?k={key}","header":"Authorization"}}]}`, false, "verify.url", "must not contain the key"},
		{"api_key bad method", `{"providers":[{"name":"k","kind":"api_key","verify":{"method":"DELETE","url":"https://api.example/me","header":"Authorization"}}]}`, false, "verify.method", "GET, POST or HEAD"},
		{"api_key bad status", `{"providers":[{"name":"k","kind":"api_key","verify":{"url":"https://api.example/me","header":"Authorization","expect_status":99}}]}`, false, "verify.expect_status", "status code"},
		{"template kind mismatch", `{"providers":[{"name":"gh","template":"github","kind":"api_key"}]}`, false, "kind", "of kind oauth2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parse(tt.file, tt.dev, env)
			var ce *provider.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *provider.ConfigError", err)
			}
			if ce.Field != tt.wantField || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("got %q (field %q), want field %q and %q", err, ce.Field, tt.wantField, tt.wantMsg)
			}
			if tt.wantField != "" && !strings.Contains(err.Error(), tt.wantField+": ") {
				t.Fatalf("message %q does not name the field", err)
			}
			if strings.Contains(err.Error(), "sup3r-s3cret-value") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("message echoes a secret or spans lines: %q", err)
			}
		})
	}
}

func TestConfigResolvesTemplatesAndReferences(t *testing.T) {
	t.Parallel()
	cfg, err := parse(`{"providers":[
		{"name":"gh","template":"github","client_id_env":"GH_ID","client_secret_file":"/run/secrets/gh","scopes":["repo"]},
		{"name":"gl","template":"gitlab","base_url":"https://gitlab.example.com/","client_id":"x","client_secret_env":"S"},
		{"name":"ms","template":"microsoft","tenant":"contoso.onmicrosoft.com","client_id":"x","client_secret_env":"S"},
		{"name":"sf","template":"salesforce","client_id":"x","client_secret_env":"S"},
		{"name":"openai","kind":"api_key","display_name":"OpenAI","verify":{"url":"https://api.openai.com/v1/models","header":"Authorization","value":"Bearer {key}"}}
	]}`, false, map[string]string{"GH_ID": "gh-client", "S": "s"})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]provider.Spec{}
	for _, s := range cfg.Providers {
		byName[s.Name] = s
	}
	gh := byName["gh"]
	if gh.ClientID != "gh-client" || gh.ClientSecret.Reveal() != "file-secret" || gh.DisplayName != "GitHub" ||
		gh.Scopes[0] != "repo" || !gh.AcceptJSON {
		t.Fatalf("gh %+v", gh)
	}
	if gl := byName["gl"]; gl.TokenURL != "https://gitlab.example.com/oauth/token" || gl.Issuer != "https://gitlab.example.com" {
		t.Fatalf("gl %+v", gl)
	}
	if ms := byName["ms"]; ms.AuthorizeURL != "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/authorize" {
		t.Fatalf("ms %+v", ms)
	}
	if sf := byName["sf"]; sf.TokenURL != "https://login.salesforce.com/services/oauth2/token" {
		t.Fatalf("sf %+v", sf)
	}
	if k := byName["openai"]; k.Kind != provider.KindAPIKey || k.Verify.Method != "GET" || k.Verify.ExpectStatus != 200 {
		t.Fatalf("openai %+v", k)
	}
}

// TestSelectAccountParams: select_account_params comes from the template,
// is merged over it like authorize_params ("" removes one), and defaults to
// OIDC's prompt=select_account for a discovered provider unless the entry
// gives its own; a provider without any has nil.
func TestSelectAccountParams(t *testing.T) {
	t.Parallel()
	const cred = `"client_id":"x","client_secret_env":"S"`
	const generic = `"kind":"oauth2",` + cred + `,"authorize_url":"https://a.example/auth","token_url":"https://a.example/token"`
	const discovered = `"kind":"oauth2",` + cred + `,"issuer":"https://idp.example","discovery":true`
	selectAccount := map[string]string{"prompt": "select_account"}
	tests := []struct {
		name  string
		entry string // the fields after "name"
		want  map[string]string
	}{
		{"google template", `"template":"google",` + cred, map[string]string{"prompt": "consent select_account"}},
		{"gmail template", `"template":"gmail",` + cred, map[string]string{"prompt": "consent select_account"}},
		{"microsoft template", `"template":"microsoft",` + cred, selectAccount},
		{"github template", `"template":"github",` + cred, selectAccount},
		{"OIDC template left unset", `"template":"okta","base_url":"https://acme.okta.com",` + cred, nil},
		{"template without", `"template":"slack",` + cred, nil},
		{"entry overrides the template's value", `"template":"github",` + cred + `,"select_account_params":{"prompt":"login"}`, map[string]string{"prompt": "login"}},
		{"entry merges over the template", `"template":"google",` + cred + `,"select_account_params":{"hd":"example.com"}`,
			map[string]string{"prompt": "consent select_account", "hd": "example.com"}},
		{"entry removes the template's", `"template":"microsoft",` + cred + `,"select_account_params":{"prompt":""}`, nil},
		{"entry adds to a template without", `"template":"slack",` + cred + `,"select_account_params":{"prompt":"select_account"}`, selectAccount},
		{"generic without", generic, nil},
		{"generic with", generic + `,"select_account_params":{"prompt":"select_account"}`, selectAccount},
		{"generic with {}", generic + `,"select_account_params":{}`, nil},
		{"discovered: OIDC's by default", discovered, selectAccount},
		{"discovered, entry's own", discovered + `,"select_account_params":{"prompt":"login"}`, map[string]string{"prompt": "login"}},
		{"discovered, {}: none", discovered + `,"select_account_params":{}`, nil},
		{"discovered, removed", discovered + `,"select_account_params":{"prompt":""}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := parse(`{"providers":[{"name":"p",`+tt.entry+`}]}`, false, map[string]string{"S": "s"})
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.Providers[0].SelectAccountParams
			if !maps.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
				t.Fatalf("SelectAccountParams %#v, want %#v", got, tt.want)
			}
		})
	}
	// The template itself is not changed by an entry's merge (parallel
	// subtests run after this, so the merge is done here too).
	if _, err := parse(`{"providers":[{"name":"p","template":"github",`+cred+`,"select_account_params":{"prompt":"","login":"octocat"}}]}`,
		false, map[string]string{"S": "s"}); err != nil {
		t.Fatal(err)
	}
	if tpl, _ := provider.Template("github"); !maps.Equal(tpl.SelectAccountParams, selectAccount) {
		t.Fatalf("github template now %v", tpl.SelectAccountParams)
	}
}

func TestAPIKeyVerify(t *testing.T) {
	t.Parallel()
	var fail503 bool
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case fail503:
			w.WriteHeader(http.StatusServiceUnavailable)
		case r.Header.Get("X-Api-Key") == "Token good-key":
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer api.Close()
	cfg, err := parse(`{"providers":[
		{"name":"k","kind":"api_key","verify":{"method":"get","url":"`+api.URL+`/me","header":"X-Api-Key","value":"Token {key}","expect_status":204}},
		{"name":"plain","kind":"api_key"}]}`, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := provider.New(context.Background(), cfg, provider.Options{})
	if err != nil {
		t.Fatal(err)
	}
	k, err := cat.APIKey("k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.OAuth("k"); !errors.Is(err, provider.ErrUnknownProvider) {
		t.Fatalf("an api_key provider as OAuth: %v", err)
	}
	ctx := context.Background()
	tests := []struct {
		name string
		key  string
		want error
	}{
		{"good key", "good-key", nil},
		{"refused key", "bad-key-12345", provider.ErrInvalidKey},
		{"empty", "", provider.ErrInvalidKey},
		{"header injection", "good-key\r\nX-Evil: 1", provider.ErrInvalidKey},
		{"surrounding space", " good-key", provider.ErrInvalidKey},
		{"too long", strings.Repeat("k", provider.MaxAPIKeyLength+1), provider.ErrInvalidKey},
	}
	for _, tt := range tests {
		err := k.Verify(ctx, tt.key)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%s: got %v, want %v", tt.name, err, tt.want)
		}
		if err != nil && tt.key != "" && strings.Contains(err.Error(), tt.key) {
			t.Errorf("%s: error echoes the key", tt.name)
		}
	}
	fail503 = true
	if err := k.Verify(ctx, "good-key"); !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("provider down: %v", err)
	}
	plain, _ := cat.APIKey("plain")
	if err := plain.Verify(ctx, "anything"); err != nil || plain.Info().Verifiable {
		t.Fatalf("no verification configured: %v", err)
	}
}

func TestGenericProviderDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := parse(`{"providers":[
		{"name":"a","kind":"oauth2","client_id":"x","client_secret_env":"S","authorize_url":"https://a.example/auth","token_url":"https://a.example/token"},
		{"name":"b","kind":"oauth2","client_id":"x","client_secret_env":"S","authorize_url":"https://a.example/auth","token_url":"https://a.example/token","pkce":true,"revocation_url":"https://a.example/revoke"}]}`,
		false, map[string]string{"S": "s"})
	if err != nil {
		t.Fatal(err)
	}
	a, b := cfg.Providers[0], cfg.Providers[1]
	if !a.PKCE || a.AuthStyle != provider.AuthBasic || a.ScopeSeparator != " " || a.Revocation != provider.RevokeNone ||
		a.InvalidGrantErrors[0] != "invalid_grant" || a.DisplayName != "a" {
		t.Fatalf("a: %+v", a)
	}
	if !b.PKCE || b.Revocation != provider.RevokeRFC7009 {
		t.Fatalf("b: %+v", b)
	}
	// PKCE cannot be turned off (DESIGN invariant 3), for an entry or a
	// template.
	for _, entry := range []string{
		`{"name":"c","kind":"oauth2","client_id":"x","client_secret_env":"S","authorize_url":"https://a.example/auth","token_url":"https://a.example/token","pkce":false}`,
		`{"name":"slack","template":"slack","client_id":"x","client_secret_env":"S","pkce":false}`,
	} {
		_, err := parse(`{"providers":[`+entry+`]}`, false, map[string]string{"S": "s"})
		if err == nil || !strings.Contains(err.Error(), "pkce") {
			t.Fatalf("pkce false accepted: %v", err)
		}
	}
}

func TestClientSecretFileFromDisk(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte("  disk-secret \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := provider.ParseConfig([]byte(`{"providers":[{"name":"z","template":"zoom","client_id":"x","client_secret_file":"`+path+`"}]}`),
		provider.ParseOptions{})
	if err != nil || cfg.Providers[0].ClientSecret.Reveal() != "disk-secret" {
		t.Fatalf("%v", err)
	}
}
