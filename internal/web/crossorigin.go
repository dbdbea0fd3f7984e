package web

import (
	"fmt"
	"log/slog"
	"net/http"
)

// CrossOrigin refuses state-changing browser requests (POST, PUT, PATCH,
// DELETE) that another origin caused, with Go's http.CrossOriginProtection:
// the browser's Sec-Fetch-Site header, or else Origin compared with Host.
// Requests carrying neither header (MCP servers calling /v1, back-channel
// calls) are not browser requests and pass. It comes on top of, not instead
// of, the per-session CSRF tokens of every form: either one alone stops a
// forged form post.
//
// trustedOrigins are origins (scheme://host[:port]) whose requests are
// same-site even though their Host differs, e.g. connectd's public origin
// behind a proxy that rewrites Host. A refusal is a 403
// "cross_origin_request", as a page or a JSON envelope.
func CrossOrigin(logger *slog.Logger, trustedOrigins ...string) (func(http.Handler) http.Handler, error) {
	cop := http.NewCrossOriginProtection()
	for _, o := range trustedOrigins {
		if err := cop.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("web: trusted origin: %w", err)
		}
	}
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, r, logger, &Error{Status: http.StatusForbidden, Code: "cross_origin_request",
			Description: "This request came from another site and was refused. Nothing was changed.",
			Err:         fmt.Errorf("cross-origin %s refused (Sec-Fetch-Site %q)", r.Method, r.Header.Get("Sec-Fetch-Site"))})
	}))
	return cop.Handler, nil
}
