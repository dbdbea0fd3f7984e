// Package session owns connectd's browser cookies: the session cookie (who
// is signed in), CSRF tokens bound to the session, and the short-lived
// state-binding cookie that ties an OAuth/OIDC redirect to the browser that
// started it. It also owns the browser_sessions table, so that a session can
// end on the server: a cookie signs in only while its session's row is live,
// and signing out, signing in again in the same browser or an admin's "end
// sessions" ends the row on every replica within a second (see live.go).
//
// Every cookie is signed (HMAC-SHA256) and encrypted (AES-256) with
// gorilla/securecookie under a keyring whose first key signs and whose other
// keys are still read, so keys rotate without logging anyone out. Every cookie
// is __Host- prefixed, Secure, HttpOnly, SameSite=Lax, Path=/ and has no
// Domain. The package must never log or display a cookie value, a session id
// or a key, and never stores a session id: the table holds its SHA-256. It
// knows nothing about tokens or issuers' protocols.
package session
