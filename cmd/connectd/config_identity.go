package main

// IdentityConfig configures who connectd trusts: MCP authorization servers
// (issuers) whose user tokens it verifies and where browsers log in, sessions,
// and MCP-server client keys. Filled by loadIdentity.
type IdentityConfig struct{}

// loadIdentity reads the identity variables (see docs/configuration.md).
func (c *Config) loadIdentity(e *env) {}
