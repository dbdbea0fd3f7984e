package templates

import (
	"io/fs"
	"net/url"
	"slices"
	"strings"
	"unicode"
)

// initial is the letter shown in a name's badge: its first letter or digit,
// upper-cased, or "?" when it has none.
func initial(name string) string {
	for _, r := range name {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return strings.ToUpper(string(r))
		}
	}
	return "?"
}

// errorKind picks the error page's styling: a refusal, or a passing problem
// (expired link, too many requests, an outage) worth retrying.
func errorKind(status int) string {
	switch status {
	case 410, 429, 502, 503, 504:
		return "expired"
	default:
		return "refused"
	}
}

// contains reports whether list holds s.
func contains(list []string, s string) bool { return slices.Contains(list, s) }

// Mark is a party's picture on a page (an MCP server, a provider): its logo
// when there is one, else a badge with its initial.
type Mark struct {
	Name    string
	LogoURL string // an https URL (egress.CheckLogoURL) or a /static/ path; "" for the initial
}

// ProviderMark is a provider's Mark: the operator's logo URL, else the
// monogram shipped for its template (static/providers/), else none.
func ProviderMark(name, logoURL, template string) Mark {
	if logoURL != "" {
		return Mark{Name: name, LogoURL: logoURL}
	}
	if template != "" {
		if _, err := fs.Stat(Static, "static/providers/"+template+".svg"); err == nil {
			return Mark{Name: name, LogoURL: "/static/providers/" + template + ".svg"}
		}
	}
	return Mark{Name: name}
}

// Scope is one permission as pages list it: the token, and what it means in
// words when the provider's template or the operator says ("" otherwise).
type Scope struct {
	Token       string
	Description string
}

// Described pairs each scope with its description in text.
func Described(scopes []string, text map[string]string) []Scope {
	out := make([]Scope, 0, len(scopes))
	for _, s := range scopes {
		out = append(out, Scope{Token: s, Description: text[s]})
	}
	return out
}

// hostOf is the host of an absolute URL, for a link's text ("" if none).
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// DisconnectPath is the confirmation page of disconnecting a connection.
func DisconnectPath(provider, connection string) string {
	return "/account/disconnect?" + url.Values{"provider": {provider}, "connection": {connection}}.Encode()
}

// accountTail is what follows "your Demo Files account" in a sentence:
// " octocat (work)", or "" when the provider named no account and the user
// gave no label.
func accountTail(account, label string) string {
	s := ""
	if account != "" {
		s += " " + account
	}
	if label != "" {
		s += " (" + label + ")"
	}
	return s
}
