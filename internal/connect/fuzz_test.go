package connect

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/web"
)

// These fuzz targets run their seeds as ordinary tests in make test; fuzz
// them further with, e.g.,
//
//	go test -run '^$' -fuzz FuzzSafeReturnTo -fuzztime 1m ./internal/connect

// FuzzSafeReturnTo: whatever return_to passes, a browser following the
// redirect stays on connectd: no scheme, no host, no backslash, whitespace or
// control character (which browsers strip or turn into '/'), and still none
// of that after one more round of percent-decoding by a proxy.
func FuzzSafeReturnTo(f *testing.F) {
	for _, s := range []string{
		"/", "/session", "/c/abc?x=1", "//evil.example", `/\evil.example`, "/%2F%2Fevil.example", "/%5Cevil",
		"/%09/evil.example", "/\t/evil.example", "/%252F%252Fevil", "https://evil.example", "/a/../../evil",
		"/%2e%2e/x", "/@evil.example", "/x#//evil", "/x?y=//evil", "/%E2%80%AE", "/\u3002evil", "/%",
	} {
		f.Add(s)
	}
	base, _ := url.Parse("https://connect.example.com/login/callback")
	f.Fuzz(func(t *testing.T, s string) {
		if !web.SafeReturnTo(s) {
			return
		}
		u, err := url.Parse(s)
		if err != nil {
			t.Fatalf("accepted an unparsable URL %q", s)
		}
		if u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || u.Fragment != "" {
			t.Fatalf("accepted %q: scheme %q host %q", s, u.Scheme, u.Host)
		}
		if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") || strings.ContainsAny(s, "\\\t\r\n #") {
			t.Fatalf("accepted %q", s)
		}
		if got := base.ResolveReference(u); got.Host != base.Host || got.Scheme != base.Scheme {
			t.Fatalf("%q leads to %s", s, got)
		}
		// What net/http sends as Location stays on the site too.
		w := httptest.NewRecorder()
		http.Redirect(w, httptest.NewRequest("GET", base.String(), nil), s, http.StatusSeeOther)
		loc, err := base.Parse(w.Header().Get("Location"))
		if err != nil || loc.Host != base.Host {
			t.Fatalf("%q redirects to %q", s, w.Header().Get("Location"))
		}
		// A proxy or browser that decodes once more must not find a new
		// authority, a backslash, whitespace or a dot segment.
		dec, err := url.PathUnescape(s)
		if err != nil {
			t.Fatalf("accepted %q with a broken escape", s)
		}
		if strings.HasPrefix(dec, "//") || strings.ContainsAny(dec, "\\") || strings.IndexFunc(dec, func(r rune) bool {
			return r <= ' ' || r == 0x7f
		}) >= 0 {
			t.Fatalf("%q decodes to %q", s, dec)
		}
		path, _, _ := strings.Cut(dec, "?")
		for _, seg := range strings.Split(path, "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("%q decodes to a dot segment: %q", s, dec)
			}
		}
	})
}

var stateShape = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// FuzzCallbackQuery: the query of an authorization response (provider or
// issuer) is accepted only with one state of the exact shape connectd issues
// and bounded, printable code, iss and error parameters, none repeated; the
// provider error it carries is reported without echoing anything else; and
// RFC 9207 accepts exactly the provider's issuer.
func FuzzCallbackQuery(f *testing.F) {
	good := "state=" + strings.Repeat("A", 43) + "&code=abc&iss=https%3A%2F%2Fissuer.example"
	for _, s := range []string{
		good, good + "&state=" + strings.Repeat("B", 43), good + "&code=x", "code=abc", "state=short",
		"state=" + strings.Repeat("A", 42) + "%0A", "state=" + strings.Repeat("A", 43) + "&error=access_denied",
		"state=" + strings.Repeat("A", 43) + "&error=%3Cscript%3E", "state=" + strings.Repeat("A", 43) + "&code=a%20b",
		"state=" + strings.Repeat("A", 43) + "&iss=https%3A%2F%2Fissuer.example.evil", "state;=x", "%zz",
	} {
		f.Add(s)
	}
	p, err := provider.NewProvider(context.Background(), provider.Spec{Name: "fuzz", Kind: provider.KindOAuth2,
		Issuer: "https://issuer.example", AuthorizeURL: "https://issuer.example/authorize",
		TokenURL: "https://issuer.example/token", IssParameterSupported: true}, false, provider.Options{})
	if err != nil {
		f.Fatal(err)
	}
	oa := p.(provider.OAuth)
	f.Fuzz(func(t *testing.T, raw string) {
		q, _ := url.ParseQuery(raw)
		rp, err := parseRedirect(q)
		if err != nil {
			if !errors.Is(err, errParamMissing) && !errors.Is(err, errParamMalformed) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !stateShape.MatchString(rp.State) || len(q["state"]) != 1 {
			t.Fatalf("accepted state %q from %q", rp.State, raw)
		}
		for name, v := range map[string]string{"code": rp.Code, "iss": rp.Iss, "error": rp.Error} {
			if len(q[name]) > 1 || len(v) > 4096 || strings.IndexFunc(v, func(r rune) bool { return r <= ' ' || r >= 0x7f }) >= 0 {
				t.Fatalf("accepted %s %q from %q", name, v, raw)
			}
		}
		if cbErr := provider.CallbackError("fuzz", url.Values{"error": {rp.Error}}); cbErr != nil {
			var pe *provider.Error
			if !errors.As(cbErr, &pe) || (pe.Code != "" && pe.Code != rp.Error) ||
				strings.ContainsAny(cbErr.Error(), "<>\"'\\") {
				t.Fatalf("provider error %q reported as %v", rp.Error, cbErr)
			}
		}
		if err := oa.CheckIssuer(rp.Iss); (err == nil) != (rp.Iss == "https://issuer.example") {
			t.Fatalf("iss %q: CheckIssuer %v", rp.Iss, err)
		}
	})
}
