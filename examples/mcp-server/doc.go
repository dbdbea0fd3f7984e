// Package mcpserver is a complete example MCP server that gets its users'
// third-party credentials through connectd. It is built on the official Go
// SDK (github.com/modelcontextprotocol/go-sdk) and the public client package,
// and imports nothing of connectd's internals. `make demo` (cmd/connectd-demo) runs it, and
// the end-to-end tests drive it with the SDK's client.
//
// It exposes list_files, which needs the user's account at a file service
// (the demo's "Demo Files" OAuth provider), and open_issue, a proxied POST
// (Config.IssuesPath) that the operator may make the user approve first: on
// connectd's user_approval_required it hands the approval to the MCP client
// (client.RequireApproval, in the session's protocol shape, as below for a
// connect link), sends the same POST again once the user allowed it, and
// answers a denial with client.DeniedResult's text (issue.go). By default
// (CredentialProxy) the tool calls the file service through connectd's
// provider API proxy with client.ProviderClient, the *http.Client a
// provider's own Go SDK would be given: connectd attaches the user's
// credential, so this server never holds it, and it works for a client
// registered proxy-only (connectd clients create --proxy-only). With
// CredentialToken (-credential token) it reads the user's token
// (client.AccountToken) and calls the file service itself. Both are decided
// by connectd alike, so the rest is the same in either mode: when connectd
// has no credential the tool may use (not_connected, consent_required,
// insufficient_scope, reauthorization_required), the tool sends the user to
// connectd in the shape the session's protocol version calls for:
//
//   - 2026-07-28 (SEP-2322 multi round-trip requests; first-class in the
//     SDK): the call answers an InputRequiredResult — inputRequests holding
//     connectd's URL-mode elicitation/create request, requestState holding
//     connectd's sealed request_state. The client opens the URL and retries
//     the call with inputResponses and the echoed requestState; the server
//     resolves it at connectd (client.Resume), waits while the user finishes
//     (bounded by Config.RetryHold, 30 s by default: well inside the 60 s
//     the TypeScript SDK's clients wait for an answer), and lists the files —
//     or hands back a fresh InputRequiredResult with the same link if the
//     user is still busy. The request_state is bound to the tool call by a
//     request digest. A state that was already resolved (its answer lost
//     to a client that gave up) starts the call over: the same link, or the
//     files if the user has finished meanwhile. The result carries no
//     "content" (the SDK would write null there).
//   - 2025-11-25 (URL-mode elicitation): with LegacyElicit (the default) the
//     call sends elicitation/create (mode "url", with elicitationId) on the
//     session, long-polls connectd until the user is done, sends
//     notifications/elicitation/complete, and finishes with the files. With
//     LegacyError it answers URLElicitationRequiredError (-32042, connectd's
//     data.elicitations) and sends notifications/elicitation/complete when
//     connectd reports completion; the client then retries.
//   - Older versions, or a client that did not declare elicitation mode
//     "url": the fallback (client.Answer.Fallback), a tool error result that
//     gives the user the connect link in plain words and asks them to open
//     it and try again — never an elicitation the client did not declare
//     (servers must not send a mode the client does not support). The next
//     call finds the connection, or is held like a retry while the link is
//     pending.
//
// # Several accounts at one provider
//
// A user may have several file-service accounts this server is approved
// for (work and personal). connectd then answers the token read or the
// proxied call with account_required and the accounts
// (client.ErrAccountRequired), and the tool asks the user which: a form-mode elicitation of the accounts
// (client.AccountChoice.Form) when the MCP client declared form mode — sent
// as an input request, which 2026-07-28 clients answer with their retry and
// the SDK turns into elicitation/create for older ones — else a tool error
// that lists them with their ids and asks to call list_files again with
// its account argument (client.AccountChoice.Fallback). The token is then
// read, or the call proxied (client.WithAccount), for that account. When
// that account needs reconnecting, the link is minted for it
// (client.MintRequest.Account), and on 2026-07-28 its input key carries the
// id into the retry (client.ConnectKey). With LegacyError the retry is a new
// call, which asks again. A credential the file service refuses (in token
// mode its 401; through the proxy provider_unauthorized, once connectd's
// refresh did not help) unlinks only the account it was of.
//
// The SDK serves 2026-07-28 only on a stateless streamable HTTP handler and
// 2025-11-25's server-to-client requests only on a stateful one, so Handler
// runs both over the same mcp.Server and routes each HTTP request by its
// Mcp-Protocol-Version header.
//
// Callers authenticate with an MCP access token (RFC 9068 JWT) from
// Config.Issuer whose audience is Config.Resource — verified here (signature
// via the issuer's JWKS, alg allow-list, typ at+jwt, iss, aud, exp) before
// any tool runs — and forwarded unchanged to connectd as X-User-Token with
// this server's client key. connectd verifies it again. In token mode the
// provider token goes only to the file service: never into a result, an
// error or a log.
package mcpserver
