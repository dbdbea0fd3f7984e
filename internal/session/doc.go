// Package session owns connectd's browser cookies: the session cookie (who
// is signed in), CSRF tokens bound to the session, and the short-lived
// state-binding cookie that ties an OAuth/OIDC redirect to the browser that
// started it.
//
// Every cookie is signed (HMAC-SHA256) and encrypted (AES-256) with
// gorilla/securecookie under a keyring whose first key signs and whose other
// keys are still read, so keys rotate without logging anyone out. Every cookie
// is __Host- prefixed, Secure, HttpOnly, SameSite=Lax, Path=/ and has no
// Domain. The package must never log or display a cookie value, a session id
// or a key; it knows nothing about tokens, issuers' protocols or storage.
package session
