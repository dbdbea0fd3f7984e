package provider_test

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/provider"
)

var updateDocs = flag.Bool("update", false, "rewrite the generated template table in docs/providers.md")

const (
	docsPath  = "../../docs/providers.md"
	docsBegin = "<!-- BEGIN GENERATED: go test ./internal/provider -run TestProvidersDoc -update -->\n"
	docsEnd   = "<!-- END GENERATED -->\n"
)

// TestProvidersDoc keeps the template table of docs/providers.md in step
// with the catalog. After changing a template, regenerate it with
//
//	go test ./internal/provider -run TestProvidersDoc -update
func TestProvidersDoc(t *testing.T) {
	doc, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(doc, []byte(docsBegin)), bytes.Index(doc, []byte(docsEnd))
	if i < 0 || j < i {
		t.Fatalf("%s has no generated section (%q … %q)", docsPath, docsBegin, docsEnd)
	}
	table := templateTable()
	if string(doc[i+len(docsBegin):j]) == table {
		return
	}
	if !*updateDocs {
		t.Fatalf("the template table in %s is stale: run go test ./internal/provider -run TestProvidersDoc -update", docsPath)
	}
	out := slices.Concat(doc[:i+len(docsBegin)], []byte(table), doc[j:])
	if err := os.WriteFile(docsPath, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// templateTable renders every template as two markdown tables (oauth2,
// api_key), one row each.
func templateTable() string {
	var b strings.Builder
	b.WriteString("\n### OAuth templates\n\n")
	b.WriteString("| template | kind | authorize / token host | per-customer | scopes | client auth | extra authorize params | another account | token answer | refresh | narrows | PKCE | revocation | account | API base | source |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, name := range provider.Templates() {
		s, _ := provider.Template(name)
		if s.Kind != provider.KindOAuth2 {
			continue
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | [docs](%s) |\n",
			name, s.Kind, hosts(s), perCustomer(s), scopes(s), s.AuthStyle, params(s.AuthorizeParams), params(s.SelectAccountParams), answer(s),
			refresh(s), yesNo(s.NarrowOnRefresh), s.PKCESupport, revocation(s), account(s), apiBase(s), s.Docs)
	}
	b.WriteString("\n### API-key templates\n\n")
	b.WriteString("| template | kind | key format | verification | API base | source |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, name := range provider.Templates() {
		s, _ := provider.Template(name)
		if s.Kind != provider.KindAPIKey {
			continue
		}
		format := "any (unverified format)"
		if s.KeyPattern != "" {
			format = "`" + strings.ReplaceAll(s.KeyPattern, "|", `\|`) + "`"
		}
		v := s.Verify
		verify := fmt.Sprintf("%s %s, `%s: %s`", v.Method, v.URL, v.Header, v.Value)
		for _, k := range slices.Sorted(maps.Keys(v.Headers)) {
			verify += fmt.Sprintf(", `%s: %s`", k, v.Headers[k])
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s → %d | %s | [docs](%s) |\n", name, s.Kind, format, verify, v.ExpectStatus, apiBase(s), s.Docs)
	}
	b.WriteString("\n### Rate limits of the templates\n\n")
	b.WriteString("The limits the proxy keeps for each template (`rate_limits`; see \"Rate limits\" below). A template not listed has none: the proxy still reads the provider's own answers.\n\n")
	b.WriteString("| template | counted per | requests | per | paths | source |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, name := range provider.Templates() {
		s, _ := provider.Template(name)
		for _, l := range s.RateLimits {
			path := "all"
			if l.Path != "" {
				path = "`" + l.Path + "…`"
			}
			if l.PerMethod {
				path += ", each method apart"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %d | %s | %s | [docs](%s) |\n", name, l.Scope, l.Requests, per(l.Per), path, l.Source)
		}
	}
	b.WriteString("\n")
	return b.String()
}

func per(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%d min", d/time.Minute)
	}
	return fmt.Sprintf("%d s", d/time.Second)
}

func host(raw string) string {
	if rest, ok := strings.CutPrefix(raw, "{base_url}"); ok {
		return "`{base_url}`" + strings.SplitN(rest, "/", 2)[0]
	}
	u, err := url.Parse(strings.ReplaceAll(raw, "{subdomain}", "subdomain-placeholder"))
	if err != nil {
		return raw
	}
	return strings.ReplaceAll(u.Host, "subdomain-placeholder", "`{subdomain}`")
}

func hosts(s provider.Spec) string {
	a, t := host(s.AuthorizeURL), host(s.TokenURL)
	if a == t {
		return a
	}
	return a + " / " + t
}

func perCustomer(s provider.Spec) string {
	all := s.AuthorizeURL + s.TokenURL
	switch {
	case strings.Contains(all, "{subdomain}"):
		return "`subdomain` (one label)"
	case strings.Contains(all, "{tenant}"):
		return "`tenant` (default `common`)"
	case strings.Contains(all, "{base_url}") && len(s.BaseURLHosts) > 0:
		return "`base_url`: `" + strings.Join(s.BaseURLHosts, "`, `") + "`"
	case strings.Contains(all, "{base_url}"):
		return "`base_url`: any https host (self-managed)"
	}
	return "—"
}

func scopes(s provider.Spec) string {
	sep := "space"
	if s.ScopeSeparator == "," {
		sep = "comma"
	}
	if s.ScopeParam == "user_scope" {
		sep += ", in `user_scope`"
	}
	if len(s.Scopes) > 0 {
		sep += "; default " + strings.Join(s.Scopes, " ")
	}
	if len(s.AlwaysScopes) > 0 {
		sep += "; always " + strings.Join(s.AlwaysScopes, " ")
	}
	return sep
}

func params(p map[string]string) string {
	if len(p) == 0 {
		return "—"
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(p)) {
		out = append(out, "`"+k+"="+p[k]+"`")
	}
	return strings.Join(out, " ")
}

func answer(s provider.Spec) string {
	var out []string
	if s.AcceptJSON {
		out = append(out, "form-encoded unless JSON asked (asked)")
	}
	if s.TokenResponse == provider.ResponseSlackUser {
		out = append(out, "token nested in `authed_user`")
	}
	if extra := slices.DeleteFunc(slices.Clone(s.InvalidGrantErrors), func(c string) bool { return c == "invalid_grant" }); len(extra) > 0 {
		out = append(out, "dead-grant codes "+strings.Join(extra, ", "))
	}
	if len(out) == 0 {
		return "standard"
	}
	return strings.Join(out, "; ")
}

func refresh(s provider.Spec) string {
	var r []string
	if s.RefreshRotates {
		r = append(r, "rotating")
	}
	if s.RefreshIdleLifetime > 0 {
		r = append(r, "lapses after "+durationDays(s.RefreshIdleLifetime)+" unused")
	}
	if s.RefreshReuseGrace > 0 {
		r = append(r, "old token accepted "+s.RefreshReuseGrace.String()+" after rotation")
	}
	if len(r) == 0 {
		return "—"
	}
	return strings.Join(r, ", ")
}

func durationDays(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

func revocation(s provider.Spec) string {
	switch s.Revocation {
	case provider.RevokeRFC7009:
		return "RFC 7009"
	case provider.RevokeBearer:
		return "bearer"
	}
	return "—"
}

func account(s provider.Spec) string {
	var out []string
	switch {
	case s.AccountIDField != "" && s.AccountLabelField != "":
		out = append(out, "`"+s.AccountIDField+"`, `"+s.AccountLabelField+"`")
	case s.AccountIDField != "":
		out = append(out, "`"+s.AccountIDField+"`")
	case s.AccountLabelField != "":
		out = append(out, "label `"+s.AccountLabelField+"`")
	}
	if slices.Contains(s.AccountScopes, "openid") {
		out = append(out, "ID token `sub`")
	}
	if s.AccountURL != "" {
		out = append(out, "GET "+s.AccountURL+" `"+s.AccountURLIDField+"`")
	}
	if len(out) == 0 {
		return "— (each connection a new account)"
	}
	return strings.Join(out, "; ")
}

// apiBase is where the proxy forwards to, and how it attaches the
// credential when that is not the kind's default (an API key goes where
// its verification request puts it, shown in that column).
func apiBase(s provider.Spec) string {
	if s.APIBaseURL == "" {
		return "— (no proxy)"
	}
	out := "`" + s.APIBaseURL + "`"
	if s.APIAuth.Header != "" {
		out += ", `" + s.APIAuth.Header + ": " + s.APIAuth.Value + "`"
	}
	return out
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
