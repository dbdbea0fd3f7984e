package web

import (
	"log/slog"
	"net/http"

	"go.opentelemetry.io/otel/trace"

	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/web/templates"
)

// PublicConfig configures Public.
type PublicConfig struct {
	Logger *slog.Logger
	// HSTS sends Strict-Transport-Security (every deployment but dev mode).
	HSTS bool
	// TrustedOrigins are same-site for cross-origin protection although
	// their Host differs (connectd's public origin, behind a proxy).
	TrustedOrigins []string
	// Limits are the per-route-class rate limits.
	Limits RateLimits
	// Observe, when set, is told of every finished request (metrics).
	Observe Observer
	// DB bounds every request's database work (zero fields: db's defaults).
	DB db.Deadlines
	// Brand is the operator's name, logo and accent on every page (Branded).
	Brand templates.Brand
	// Tracer, when set, gives every request a server span (Tracing), with
	// the access log's line inside it; nil (tracing off): no span, and
	// nothing of tracing in the chain.
	Tracer trace.TracerProvider
}

// Public wraps the public listener's route table in everything every response
// needs, outermost first: request ids, the access log, panic recovery, the
// security headers (so that even a refusal below carries them), the refusal
// of paths and queries that are not text (TextOnly: a malformed request is
// refused before any policy looks at it, as net/http refuses a malformed
// request line), cross-origin protection for state-changing requests, the
// rate limits; the database deadlines of package db are on every request's
// context from the first step (RequestContext's copy of the request carries
// them), and with tracing on a server span wraps all but the first two. Every route registered on the public mux, by any package, gets all
// of it.
//
// The handler also lists m's routes: it has a Routes() []Route method, for
// tests that must reach every route the listener serves.
func Public(m *Mux, c PublicConfig) (http.Handler, error) {
	cross, err := CrossOrigin(c.Logger, c.TrustedOrigins...)
	if err != nil {
		return nil, err
	}
	chain := []func(http.Handler) http.Handler{RequestContext(c.Limits.TrustedProxies, &c.DB), Routing(m)}
	if c.Tracer != nil {
		chain = append(chain, Tracing(c.Tracer, m.Routed))
	}
	return public{Handler: Chain(m, append(chain,
		AccessLog(c.Logger, c.Observe),
		Recover(c.Logger),
		SecurityHeaders(c.HSTS),
		Branded(c.Brand),
		Localized,
		TextOnly(c.Logger),
		cross,
		RateLimit(c.Limits, c.Logger),
	)...), mux: m}, nil
}

// public is the handler Public returns: the chain, and the table under it.
type public struct {
	http.Handler
	mux *Mux
}

// Routes lists the route table under the chain (Mux.Routes).
func (p public) Routes() []Route { return p.mux.Routes() }
