// Package web owns the HTTP plumbing every connectd handler shares: request ids,
// the slog handler that stamps them on log lines, access logging, panic recovery,
// the adapter that turns a handler's error into the JSON error envelope (API) or
// the error page (browser), strict JSON decoding, and the protections the public
// listener puts around every route (Public): security headers and CSP, Go's
// cross-origin protection for state-changing requests, and rate limits.
//
// It knows nothing about OAuth, users or storage beyond the route classes of
// the public listener (which budget a path draws from), and it never writes a
// request's secrets (headers, bodies, query strings) into a log line or a
// response.
package web
