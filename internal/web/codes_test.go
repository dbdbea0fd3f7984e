package web_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/refusal"
	"github.com/connectd/connectd/internal/release"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/internal/webhook"
	"go.yaml.in/yaml/v3"
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
		{"no provider app", fmt.Errorf("resolve: %w", problem.Detail(org.ErrNoApp, "organization acme has no app of its own at github")),
			409, "provider_app_required", "organization acme has no app of its own at github", nil, ""},
		{"no organization", problem.Detail(org.ErrNotFound, "no organization acme"), 404, "not_found", "no organization acme", nil, ""},
		{"organization in use", problem.Detail(org.ErrInUse, "organization acme still has clients"), 409, "conflict",
			"organization acme still has clients", nil, ""},
		{"api_key provider app", problem.Detail(org.ErrAPIKeyProvider, "provider k is of the api_key kind"), 400, "invalid_request",
			"provider k is of the api_key kind", nil, ""},
		// An app secret that does not open is the operator's problem, not a
		// credential to reauthorize.
		{"app secret", fmt.Errorf("%w: app app_x", org.ErrAppSecret), 500, "internal_error", "internal server error", nil, ""},
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
		{"consent, what to approve", &release.Refusal{Kind: release.ConsentRequired, Provider: "github", Reason: "approve %s",
			Unapproved: []string{"repo"}}, 403, "consent_required", "approve github",
			map[string]any{"unapproved_scopes": []any{"repo"}, "account_changed": false}, ""},
		{"insufficient scope, the connection to step up", &release.Refusal{Kind: release.InsufficientScope, Provider: "github",
			Missing: []string{"repo"}, Connection: "cn_1"}, 403, "insufficient_scope",
			"the github connection lacks required scopes (repo); mint an elicitation with them",
			map[string]any{"missing_scopes": []any{"repo"}, "account": map[string]any{"id": "cn_1"}}, ""},
		{"account mismatch", fmt.Errorf("flow: %w", &release.Refusal{Kind: release.AccountMismatch, Provider: "github"}), 409,
			"account_mismatch", "the request was for another github account than the one the provider signed in", nil, ""},
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
		{"consent", &release.Refusal{Kind: release.ConsentRequired, Reason: "no %s"}, true, false, false, false, 400, "consent_required", "", ""},
		{"insufficient scope (release)", &release.Refusal{Kind: release.InsufficientScope, Connection: "cn_1"}, true, true, false, false, 400,
			"insufficient_scope", "", ""},
		{"account changed", about(vault.ErrAccountChanged), true, false, false, false, 400, "consent_required", "", ""},
		{"wrong audience", mcpauth.ErrWrongAudience, false, false, false, true, 400, "invalid_grant", "wrong_audience", ""},
		{"missing user token", mcpauth.ErrMissingUserToken, false, false, false, false, 400, "invalid_grant", "missing_user_token", ""},
		{"not the user's connection", problem.Detail(problem.ErrNotFound, "no such connection"), false, false, false, false, 400,
			"invalid_target", "not_found", ""},
		{"provider not allowed", &release.Refusal{Kind: release.ProviderNotAllowed, Provider: "github"}, false, false, false, false, 400, "invalid_target",
			"provider_not_allowed", ""},
		{"proxy-only", &release.Refusal{Kind: release.ProxyOnly, Provider: "github"}, false, false, false, false, 400, "unauthorized_client",
			"token_release_disabled", ""},
		{"grant type", refusal.ErrGrantType, false, false, false, false, 400, "unsupported_grant_type", "", ""},
		{"client key, Basic", clientauth.ErrInvalidClientKey, false, false, true, true, 401, "invalid_client", "", `Basic realm="connectd"`},
		{"client key, post", clientauth.ErrMissingClientKey, false, false, true, false, 401, "invalid_client", "", ""},
		{"client assertion", clientauth.ErrInvalidAssertion, false, false, true, false, 401, "invalid_client", "", ""},
		{"DPoP proof", clientauth.ErrInvalidDPoP, false, false, true, false, 401, "invalid_dpop_proof", "", ""},
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

