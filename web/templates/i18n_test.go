package templates

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// catalogs reads every catalog file: language → message id → text.
func catalogs(t *testing.T) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	files, err := fs.Glob(locales, "locales/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no catalogs: %v", err)
	}
	for _, f := range files {
		parts := strings.Split(filepath.Base(f), ".")
		lang := parts[len(parts)-2]
		b, _ := fs.ReadFile(locales, f)
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if out[lang] == nil {
			out[lang] = map[string]string{}
		}
		for id, v := range raw {
			text, err := messageText(v)
			if err != nil {
				t.Errorf("%s: %s: %v", f, id, err)
				continue
			}
			if _, dup := out[lang][id]; dup {
				t.Errorf("%s: %s is in two files", f, id)
			}
			out[lang][id] = text
		}
	}
	return out
}

// pluralForms are the CLDR plural forms a message may have (go-i18n's
// JSON: {"one": "...", "other": "..."}).
var pluralForms = []string{"zero", "one", "two", "few", "many", "other"}

// messageText is a catalog value as text: a string, or a plural message
// (an object of plural forms, "other" among them: every language has it),
// its forms joined by newlines in pluralForms' order, so that the
// placeholder checks see every form's names.
func messageText(v json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return s, nil
	}
	var forms map[string]string
	if err := json.Unmarshal(v, &forms); err != nil {
		return "", fmt.Errorf("neither a string nor an object of plural forms: %w", err)
	}
	if _, ok := forms["other"]; !ok {
		return "", fmt.Errorf("a plural message without \"other\"")
	}
	var texts []string
	for form, text := range forms {
		if !slices.Contains(pluralForms, form) {
			return "", fmt.Errorf("%q is no plural form", form)
		}
		if !strings.Contains(text, "{{.Count}}") {
			return "", fmt.Errorf("plural form %q does not name {{.Count}}", form)
		}
	}
	for _, form := range pluralForms {
		if text, ok := forms[form]; ok {
			texts = append(texts, text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

var placeholder = regexp.MustCompile(`{{\s*\.(\w+)\s*}}`)

// TestCatalogsAgree: every language has exactly English's messages, each
// naming the same placeholders; every message a template or Go file of
// this package uses (T, H, Lookup with a literal id) is in English's; the
// bundle loads.
func TestCatalogsAgree(t *testing.T) {
	cats := catalogs(t)
	en := cats["en"]
	for _, l := range Languages {
		lang := l.Tag.String()
		other := cats[lang]
		if other == nil {
			t.Fatalf("no catalog for %s", lang)
		}
		for id, text := range en {
			o, ok := other[id]
			if !ok {
				t.Errorf("%s: %s is missing", lang, id)
				continue
			}
			if a, b := names(text), names(o); !slices.Equal(a, b) {
				t.Errorf("%s: %s names %v, English %v", lang, id, b, a)
			}
		}
		for id := range other {
			if _, ok := en[id]; !ok {
				t.Errorf("%s: %s is not in English", lang, id)
			}
		}
	}
	used := regexp.MustCompile(`\b(?:T|H|Lookup)\(ctx, "([a-z0-9_.]+)"`)
	files, _ := filepath.Glob("*.templ")
	more, _ := filepath.Glob("*.go")
	for _, f := range append(files, more...) {
		if strings.HasSuffix(f, "_templ.go") || strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range used.FindAllStringSubmatch(string(b), -1) {
			if _, ok := en[m[1]]; !ok {
				t.Errorf("%s uses %s, which no catalog has", f, m[1])
			}
		}
	}
	bundle()
}

func names(text string) []string {
	var out []string
	for _, m := range placeholder.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestWithLanguage(t *testing.T) {
	tests := []struct {
		prefs []string
		want  string
	}{
		{nil, "en"},
		{[]string{"", "ko-KR,ko;q=0.9,en;q=0.8"}, "ko"},
		{[]string{"ko", "en-US"}, "ko"},    // the user's choice first
		{[]string{"en", "ko"}, "en"},       // ... either way
		{[]string{"fr-FR,fr;q=0.9"}, "en"}, // not spoken: English
		{[]string{"zz;;;", "ko"}, "ko"},    // a malformed header is skipped
		{[]string{"de", "ko;q=0.5,en;q=0.9"}, "en"},
	}
	for _, tt := range tests {
		ctx := WithLanguage(context.Background(), "", tt.prefs...)
		if got := LanguageOf(ctx).String(); got != tt.want {
			t.Errorf("%q: %s, want %s", tt.prefs, got, tt.want)
		}
	}
}

// TestHEscapesArguments: a name in a translated sentence is text, never
// markup, in every language; the catalog's own markup stays.
func TestHEscapesArguments(t *testing.T) {
	for _, l := range Languages {
		ctx := WithLanguage(context.Background(), "", l.Tag.String())
		var b strings.Builder
		if err := H(ctx, "layout.for_org", "Org", `<script>alert(1)</script>&`).Render(ctx, &b); err != nil {
			t.Fatal(err)
		}
		got := b.String()
		if strings.Contains(got, "<script>") || !strings.Contains(got, "&lt;script&gt;alert(1)&lt;/script&gt;&amp;") || !strings.Contains(got, "<strong>") {
			t.Errorf("%s: %s", l.Tag, got)
		}
		if s := T(ctx, "layout.for_org", "Org", "<b>"); !strings.Contains(s, "<b>") {
			t.Errorf("T escaped its argument (the page escapes T's text): %s", s)
		}
	}
}

func TestDates(t *testing.T) {
	at := time.Date(2026, 12, 2, 9, 5, 0, 0, time.UTC)
	for lang, want := range map[string]string{"en": "2 Dec 2026", "ko": "2026년 12월 2일"} {
		if got := Date(WithLanguage(context.Background(), "", lang), at); got != want {
			t.Errorf("%s: %s, want %s", lang, got, want)
		}
	}
}
