package web

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
)

// Kind says what a route answers, so that middleware knows it from the
// registration rather than guessing from the path (an escaped
// "/admin/api%2F…" once routed to a page the path said was an API).
type Kind uint8

// Route kinds.
const (
	// KindPage routes answer HTML pages; their errors are the error page.
	KindPage Kind = iota
	// KindAPI routes answer JSON; their errors are the JSON envelope, and
	// they carry the REST header set.
	KindAPI
	// KindAsset routes are probes and static files: no rate limit.
	KindAsset
)

// Route is one entry of a route table: a ServeMux pattern, what it answers,
// which rate-limit budget it draws from, and its handler.
type Route struct {
	Pattern string
	Kind    Kind
	Class   RouteClass
	Handler http.Handler
	// MaxBody caps the request body the handler may read (0: the kind's
	// default, MaxFormBody for pages, MaxJSONBody for APIs; none for
	// assets, which read no body). The one place inbound sizes are set: a
	// handler parses its form or JSON and gets 413 / bad_form past it.
	MaxBody int64
	// Raw routes (a pattern without a method) get every request whose
	// escaped path starts with the pattern's path up to its first
	// wildcard, as it arrived: ServeMux neither cleans nor redirects the
	// path (it would redirect one holding "..", "." or "//" to another of
	// connectd's paths) nor fills the wildcards; the handler reads the
	// path from r.URL and refuses what it must. The provider API proxy's
	// paths are the provider's, not connectd's.
	Raw bool
}

// MaxFormBody is the default body cap of a page route: its forms hold a
// CSRF token and a few short fields.
const MaxFormBody = 16 << 10

// APIRoute is a JSON route drawing from budget class.
func APIRoute(pattern string, class RouteClass, logger *slog.Logger, h APIFunc) Route {
	return Route{Pattern: pattern, Kind: KindAPI, Class: class, Handler: API(logger, h)}
}

// PageRoute is an HTML route drawing from budget class.
func PageRoute(pattern string, class RouteClass, logger *slog.Logger, h PageFunc) Route {
	return Route{Pattern: pattern, Kind: KindPage, Class: class, Handler: Page(logger, h)}
}

// AssetRoute is a probe or static route: not rate limited.
func AssetRoute(pattern string, h http.Handler) Route {
	return Route{Pattern: pattern, Kind: KindAsset, Class: ClassNone, Handler: h}
}

// Mux is an http.ServeMux that remembers every route's Kind and Class.
// Public looks each request's route up once, before any middleware needs it.
type Mux struct {
	mux    *http.ServeMux
	routes map[string]Route
	raw    []rawRoute
}

// rawRoute is a Raw route: its path prefix and its handler.
type rawRoute struct {
	prefix string
	h      http.Handler
	rt     Route
}

// NewMux returns an empty route table.
func NewMux() *Mux { return &Mux{mux: http.NewServeMux(), routes: map[string]Route{}} }

// Handle registers rt. A route without a handler is a programming error.
func (m *Mux) Handle(rt Route) {
	if rt.Handler == nil {
		panic("web: route " + rt.Pattern + " has no handler")
	}
	h := rt.Handler
	if max := rt.bodyCap(); max > 0 {
		h = limitBody(h, max)
	}
	m.mux.Handle(rt.Pattern, h)
	m.routes[rt.Pattern] = rt
	if rt.Raw {
		prefix, _, _ := strings.Cut(rt.Pattern, "{")
		if !strings.HasPrefix(prefix, "/") || !strings.HasSuffix(prefix, "/") {
			panic("web: raw route " + rt.Pattern + " must be a path without a method, with a wildcard after a /")
		}
		m.raw = append(m.raw, rawRoute{prefix: prefix, h: h, rt: rt})
	}
}

// rawFor is the Raw route r's escaped path falls under, if any.
func (m *Mux) rawFor(r *http.Request) (rawRoute, bool) {
	if len(m.raw) > 0 {
		p := r.URL.EscapedPath()
		for _, rr := range m.raw {
			if strings.HasPrefix(p, rr.prefix) {
				return rr, true
			}
		}
	}
	return rawRoute{}, false
}

// bodyCap is the route's MaxBody, or its kind's default.
func (rt Route) bodyCap() int64 {
	switch {
	case rt.MaxBody > 0:
		return rt.MaxBody
	case rt.Kind == KindPage:
		return MaxFormBody
	case rt.Kind == KindAPI:
		return MaxJSONBody
	}
	return 0
}

// limitBody caps the request body h may read at max bytes.
func limitBody(h http.Handler, max int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
		h.ServeHTTP(w, r)
	})
}

// Routes lists the registered routes, ordered by pattern.
func (m *Mux) Routes() []Route {
	out := make([]Route, 0, len(m.routes))
	for _, rt := range m.routes {
		out = append(out, rt)
	}
	slices.SortFunc(out, func(a, b Route) int { return strings.Compare(a.Pattern, b.Pattern) })
	return out
}

// ServeHTTP dispatches to the matching route.
func (m *Mux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rr, ok := m.rawFor(r); ok {
		rr.h.ServeHTTP(w, r)
		return
	}
	m.mux.ServeHTTP(w, r)
}

// Handler returns the handler and pattern r dispatches to, as
// http.ServeMux.Handler does.
func (m *Mux) Handler(r *http.Request) (http.Handler, string) {
	if rr, ok := m.rawFor(r); ok {
		return rr.h, rr.rt.Pattern
	}
	return m.mux.Handler(r)
}

// Lookup returns the route r dispatches to. A request that matches no
// registered pattern (ServeMux's own redirects and 404s) is a page drawing
// from the browser budget.
func (m *Mux) Lookup(r *http.Request) Route {
	if rr, ok := m.rawFor(r); ok {
		return rr.rt
	}
	if _, pattern := m.mux.Handler(r); pattern != "" {
		if rt, ok := m.routes[pattern]; ok {
			return rt
		}
	}
	return Route{Kind: KindPage, Class: ClassBrowser}
}

// Routing records the route each request dispatches to in its context (set
// up by RequestContext, which must come first), for RouteOf.
func Routing(m *Mux) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if ri := infoOf(r.Context()); ri != nil {
				rt := m.Lookup(r)
				ri.kind, ri.class, ri.pattern, ri.routed = rt.Kind, rt.Class, rt.Pattern, true
			}
			next.ServeHTTP(w, r)
		})
	}
}

// Routed returns the route Routing recorded for r (its pattern and kind),
// or m.Lookup(r) when r went through no Routing: Tracing's lookup on the
// public listener, which so matches each request against the table once.
func (m *Mux) Routed(r *http.Request) Route {
	if ri := infoOf(r.Context()); ri != nil && ri.routed {
		return Route{Pattern: ri.pattern, Kind: ri.kind, Class: ri.class}
	}
	return m.Lookup(r)
}

// RouteOf returns the Kind and Class Routing recorded for r: a page drawing
// from no budget when r went through no Routing (a bare test chain).
func RouteOf(r *http.Request) (Kind, RouteClass) { return routeOf(r.Context()) }

func routeOf(ctx context.Context) (Kind, RouteClass) {
	if ri := infoOf(ctx); ri != nil && ri.routed {
		return ri.kind, ri.class
	}
	return KindPage, ClassNone
}
