package web

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
)

// Recover turns a handler panic into a logged error and a 500 without internals:
// the JSON envelope, or the error page for a browser that asked for HTML. The
// stack goes to the log only. http.ErrAbortHandler is re-raised, as net/http
// expects.
func Recover(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				logger.ErrorContext(r.Context(), "panic",
					slog.String("panic", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
				err := fmt.Errorf("panic serving %s", r.URL.Path)
				WriteError(w, r, discard, err)
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// discard avoids logging a recovered panic twice.
var discard = slog.New(slog.DiscardHandler)

// Chain applies middleware so that the first listed is the outermost.
func Chain(h http.Handler, mw ...func(http.Handler) http.Handler) http.Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}
