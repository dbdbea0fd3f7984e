// Package web owns the HTTP plumbing every connectd handler shares: request ids,
// the slog handler that stamps them on log lines, access logging, panic recovery,
// the adapter that turns a handler's error into the JSON error envelope (API) or
// the error page (browser), and JSON encoding. It knows nothing about OAuth,
// users or storage, and it never writes a request's secrets (headers, bodies,
// query strings) into a log line or a response.
package web
