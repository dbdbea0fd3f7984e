package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"net/netip"

	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/internal/reqid"
)

// RequestIDHeader is the header that carries a request id in and out.
const RequestIDHeader = "X-Request-Id"

type ctxKey struct{}

// requestInfo is what RequestContext records about a request, in one context
// value (one allocation instead of one per field on every request); the
// request id rides beside it in package reqid's value, for the packages
// below web.
type requestInfo struct {
	addr    string // "" when unknown
	kind    Kind   // the route's, recorded by Routing
	class   RouteClass
	pattern string // the route's pattern, recorded by Routing (for Tracing)
	routed  bool
}

func infoOf(ctx context.Context) *requestInfo {
	ri, _ := ctx.Value(ctxKey{}).(*requestInfo)
	return ri
}

// RequestID returns the request id stored in ctx, or "" (package reqid,
// which packages below web read directly).
func RequestID(ctx context.Context) string { return reqid.From(ctx) }

// NewRequestID returns a fresh random request id (128 bits, hex).
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms.
	return hex.EncodeToString(b[:])
}

// validRequestID reports whether an incoming id is sane enough to adopt: 1–64
// characters of [A-Za-z0-9._:-]. Anything else (empty, long, control
// characters, spaces that could forge log fields) is replaced by a fresh id.
func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == '-', c == ':':
		default:
			return false
		}
	}
	return true
}

// RequestIDs adopts a sane incoming X-Request-Id or generates one, stores it in
// the request context and echoes it in the response header.
func RequestIDs(next http.Handler) http.Handler { return RequestContext(nil, nil)(next) }

// RequestContext is RequestIDs that also records, in the same context, the
// client's address as audit rows name it (see ClientAddr): the TCP peer, or
// what trusted proxies say in X-Forwarded-For; and, when dl is not nil, the
// database deadlines dl (db.WithDeadlines: no request waits longer than dl
// for a pooled connection or a statement, and one that would queue behind
// too many others is answered 503 at once). It is Public's first step, so
// every later step and the route's handler see one copy of the request,
// not two (a copy of http.Request is ~250 B), and the ServeMux's r.Pattern
// is set on the request the access log and the metrics read (on a copy
// made below the access log it never reached them: the log's route was
// empty and the metrics matched the route table again for every request).
func RequestContext(trusted []netip.Prefix, dl *db.Deadlines) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get(RequestIDHeader)
			if !validRequestID(id) {
				id = NewRequestID()
			}
			w.Header()[RequestIDHeader] = []string{id}
			ri := &requestInfo{}
			if a := clientAddr(r, trusted); a.IsValid() {
				ri.addr = a.String()
			}
			ctx := reqid.With(context.WithValue(r.Context(), ctxKey{}, ri), id)
			if dl != nil {
				ctx = db.WithDeadlines(ctx, *dl)
			}
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// ClientAddr returns the client address RequestContext found for r, or the
// host of its TCP peer.
func ClientAddr(r *http.Request) string {
	if ri := infoOf(r.Context()); ri != nil && ri.addr != "" {
		return ri.addr
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
