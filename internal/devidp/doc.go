// Package devidp is a development OpenID Connect provider for tests and
// `make demo`: discovery, JWKS, an authorize endpoint with a user picker (demo
// users alice, bob and admin, no password), and a token endpoint that verifies PKCE
// S256 and issues ID tokens and RFC 9068 access tokens (typ at+jwt) for a
// chosen audience (RFC 8707 resource). Its ES256 keys live in memory and
// rotate on demand; tests mint tokens directly with Sign and AccessToken.
//
// It authenticates nobody: whoever reaches it can become any demo user. It
// must therefore never be reachable in production: the connectd binary does
// not link it (cmd/connectd's TestNoTestCodeLinked); only the demo program
// (cmd/connectd-demo) and tests serve it, on listeners of their own. It holds
// no state beyond the process.
package devidp
