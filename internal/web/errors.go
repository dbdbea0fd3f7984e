package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/connectd/connectd/internal/db"
)

// Error is an error with the HTTP status, stable error code and public
// description a client should see. Handlers return it (usually wrapped) to choose
// the answer; any other error becomes a 500 "internal_error" whose text is logged
// but never sent. Description must never contain a secret.
type Error struct {
	Status      int
	Code        string
	Description string
	// Header holds extra response headers (e.g. WWW-Authenticate, Retry-After).
	Header http.Header
	// Fields holds extra members of the JSON error body (e.g. missing_scopes).
	// Never a secret.
	Fields map[string]any
	// Err is the underlying cause, logged but never shown.
	Err error
	// Page, when set, is the page a browser gets instead of the plain error
	// page (one that offers a way on, say); the status, logging and code are
	// the same.
	Page templ.Component

	// row is the table's row the answer came from (nil: a handler's own).
	row *row
}

// Mint reports whether the answer asks the MCP server to send the user
// through a connect link (not_connected, consent_required,
// reauthorization_required, insufficient_scope): a route that can adds
// what it needs to mint that link.
func (e *Error) Mint() bool { return e.row != nil && e.row.mint }

// NamesConnection reports whether a handler that knows the connection the
// answer is about names it (account.id), so that the connect link asks
// for that account (reauthorization_required, insufficient_scope).
func (e *Error) NamesConnection() bool { return e.row != nil && e.row.names }

// ClientRefused reports whether the answer refuses the client's own
// credentials (its key, assertion or DPoP proof), not the user's token.
func (e *Error) ClientRefused() bool { return e.row != nil && e.row.client }

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Description, e.Err)
	}
	return e.Code + ": " + e.Description
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given status, code and description.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Description: fmt.Sprintf(format, args...)}
}

// Envelope is the JSON error body of every API error.
type Envelope struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
	RequestID   string `json:"request_id,omitempty"`
}

// internalError is the public face of any unexpected error.
var internalError = &Error{Status: http.StatusInternalServerError, Code: "internal_error",
	Description: "internal server error"}

// databaseUnavailable is the public face of a database that cannot serve
// now (db.Unavailable): unreachable, restarting, out of connections or too
// slow for the request's deadline. Nothing was half-written: a statement
// that failed rolled its transaction back.
var databaseUnavailable = &Error{Status: http.StatusServiceUnavailable, Code: "database_unavailable",
	Description: "the database is temporarily unavailable; retry shortly",
	Header:      http.Header{"Retry-After": {"2"}}}

// asError extracts the *Error a handler meant, or the generic internal error.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if e, ok := fromTable(err); ok {
		return e
	}
	if errors.Is(err, context.Canceled) {
		// The client went away; 499 is nginx's code for it and is never seen by anyone.
		return &Error{Status: 499, Code: "client_closed_request", Description: "client closed request"}
	}
	if db.Unavailable(err) {
		return databaseUnavailable
	}
	return internalError
}

// AsOAuthError is err as an OAuth token endpoint answers it (RFC 6749
// §5.2): the table's answer, with its row's OAuth code when the /v1 code
// means nothing to an OAuth client (the /v1 code kept in connectd_error);
// status 400 — 401 for a refused client, with the Basic challenge when the
// client authenticated with Basic (basic), and no other challenge — while
// 429 and 5xx stay as on /v1.
func AsOAuthError(err error, basic bool) *Error {
	e := asError(err)
	o := *e
	o.Header = e.Header.Clone()
	o.Fields = maps.Clone(e.Fields)
	if o.Err == nil {
		o.Err = err
	}
	if e.row != nil && e.row.oauth != "" {
		o.Code = e.row.oauth
		if o.Fields == nil {
			o.Fields = map[string]any{}
		}
		o.Fields["connectd_error"] = e.Code
	}
	switch {
	case e.ClientRefused():
		o.Status = http.StatusUnauthorized
		o.Header.Del("Www-Authenticate")
		if basic {
			if o.Header == nil {
				o.Header = http.Header{}
			}
			o.Header.Set("Www-Authenticate", `Basic realm="connectd"`)
		}
	case o.Status < 500 && o.Status != http.StatusTooManyRequests && o.Status != 499:
		o.Status = http.StatusBadRequest
		o.Header.Del("Www-Authenticate")
	}
	return &o
}