// TestErrorTableIsClosed: every answer the table gives is documented — a
// /v1 or token endpoint code in docs/openapi.yaml, a page's (sign-in) in
// docs/identity.md, the admin API's in docs/admin.md — and every OAuth
// rename is a code RFC 6749 §5.2 or RFC 8693 §2.2.2 defines and the token
// endpoint's schema lists.
func TestErrorTableIsClosed(t *testing.T) {
	t.Parallel()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var spec struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []string `yaml:"enum"`
				} `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal([]byte(read("openapi.yaml")), &spec); err != nil {
		t.Fatal(err)
	}
	v1 := spec.Components.Schemas["Error"].Properties["error"].Enum
	tokenCodes := spec.Components.Schemas["TokenError"].Properties["error"].Enum
	if len(v1) == 0 || len(tokenCodes) == 0 {
		t.Fatal("docs/openapi.yaml has no Error or TokenError code enum")
	}
	pages := read("identity.md") + read("admin.md")
	rfc := []string{"invalid_request", "invalid_client", "invalid_grant", "unauthorized_client", "unsupported_grant_type",
		"invalid_scope", "invalid_target"} // RFC 6749 §5.2, RFC 8693 §2.2.2
	for _, r := range web.TableRows() {
		documented := slices.Contains(v1, r.Code) || slices.Contains(tokenCodes, r.Code) ||
			regexp.MustCompile("`(\\d{3} )?"+regexp.QuoteMeta(r.Code)+"`").MatchString(pages)
		if !documented {
			t.Errorf("code %q is in no docs/openapi.yaml error enum, docs/identity.md or docs/admin.md", r.Code)
		}
		if r.OAuth != "" && (!slices.Contains(rfc, r.OAuth) || !slices.Contains(tokenCodes, r.OAuth)) {
			t.Errorf("%s is renamed %q at the token endpoint: not an RFC 6749/8693 code listed in TokenError", r.Code, r.OAuth)
		}
	}
}

// TestNothingBranchesOnACode: no package outside internal/web picks what to
// do by an answer's code string — comparing an *web.Error's Code to a
// string literal, switching on it, or looking it up in a map. What an
// answer is (a connect link to mint, a connection to name, its OAuth name)
// is its row's, read through *web.Error's methods or web.AsOAuthError.
//
// It reads the source, not types: a name counts as an *web.Error where
// the function binds it from web.AsError/Errorf/Refuse/AsOAuthError, a
// web.Error literal, a copy of one, or declares it so.
func TestNothingBranchesOnACode(t *testing.T) {
	t.Parallel()
	// Known, and owned by another change: each entry must still offend
	// (so that it is deleted once fixed). aboutConnection is to read
	// e.NamesConnection().
	pending := map[string]bool{}
	root := filepath.Join("..", "..")
	found := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch {
			case d.Name() == "node_modules", d.Name() == "testdata", strings.HasPrefix(d.Name(), ".") && rel != ".",
				rel == "internal/web", rel == "ts":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		for fn, lines := range codeBranches(t, path) {
			found[rel+" "+fn] = lines
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for where, lines := range found {
		if !pending[where] {
			t.Errorf("%s branches on an answer's code (%s): give the table's row the property instead",
				where, strings.Join(lines, ", "))
		}
	}
	for where := range pending {
		if found[where] == nil {
			t.Errorf("%s no longer branches on a code: delete it from pending", where)
		}
	}
}

// codeBranches is, per function of the Go file at path, the lines where
// it branches on an *web.Error's Code.
func codeBranches(t *testing.T, path string) map[string][]string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	webName := ""
	for _, im := range f.Imports {
		if im.Path.Value == `"github.com/connectd/connectd/internal/web"` {
			webName = "web"
			if im.Name != nil {
				webName = im.Name.Name
			}
		}
	}
	if webName == "" {
		return nil
	}
	isWeb := func(x ast.Expr, names ...string) bool { // web.<one of names>
		sel, ok := x.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		id, ok := sel.X.(*ast.Ident)
		return ok && id.Name == webName && slices.Contains(names, sel.Sel.Name)
	}
	isErrorType := func(x ast.Expr) bool {
		if s, ok := x.(*ast.StarExpr); ok {
			x = s.X
		}
		return isWeb(x, "Error")
	}
	out := map[string][]string{}
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		bound := map[string]bool{}
		var isAnswer func(x ast.Expr) bool
		isAnswer = func(x ast.Expr) bool {
			switch x := x.(type) {
			case *ast.ParenExpr:
				return isAnswer(x.X)
			case *ast.CallExpr:
				return isWeb(x.Fun, "AsError", "Errorf", "Refuse", "AsOAuthError")
			case *ast.UnaryExpr:
				return isAnswer(x.X)
			case *ast.StarExpr:
				return isAnswer(x.X)
			case *ast.CompositeLit:
				return isErrorType(x.Type)
			case *ast.Ident:
				return bound[x.Name]
			}
			return false
		}
		fields := func(fl *ast.FieldList) {
			if fl == nil {
				return
			}
			for _, fd := range fl.List {
				if isErrorType(fd.Type) {
					for _, n := range fd.Names {
						bound[n.Name] = true
					}
				}
			}
		}
		fields(fn.Recv)
		fields(fn.Type.Params)
		fields(fn.Type.Results)
		// Bindings first (two passes: a copy of a copy), then uses.
		for range 2 {
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.AssignStmt:
					if len(n.Lhs) == len(n.Rhs) {
						for i, l := range n.Lhs {
							if id, ok := l.(*ast.Ident); ok && isAnswer(n.Rhs[i]) {
								bound[id.Name] = true
							}
						}
					}
				case *ast.ValueSpec:
					for i, id := range n.Names {
						if n.Type != nil && isErrorType(n.Type) || i < len(n.Values) && isAnswer(n.Values[i]) {
							bound[id.Name] = true
						}
					}
				case *ast.FuncLit:
					fields(n.Type.Params)
				}
				return true
			})
		}
		isCode := func(x ast.Expr) bool {
			sel, ok := x.(*ast.SelectorExpr)
			return ok && sel.Sel.Name == "Code" && isAnswer(sel.X)
		}
		isString := func(x ast.Expr) bool {
			lit, ok := x.(*ast.BasicLit)
			return ok && lit.Kind == token.STRING
		}
		report := func(n ast.Node) {
			out[fn.Name.Name] = append(out[fn.Name.Name], fmt.Sprintf("line %d", fset.Position(n.Pos()).Line))
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if (n.Op == token.EQL || n.Op == token.NEQ) &&
					(isCode(n.X) && isString(n.Y) || isCode(n.Y) && isString(n.X)) {
					report(n)
				}
			case *ast.SwitchStmt:
				if n.Tag != nil && isCode(n.Tag) {
					report(n)
				}
			case *ast.IndexExpr:
				if isCode(n.Index) {
					report(n)
				}
			}
			return true
		})
	}
	return out
}
