// Package client is the Go client of connectd's /v1 API, for MCP servers that
// need their users' third-party credentials (GitHub, Google, Slack, …) without
// ever handling an OAuth flow, a refresh token or an API-key form themselves.
//
// An MCP server holds one Client (its connectd URL and client key) and, for
// each tool call, forwards the caller's MCP access token — the bare JWT it
// received and verified for itself — as the user token:
//
//	cd, err := client.New(client.Config{BaseURL: "https://connect.example.com", Key: os.Getenv("CONNECTD_CLIENT_KEY")})
//	...
//	tok, err := cd.Token(ctx, userToken, "github", "repo")
//	switch {
//	case err == nil:
//		// call the GitHub API with tok.AccessToken; never return it to the MCP client
//	case client.NeedsConnection(err):
//		// not connected, no consent for this MCP server, missing scopes, or a dead grant
//		peer := client.Peer{ProtocolVersion: protocolVersion, URLElicitation: declaredURLMode}
//		ans, err := cd.RequireConnection(ctx, userToken, peer, client.MintRequest{
//			Provider: "github", Scopes: []string{"repo"}, Message: "Connect GitHub to list your repositories."})
//		...
//		switch {
//		case ans.Ready: // a retried request, and the user finished while it waited: Token again
//		case ans.Fallback != nil: // the client has no URL mode
//			// answer the tools/call with ans.Fallback: the link, in plain words, and "try again"
//		case ans.Generation == client.GenerationInputRequired: // 2026-07-28
//			// answer the tools/call with ans.Result (InputRequiredResult: inputRequests + requestState);
//			// when the MCP client retries with inputResponses and requestState:
//			st, err := cd.Resume(ctx, userToken, requestState, digest, 30*time.Second)
//			// st.Status completed → Token again; pending → a new InputRequiredResult with st.RequestState
//		case ans.Generation == client.GenerationURLElicitation: // 2025-11-25
//			// send elicitation/create with ans.ElicitRequest (or answer with ans.Error, -32042), then
//			st, err := cd.Wait(ctx, userToken, ans.Elicitation.ID)
//			// completed → send notifications/elicitation/complete {elicitationId} and Token again
//		}
//	default:
//		// errors.As(err, &apiErr) for Status, Code and Description
//	}
//
// Errors from connectd are *APIError values that match the package's
// sentinels with errors.Is (ErrNotConnected, ErrConsentRequired,
// ErrInsufficientScope — with APIError.MissingScopes —,
// ErrReauthorizationRequired, ErrAccountRequired — with APIError.Accounts —,
// the ErrRequestState family, ErrUserToken, ErrInvalidClient,
// ErrUnavailable, …).
//
// # Several accounts at one provider
//
// A user may connect several accounts at one provider (work and personal
// GitHub). Each connection has a stable id (Account.ID, Connection.ID), the
// provider's display name and the user's optional label. Token reads the one
// this MCP server is approved for; approved for several, it fails with
// ErrAccountRequired, whose APIError.Accounts lists them. Put the choice to
// the user — it is no secret — with ChooseAccount: AccountChoice.Form is a
// form-mode elicitation of the accounts (Peer.FormElicitation), and
// AccountChoice.Fallback a tool result that lists them and asks for the
// tool's account argument. Then read that one with AccountToken(ctx,
// userToken, provider, id, scopes...). Token.Account says which account a
// token is of. When a named account needs reconnecting
// (NeedsConnection), mint with MintRequest.Account set to its id, so the
// user reauthorizes that one (AccountNew connects another; ConnectKey keeps
// the id in a 2026-07-28 retry's input key, KeyAccount reads it back).
// UnlinkAccount unlinks one by id, or every one with AccountAll. A client
// of one account at a time needs none of this: Token, Unlink and Mint work
// as before.
//
// The connect URL carries only an opaque id: it is safe to show to the MCP
// client, and only the user the elicitation was minted for can complete it.
// The credentials themselves reach only the MCP server, through Token — or
// never leave connectd, with ProviderClient, whose calls connectd makes with
// them. See docs/integration.md for a full guide (and when to pick which) and
// examples/mcp-server for a complete MCP server built on the official Go SDK,
// which uses ProviderClient by default.
//
// # Requests the user approves first
//
// An operator may make some proxied calls ones the user approves, request by
// request (a request rule that asks). connectd then answers the call 403
// user_approval_required without calling the provider: an *APIError matching
// ErrApprovalRequired, whose approval elicitation ApprovalRequired returns
// (through *url.Error and SDK wrapping). RequireApproval shapes it for the MCP
// client as RequireConnection shapes a connect link (the 2026-07-28 input key
// is ApprovalKey, whose approval id KeyApproval reads back on the retry;
// Answer.Fallback for a client without URL mode); Wait or Status on the id
// gives the decision, and ApprovalOutcome says what it means: nil → send exactly the
// same request again (it passes once); ErrApprovalDenied → answer
// DeniedResult and do not retry; ErrApprovalDismissed, ErrApprovalExpired →
// a new call asks again.
//
// VerifyWebhook checks the signed webhooks connectd sends to an MCP server's
// endpoints (elicitations that ended, connections created, changed or
// revoked, approvals withdrawn; docs/webhooks.md).
//
// This package must stay importable from outside the connectd module: it
// imports nothing but the standard library, and never logs or prints a key or
// token.
//
// # Calling the provider through connectd
//
// Instead of reading the token, an MCP server can let the credential stay
// in connectd: ProviderClient returns an *http.Client for a provider's own
// Go SDK whose every request goes to connectd's provider API proxy (GET,
// HEAD, POST, PUT, PATCH, DELETE /v1/proxy/{provider}/{path}, docs/api.md),
// which attaches the user's credential and forwards the call to the
// provider's API:
//
//	gh := github.NewClient(cd.ProviderClient(userToken, "github"))
//	repos, _, err := gh.Repositories.ListByAuthenticatedUser(ctx, nil)
//	if client.NeedsConnection(err) { /* RequireConnection, as for Token */ }
//
// Whatever host the SDK puts in the URL, the request's path and query are
// the API path below connectd's API base for the provider: GET
// https://api.github.com/user/repos?per_page=10 is sent as GET
// {connectd}/v1/proxy/github/user/repos?per_page=10 (the path escaped as the
// request escapes it). An SDK
// whose base URL has a path connectd's API base already has (GitLab's
// https://gitlab.com/api/v4) takes WithPathPrefix("/api/v4"): the prefix is
// stripped, and a path outside it fails unsent. Another host of the
// provider (GitHub's uploads.github.com) is not reachable: every request
// goes to the one API base. The SDK's Authorization is replaced by the
// client key; X-User-Token, Connectd-Account (WithAccount, as AccountToken)
// and a fresh X-Request-Id are set; the method, the other headers and the
// body cross, streamed both ways. A redirect is followed only to the first
// request's host (through connectd again); any other comes back to the SDK.
// ProviderTransport is the bare http.RoundTripper, which follows none.
// connectd refuses another method (405 method_not_allowed), a path that is
// not a plain path below the API base (400 invalid_proxy_path) and a method
// override or URL rewrite (400 proxy_override_refused): each is an
// *APIError matching ErrInvalidRequest.
//
// A refusal by connectd itself (not connected, no consent, the provider
// refused the credential even refreshed, rate limited, …) comes back as an
// *APIError from the round trip, which SDKs return wrapped: errors.Is and
// errors.As work through them. It is told apart from the provider's own JSON
// errors by the envelope's request_id, the request's X-Request-Id, which
// connectd never forwards to the provider; every other answer is the
// provider's and reaches the SDK untouched (an answer to HEAD, without a
// body, cannot be told apart and does too).
package client
