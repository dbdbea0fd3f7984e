// Package e2e holds the end-to-end tests of the whole product: connectd (the
// real connect.Server on a real Postgres), the development identity provider,
// a third-party OAuth provider (providertest) and the example MCP server
// (examples/mcp-server), all over HTTP, driven by the official Go MCP SDK's
// client over streamable HTTP and by a cookie-jar browser. There is no code
// here besides the tests.
package e2e
