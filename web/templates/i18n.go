package templates

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"io/fs"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
)

// The end-user pages speak the user's language: every word they show is a
// message in the catalogs under locales/ (one file per page area and
// language, "connect.en.json", "connect.ko.json"), looked up by id with
// go-i18n, which also knows each language's plural rules. English is the
// source and the fallback: a message missing in another language is shown
// in English (TestCatalogsAgree makes sure none is).
//
// A page learns its language from the request (WithLanguage, called by
// internal/web for every page): the user's own choice (the language cookie,
// set from the footer's links) when they made one, else the browser's
// Accept-Language, else English.

//go:embed locales
var locales embed.FS

// Languages are the languages the pages speak, English first (the
// fallback).
var Languages = []Language{{Tag: language.English, Name: "English"}, {Tag: language.Korean, Name: "한국어"}}

// Language is one language the pages speak: its tag, and its own name for
// itself (what the footer's switch shows).
type Language struct {
	Tag  language.Tag
	Name string
}

var (
	bundle = sync.OnceValue(func() *i18n.Bundle {
		b := i18n.NewBundle(language.English)
		b.RegisterUnmarshalFunc("json", json.Unmarshal)
		files, err := fs.Glob(locales, "locales/*.json")
		if err != nil {
			panic(err)
		}
		for _, f := range files {
			if _, err := b.LoadMessageFileFS(locales, f); err != nil {
				panic(fmt.Sprintf("templates: catalog %s: %v", f, err)) // tested: TestCatalogsAgree
			}
		}
		return b
	})
	matcher = sync.OnceValue(func() language.Matcher {
		tags := make([]language.Tag, len(Languages))
		for i, l := range Languages {
			tags[i] = l.Tag
		}
		return language.NewMatcher(tags)
	})
)

// speaker is a page's language: the catalog lookup and the tag, and the
// page's own address (the language links return there). chosen: the page
// was given a language (WithLanguage), so it offers the others.
type speaker struct {
	loc    *i18n.Localizer
	tag    language.Tag
	here   string
	chosen bool
}

type languageKey struct{}

// WithLanguage returns ctx carrying the language pages rendered under it
// speak: the first of prefs (each a language tag or an Accept-Language
// header value, best first; empty ones skipped) that the pages speak, else
// English. here is the page's address on this site, where its language
// links bring the browser back ("" for the home page).
func WithLanguage(ctx context.Context, here string, prefs ...string) context.Context {
	tag := English
	for _, p := range prefs {
		if p == "" {
			continue
		}
		want, _, err := language.ParseAcceptLanguage(p)
		if err != nil || len(want) == 0 {
			continue
		}
		if _, i, conf := matcher().Match(want...); conf != language.No {
			tag = Languages[i].Tag
			break
		}
	}
	return context.WithValue(ctx, languageKey{}, speaker{loc: i18n.NewLocalizer(bundle(), tag.String()), tag: tag, here: here, chosen: true})
}

// English is the fallback language.
var English = language.English

// LanguageOf is the language of the pages rendered under ctx (English
// when WithLanguage was not called).
func LanguageOf(ctx context.Context) language.Tag { return speakerOf(ctx).tag }

// ParseLanguage is the tag of a language the pages speak named by s ("ko",
// "en"), exactly; ok false for any other.
func ParseLanguage(s string) (language.Tag, bool) {
	for _, l := range Languages {
		if l.Tag.String() == s {
			return l.Tag, true
		}
	}
	return language.Und, false
}

var englishSpeaker = sync.OnceValue(func() speaker {
	return speaker{loc: i18n.NewLocalizer(bundle(), "en"), tag: language.English}
})

func speakerOf(ctx context.Context) speaker {
	if s, ok := ctx.Value(languageKey{}).(speaker); ok {
		return s
	}
	return englishSpeaker()
}

// T is message id in ctx's language, as plain text (the page escapes it).
// args are name, value pairs the message names ({{.Name}}); a "Count"
// argument (an int) also picks the plural form.
func T(ctx context.Context, id string, args ...any) string {
	return localize(ctx, id, false, args)
}

// H is message id in ctx's language as HTML: the message's own markup
// (<strong>, from the catalog, which is ours) is kept, and every argument
// is escaped — a client's name in it is text, never markup.
func H(ctx context.Context, id string, args ...any) templ.Component {
	return templ.ComponentFunc(func(ctx context.Context, w io.Writer) error {
		_, err := io.WriteString(w, localize(ctx, id, true, args))
		return err
	})
}

// Lookup is message id in ctx's language, as plain text, and whether any
// catalog has it (for words chosen at run time: an error code's).
func Lookup(ctx context.Context, id string, args ...any) (string, bool) {
	s := localize(ctx, id, false, args)
	return s, s != id
}

// Translated reports whether ctx's language is other than English, the
// language of connectd's own error descriptions.
func Translated(ctx context.Context) bool { return LanguageOf(ctx) != language.English }

// localize looks id up; escape HTML-escapes the arguments (H). A message
// missing from every catalog shows its id, so a page never fails for it
// (TestCatalogsAgree fails instead).
func localize(ctx context.Context, id string, escape bool, args []any) string {
	var data map[string]any
	var count any
	if len(args) > 0 {
		data = make(map[string]any, len(args)/2)
		for i := 0; i+1 < len(args); i += 2 {
			name, _ := args[i].(string)
			v := args[i+1]
			if name == "Count" {
				count = v
			}
			if s, ok := v.(string); ok && escape {
				v = html.EscapeString(s)
			}
			data[name] = v
		}
	}
	out, err := speakerOf(ctx).loc.Localize(&i18n.LocalizeConfig{MessageID: id, TemplateData: data, PluralCount: count})
	if err != nil && out == "" {
		return id
	}
	return out
}

// dateLayouts are the layouts of dates on pages, per language (the
// catalogs' words stay words; a layout is Go's).
var dateLayouts = map[string][2]string{
	"en": {"2 Jan 2006", "2 Jan 2006, 15:04 MST"},
	"ko": {"2006년 1월 2일", "2006년 1월 2일 15:04 MST"},
}

// Date is t as a date in ctx's language ("2 Jan 2026", "2026년 1월 2일").
func Date(ctx context.Context, t time.Time) string {
	return t.Format(layoutOf(ctx)[0])
}

// DateTime is t as a date and time in ctx's language, in t's location.
func DateTime(ctx context.Context, t time.Time) string {
	return t.Format(layoutOf(ctx)[1])
}

func layoutOf(ctx context.Context) [2]string {
	base, _ := LanguageOf(ctx).Base()
	if l, ok := dateLayouts[base.String()]; ok {
		return l
	}
	return dateLayouts["en"]
}

// offersLanguages reports whether the page offers its other languages:
// only a page given one (WithLanguage; not the admin console's).
func offersLanguages(ctx context.Context) bool { return speakerOf(ctx).chosen }

// languageHref is the link that switches the pages to lang and comes back
// to this page (internal/web.LanguageChoice).
func languageHref(ctx context.Context, lang string) string {
	q := url.Values{"set": {lang}}
	if h := speakerOf(ctx).here; h != "" {
		q.Set("return", h)
	}
	return "/language?" + q.Encode()
}

// langAttr is the page's lang attribute ("en", "ko").
func langAttr(ctx context.Context) string {
	return strings.ToLower(LanguageOf(ctx).String())
}