// APIFunc is an API handler: it writes a response and returns nil, or returns an
// error that API turns into the JSON error envelope.
type APIFunc func(w http.ResponseWriter, r *http.Request) error

// API adapts an APIFunc to http.Handler.
func API(logger *slog.Logger, h APIFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			WriteAPIError(w, r, logger, err)
		}
	})
}

// WriteAPIError logs err and writes its JSON error envelope.
func WriteAPIError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	e := asError(err)
	logError(r, logger, e, err)
	for k, vs := range e.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	env := Envelope{Error: e.Code, Description: e.Description, RequestID: RequestID(r.Context())}
	if len(e.Fields) == 0 {
		WriteJSON(w, e.Status, env)
		return
	}
	body := make(map[string]any, len(e.Fields)+3)
	for k, v := range e.Fields {
		body[k] = v
	}
	body["error"] = env.Error
	if env.Description != "" {
		body["error_description"] = env.Description
	}
	if env.RequestID != "" {
		body["request_id"] = env.RequestID
	}
	WriteJSON(w, e.Status, body)
}

func logError(r *http.Request, logger *slog.Logger, e *Error, err error) {
	ctx := r.Context()
	switch {
	case e == databaseUnavailable:
		// An outage fails every request at once: one line a second says
		// so, with how many were answered alike since the last one.
		if n, ok := outageLog.due(time.Now()); ok {
			logger.WarnContext(ctx, "database unavailable; answering 503", slog.Any("error", err),
				slog.Int64("answered_alike_since_last_line", n))
		}
	case e.Status >= 500:
		logger.ErrorContext(ctx, "request failed", slog.String("code", e.Code), slog.Any("error", err))
	case e.Status == 499:
	default:
		logger.InfoContext(ctx, "request refused", slog.String("code", e.Code), slog.Int("status", e.Status),
			slog.Any("error", err))
	}
}

// outageLog lets one "database unavailable" line a second through.
var outageLog = &every{period: time.Second}

// every lets an event through at most once a period, counting the others.
type every struct {
	period time.Duration
	mu     sync.Mutex
	last   time.Time
	held   int64
}

func (e *every) due(now time.Time) (int64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if now.Sub(e.last) < e.period {
		e.held++
		return 0, false
	}
	n := e.held
	e.last, e.held = now, 0
	return n, true
}

// WriteJSON writes v as a JSON response with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":"internal_error","error_description":"internal server error"}`)
	}
	h := w.Header()
	setHeader(h, "Content-Type", "application/json; charset=utf-8")
	setHeader(h, "Cache-Control", "no-store") // on /v1 SecurityHeaders set these two already
	setHeader(h, "X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	// Two writes into the response's buffer rather than append(body, '\n'),
	// which copies the body into a new array (json.Marshal's has no room).
	_, _ = w.Write(body)
	_, _ = w.Write(newline)
}

var newline = []byte{'\n'}

// setHeader is h.Set(key, value) for a canonical key that leaves an entry
// already holding exactly value as it is, instead of a fresh slice for the
// same value.
func setHeader(h http.Header, key, value string) {
	if v := h[key]; len(v) == 1 && v[0] == value {
		return
	}
	h[key] = []string{value}
}

// WantsPage reports whether the answer to r should be the HTML error page
// rather than the JSON envelope: a browser asking for HTML, on a route not
// registered as an API (whose callers always get JSON).
func WantsPage(r *http.Request) bool {
	kind, _ := RouteOf(r)
	return kind != KindAPI && strings.Contains(r.Header.Get("Accept"), "text/html")
}

// WriteError writes err as the error page or the JSON envelope, whichever
// WantsPage chooses. Middleware that refuses a request before any handler ran
// (cross-origin protection, rate limits, unrouted paths) answers with it.
func WriteError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	if WantsPage(r) {
		WritePageError(w, r, logger, err)
		return
	}
	WriteAPIError(w, r, logger, err)
}
