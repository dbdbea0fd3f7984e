// Package identity holds the one type that names a connectd user, shared by
// every package that stores or decides something for a user (vault, consent,
// lifecycle, webhook, connect, admin) without any of them owning it. It is a
// leaf: it imports nothing of connectd's.
package identity

// User names a user as the login provider asserted them: the subject is
// unique only within its issuer. Both are compared byte for byte; the rules
// for what text they may hold are mcpauth's (identity.md).
type User struct {
	Issuer  string
	Subject string
}
