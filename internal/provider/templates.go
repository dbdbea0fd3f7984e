package provider

import (
	"maps"
	"slices"
	"time"
)

// builtins are the built-in templates, by name. A providers-file entry names
// one with "template" and adds client credentials (oauth2); any field can be
// overridden. Each template says where its facts come from (Docs, a page of
// the provider's own documentation) and marks what that page did not settle
// as "unverified". docs/providers.md lists them all (generated from this
// table by TestProvidersDoc).
//
// The comment above each template covers, in this order where they apply:
// endpoints; per-customer URL parameters; scopes (separator, defaults);
// extra authorize parameters, and those that let the user choose another
// account (SelectAccountParams); client authentication; token-response quirks;
// refresh behaviour (rotation, lifetime, idle lapse, narrowing); PKCE; RFC
// 9207 iss; how the provider account is identified; and the API base
// connectd's proxy forwards to (APIBaseURL, with its source, and APIAuth
// where the API does not take a Bearer token), or why there is none.
var builtins = map[string]Spec{
	// Endpoints: github.com/login/oauth/{authorize,access_token}; userinfo
	// GET https://api.github.com/user. prompt=select_account forces the
	// account picker ("Authorizing OAuth apps", the prompt parameter; GitHub
	// changelog 2024-06-07), which otherwise shows only with several
	// accounts signed in. OAuth-app tokens do not expire and
	// come without a refresh token (GitHub Apps' user tokens expire after 8
	// h, with a refresh token good for 6 months: override for those). The
	// token endpoint answers form-encoded unless asked for JSON, reports
	// errors with HTTP 200 and its own codes, and lists granted scopes
	// comma-separated. PKCE: supported (2025). No revocation endpoint of
	// RFC 7009 shape (the API's DELETE /applications/{client_id}/grant).
	// Account: not in the token answer (GET /user: id, login).
	// API base: https://api.github.com, the REST API's root endpoint
	// (https://docs.github.com/en/rest/using-the-rest-api/getting-started-with-the-rest-api).
	// Rate limit: 5,000 requests an hour per user token (primary rate
	// limit; X-RateLimit-Remaining/-Reset on every answer, read as well).
	"github": {
		Kind: KindOAuth2, DisplayName: "GitHub",
		APIBaseURL: "https://api.github.com",
		RateLimits: []RateLimit{{Scope: PerUser, Requests: 5000, Per: time.Hour,
			Source: "https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api"}},
		AccountURL: "https://api.github.com/user", AccountURLIDField: "id", AccountURLLabelField: "login",
		Docs:         "https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps",
		AuthorizeURL: "https://github.com/login/oauth/authorize",
		TokenURL:     "https://github.com/login/oauth/access_token",
		AcceptJSON:   true, AuthStyle: AuthParams, ScopeSeparator: " ",
		SelectAccountParams: map[string]string{"prompt": "select_account"},
		InvalidGrantErrors:  []string{"invalid_grant", "bad_verification_code", "bad_refresh_token"},
		PKCESupport:         "supported",
	},
	// Endpoints: {base_url}/oauth/{authorize,token,revoke,userinfo}
	// (Doorkeeper). base_url: gitlab.com, or a self-managed instance: the one
	// template that takes any https host (CheckInstanceURL without
	// patterns: a host name, a port and a path prefix allowed, no user info,
	// query or fragment); it is still reached only through the egress guard.
	// Scopes space-separated. Access tokens expire after 2 h; every refresh
	// returns a new refresh token (rotating). PKCE supported. Account: GET
	// {base_url}/oauth/userinfo (OIDC sub) or /api/v4/user.
	// API base: {base_url}/api/v4, the REST API's prefix (https://docs.gitlab.com/api/rest/).
	"gitlab": {
		Kind: KindOAuth2, DisplayName: "GitLab", baseURL: "https://gitlab.com",
		APIBaseURL: "{base_url}/api/v4",
		AccountURL: "{base_url}/api/v4/user", AccountURLIDField: "id", AccountURLLabelField: "username",
		Docs:          "https://docs.gitlab.com/api/oauth2/",
		Issuer:        "{base_url}",
		AuthorizeURL:  "{base_url}/oauth/authorize",
		TokenURL:      "{base_url}/oauth/token",
		RevocationURL: "{base_url}/oauth/revoke", Revocation: RevokeRFC7009,
		AuthStyle: AuthParams, ScopeSeparator: " ",
		RefreshRotates: true, PKCESupport: "supported",
	},
	// Endpoints: bitbucket.org/site/oauth2/{authorize,access_token}; the
	// documented exchange uses HTTP Basic (curl -u client_id:secret).
	// Scopes are fixed on the consumer; a scope parameter is optional.
	// Access tokens expire after 2 h and come with a refresh token.
	// Unverified: whether refresh tokens rotate or lapse, and PKCE. Account:
	// GET https://api.bitbucket.org/2.0/user (uuid, display_name).
	// API base: https://api.bitbucket.org/2.0, where every Bitbucket Cloud request
	// starts (https://developer.atlassian.com/cloud/bitbucket/rest/intro/).
	"bitbucket": {
		Kind: KindOAuth2, DisplayName: "Bitbucket",
		APIBaseURL: "https://api.bitbucket.org/2.0",
		AccountURL: "https://api.bitbucket.org/2.0/user", AccountURLIDField: "uuid", AccountURLLabelField: "display_name",
		Docs:         "https://developer.atlassian.com/cloud/bitbucket/oauth-2/",
		AuthorizeURL: "https://bitbucket.org/site/oauth2/authorize",
		TokenURL:     "https://bitbucket.org/site/oauth2/access_token",
		AuthStyle:    AuthBasic, ScopeSeparator: " ",
		PKCESupport: "unverified",
	},
	// Atlassian Cloud (Jira, Confluence) OAuth 2.0 (3LO): auth.atlassian.com
	// /authorize and /oauth/token; audience=api.atlassian.com and
	// prompt=consent are required; offline_access for a refresh token.
	// Refresh tokens rotate (the old one stops working). Idle lapse: 90 days
	// of inactivity (unverified here; absolute lifetime 365 days).
	// Account: the site (cloud id) comes from GET
	// https://api.atlassian.com/oauth/token/accessible-resources; the user
	// from GET https://api.atlassian.com/me. PKCE unverified. API base:
	// https://api.atlassian.com, where OAuth 2.0 (3LO) requests go (a site's
	// API under /ex/jira/{cloudid}/…, /ex/confluence/{cloudid}/…:
	// https://developer.atlassian.com/cloud/oauth/getting-started/making-calls-to-api/).
	"atlassian": atlassian("Atlassian"),
	"jira":      atlassian("Jira", "read:jira-work", "read:jira-user"),
	"confluence": atlassian("Confluence", "read:confluence-content.all",
		"read:confluence-space.summary"),
	// Endpoints: https://www.figma.com/oauth (authorize),
	// https://api.figma.com/v1/oauth/token. Client authentication: HTTP
	// Basic. Scopes comma-separated (unverified: space is also documented
	// for newer scopes). Access tokens expire (expires_in); the answer
	// carries user_id_string. Unverified: Figma documents refresh at
	// /v1/oauth/refresh on older pages; connectd refreshes at token_url,
	// override token_url if your app uses the older endpoint. PKCE: unverified.
	// API base: https://api.figma.com (/v1/…), an OAuth token as a Bearer token
	// (https://developers.figma.com/docs/rest-api/authentication/).
	"figma": {
		Kind: KindOAuth2, DisplayName: "Figma",
		APIBaseURL:   "https://api.figma.com",
		Docs:         "https://developers.figma.com/docs/rest-api/authentication/",
		AuthorizeURL: "https://www.figma.com/oauth",
		TokenURL:     "https://api.figma.com/v1/oauth/token",
		AuthStyle:    AuthBasic, ScopeSeparator: ",",
		Scopes:         []string{"file_content:read"},
		AccountIDField: "user_id_string",
		PKCESupport:    "unverified",
	},
	// Google (OAuth 2.0 for web server apps): accounts.google.com authorize,
	// oauth2.googleapis.com token and revoke; userinfo
	// https://openidconnect.googleapis.com/v1/userinfo. Scopes space-
	// separated (full URLs). Without access_type=offline and prompt=consent
	// no refresh token is issued (or only at the very first consent);
	// include_granted_scopes makes a new grant cover earlier ones. Another
	// account: "prompt" is a space-delimited list whose select_account asks
	// the user to pick an account (the "prompt" parameter of the page
	// above), sent as "consent select_account" so that the consent, and
	// with it the refresh token, is kept. Refresh
	// tokens do not rotate and lapse after six months unused (7 days for
	// apps in "testing"). A refresh with "scope" returns an access token for
	// that subset of the grant ("Refreshing an access token"), so narrowing
	// is on. PKCE supported; issuer https://accounts.google.com, iss sent in
	// authorization responses (RFC 9207 support is not promised, so it is
	// checked when present). Account: OIDC sub (scope openid). API base:
	// each product's service endpoint as its REST reference names it
	// ("Service endpoint", all URIs relative to it): Gmail
	// https://gmail.googleapis.com
	// (https://developers.google.com/workspace/gmail/api/reference/rest),
	// Calendar https://www.googleapis.com/calendar/v3
	// (https://developers.google.com/workspace/calendar/api/v3/reference),
	// Drive https://www.googleapis.com/drive/v3
	// (https://developers.google.com/workspace/drive/api/reference/rest/v3);
	// the generic template https://www.googleapis.com, the endpoint those
	// and many other Google APIs share.
	// Rate limits (per-user quotas): Drive 12,000 queries a minute per user
	// (https://developers.google.com/workspace/drive/api/guides/limits);
	// Gmail 15,000 quota units a minute per user, counted as 3,000 calls
	// of 5 units (messages.get; heavier methods meet Google's own 429)
	// (https://developers.google.com/workspace/gmail/api/reference/quota);
	// Calendar 600 queries a minute per user (unverified: the default of
	// "per minute per project per user" in the Cloud console)
	// (https://developers.google.com/workspace/calendar/api/guides/quota).
	// The generic template has none (each API has its own).
	"google": google("Google", "https://www.googleapis.com"),
	"google-drive": withLimits(google("Google Drive", "https://www.googleapis.com/drive/v3", "https://www.googleapis.com/auth/drive.file"),
		RateLimit{Scope: PerUser, Requests: 12000, Per: time.Minute, Source: "https://developers.google.com/workspace/drive/api/guides/limits"}),
	"gmail": withLimits(google("Gmail", "https://gmail.googleapis.com", "https://www.googleapis.com/auth/gmail.readonly"),
		RateLimit{Scope: PerUser, Requests: 3000, Per: time.Minute, Source: "https://developers.google.com/workspace/gmail/api/reference/quota"}),
	"google-calendar": withLimits(google("Google Calendar", "https://www.googleapis.com/calendar/v3", "https://www.googleapis.com/auth/calendar.readonly"),
		RateLimit{Scope: PerUser, Requests: 600, Per: time.Minute, Source: "https://developers.google.com/workspace/calendar/api/guides/quota"}),
	// Microsoft identity platform v2.0 (Entra ID, Graph):
	// login.microsoftonline.com/{tenant}/oauth2/v2.0/{authorize,token};
	// tenant: a GUID, a verified domain, or common / organizations /
	// consumers (validTenant: hostname labels only). offline_access for a
	// refresh token. Another account: prompt=select_account "interrupts
	// single sign-on providing account selection experience" (the prompt
	// parameter of the authorization request, page above). Refresh tokens
	// replace themselves on every use
	// (rotating), last 90 days (24 h for SPA redirect URIs) and lapse after
	// 90 days inactive (AADSTS700082). The refresh-token grant takes "scope"
	// and returns a token for that subset, so narrowing is on. PKCE
	// supported. Account: OIDC sub / GET https://graph.microsoft.com/v1.0/me.
	// No RFC 7009 revocation.
	// API base: https://graph.microsoft.com, Microsoft Graph ({version}/{resource}:
	// https://learn.microsoft.com/en-us/graph/use-the-api).
	"microsoft": {
		Kind: KindOAuth2, DisplayName: "Microsoft", tenant: "common",
		APIBaseURL: "https://graph.microsoft.com",
		AccountURL: "https://graph.microsoft.com/v1.0/me", AccountURLIDField: "id", AccountURLLabelField: "userPrincipalName",
		Docs:         "https://learn.microsoft.com/en-us/entra/identity-platform/v2-oauth2-auth-code-flow",
		AuthorizeURL: "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/authorize",
		TokenURL:     "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token",
		AuthStyle:    AuthParams, ScopeSeparator: " ",
		AlwaysScopes:        []string{"offline_access"},
		SelectAccountParams: map[string]string{"prompt": "select_account"},
		NarrowOnRefresh:     true, RefreshRotates: true, RefreshIdleLifetime: days(90),
		PKCESupport: "supported",
	},
	// Slack OAuth v2, user-token flow: scopes go comma-separated in
	// user_scope; the user token comes back nested in authed_user (lifted
	// out, any bot token is not stored); errors are HTTP 200
	// {"ok":false,"error":…} with Slack's codes. Tokens expire only when the
	// app turned on token rotation (12 h, refresh token returned).
	// Revocation: auth.revoke with the token as Bearer. PKCE: Slack ignores
	// it for confidential apps (unverified). Account: authed_user.id, label
	// team.name.
	// API base: https://slack.com/api, every Web API method being
	// https://slack.com/api/METHOD_FAMILY.method, the token as a Bearer token
	// (https://docs.slack.dev/apis/web-api).
	// Rate limits: per method, per app and workspace (a user token's
	// workspace: counted per connection here), in tiers: each method at the
	// tier-3 default (50 a minute), the tier-2 search.* methods at 20 a
	// minute (the per-method tiers of other methods are Slack's 429 with
	// Retry-After to tell, which is read as well).
	"slack": {
		Kind: KindOAuth2, DisplayName: "Slack",
		APIBaseURL: "https://slack.com/api",
		RateLimits: []RateLimit{
			{Scope: PerUser, Requests: 50, Per: time.Minute, PerMethod: true, Source: "https://docs.slack.dev/apis/web-api/rate-limits"},
			{Scope: PerUser, Requests: 20, Per: time.Minute, Path: "search.", PerMethod: true, Source: "https://docs.slack.dev/apis/web-api/rate-limits"},
		},
		Docs:          "https://api.slack.com/authentication/oauth-v2",
		AuthorizeURL:  "https://slack.com/oauth/v2/authorize",
		TokenURL:      "https://slack.com/api/oauth.v2.access",
		RevocationURL: "https://slack.com/api/auth.revoke", Revocation: RevokeBearer,
		ScopeSeparator: ",", ScopeParam: "user_scope", TokenResponse: ResponseSlackUser, AuthStyle: AuthParams,
		InvalidGrantErrors: []string{"invalid_grant", "invalid_code", "code_already_used", "code_expired",
			"invalid_refresh_token", "token_revoked", "token_expired"},
		AccountIDField: "authed_user.id", AccountLabelField: "team.name",
		PKCESupport: "unverified",
	},
	// Discord: discord.com/oauth2/authorize, discord.com/api/oauth2/token
	// and /token/revoke (RFC 7009 form with client credentials). Scopes
	// space-separated; prompt=consent makes Discord ask again. Access tokens
	// expire after about 7 days (expires_in). Unverified: rotation and idle
	// lapse of refresh tokens, PKCE. Account: GET
	// https://discord.com/api/users/@me (id, username).
	// API base: https://discord.com/api (https://discord.com/developers/docs/reference#api-reference-base-url).
	"discord": {
		Kind: KindOAuth2, DisplayName: "Discord",
		APIBaseURL: "https://discord.com/api",
		AccountURL: "https://discord.com/api/users/@me", AccountURLIDField: "id", AccountURLLabelField: "username",
		Docs:          "https://discord.com/developers/docs/topics/oauth2",
		AuthorizeURL:  "https://discord.com/oauth2/authorize",
		TokenURL:      "https://discord.com/api/oauth2/token",
		RevocationURL: "https://discord.com/api/oauth2/token/revoke", Revocation: RevokeRFC7009,
		AuthStyle: AuthParams, ScopeSeparator: " ",
		Scopes:          []string{"identify"},
		AuthorizeParams: map[string]string{"prompt": "consent"},
		PKCESupport:     "unverified",
	},
	// Zoom: zoom.us/oauth/{authorize,token,revoke}; client authentication
	// HTTP Basic. Access tokens last 1 h; each refresh returns a new refresh
	// token (rotating), which lapses 90 days after issue. PKCE supported.
	// Account: GET https://api.zoom.us/v2/users/me.
	// API base: https://api.zoom.us/v2 (https://developers.zoom.us/docs/api/).
	"zoom": {
		Kind: KindOAuth2, DisplayName: "Zoom",
		APIBaseURL: "https://api.zoom.us/v2",
		AccountURL: "https://api.zoom.us/v2/users/me", AccountURLIDField: "id", AccountURLLabelField: "email",
		Docs:          "https://developers.zoom.us/docs/integrations/oauth/",
		AuthorizeURL:  "https://zoom.us/oauth/authorize",
		TokenURL:      "https://zoom.us/oauth/token",
		RevocationURL: "https://zoom.us/oauth/revoke", Revocation: RevokeRFC7009,
		AuthStyle: AuthBasic, ScopeSeparator: " ",
		RefreshRotates: true, RefreshIdleLifetime: days(90),
		PKCESupport: "supported",
	},
	// Notion: api.notion.com/v1/oauth/{authorize,token}; client credentials
	// only as HTTP Basic; no scopes (the user picks pages); owner=user. The
	// token answer has no expires_in. Account: owner.user.id, label
	// workspace_name. PKCE: unverified.
	// API base: https://api.notion.com (/v1/…; https://developers.notion.com/reference/intro);
	// every request also needs a Notion-Version header, which the caller sends.
	// Rate limit: an average of three requests a second per integration
	// (the app), 429 with Retry-After past it.
	"notion": {
		Kind: KindOAuth2, DisplayName: "Notion",
		APIBaseURL: "https://api.notion.com",
		RateLimits: []RateLimit{{Scope: PerApp, Requests: 3, Per: time.Second,
			Source: "https://developers.notion.com/reference/request-limits"}},
		Docs:         "https://developers.notion.com/docs/authorization",
		AuthorizeURL: "https://api.notion.com/v1/oauth/authorize",
		TokenURL:     "https://api.notion.com/v1/oauth/token",
		AuthStyle:    AuthBasic, ScopeSeparator: " ",
		AuthorizeParams: map[string]string{"owner": "user"},
		AccountIDField:  "owner.user.id", AccountLabelField: "workspace_name",
		PKCESupport: "unverified",
	},
	// Linear: linear.app/oauth/authorize, api.linear.app/oauth/{token,revoke}.
	// Scopes comma-separated; default read. Unverified: refresh tokens
	// (Linear added them in 2025: lifetime and rotation not confirmed).
	// PKCE supported. Account: GraphQL viewer { id name }.
	// API base: https://api.linear.app (the GraphQL endpoint /graphql, an OAuth token
	// as a Bearer token: https://linear.app/developers/graphql).
	"linear": {
		Kind: KindOAuth2, DisplayName: "Linear",
		APIBaseURL:    "https://api.linear.app",
		Docs:          "https://linear.app/developers/oauth-2-0-authentication",
		AuthorizeURL:  "https://linear.app/oauth/authorize",
		TokenURL:      "https://api.linear.app/oauth/token",
		RevocationURL: "https://api.linear.app/oauth/revoke", Revocation: RevokeRFC7009,
		AuthStyle: AuthParams, ScopeSeparator: ",",
		Scopes:      []string{"read"},
		PKCESupport: "supported",
	},
	// Dropbox: www.dropbox.com/oauth2/authorize, api.dropboxapi.com/oauth2/
	// token; token_access_type=offline for a refresh token, which is
	// long-lived and not rotated (refreshes return none). Revocation: POST
	// /2/auth/token/revoke with the token as Bearer. PKCE supported.
	// Account: account_id in the token answer.
	// API base: https://api.dropboxapi.com, the RPC endpoints
	// (https://www.dropbox.com/developers/documentation/http/documentation); the content
	// endpoints (uploads, downloads) are on content.dropboxapi.com, which this base
	// does not reach.
	"dropbox": {
		Kind: KindOAuth2, DisplayName: "Dropbox",
		APIBaseURL:    "https://api.dropboxapi.com",
		Docs:          "https://developers.dropbox.com/oauth-guide",
		AuthorizeURL:  "https://www.dropbox.com/oauth2/authorize",
		TokenURL:      "https://api.dropboxapi.com/oauth2/token",
		RevocationURL: "https://api.dropboxapi.com/2/auth/token/revoke", Revocation: RevokeBearer,
		AuthStyle: AuthParams, ScopeSeparator: " ",
		AuthorizeParams: map[string]string{"token_access_type": "offline"},
		AccountIDField:  "account_id",
		PKCESupport:     "supported",
	},
	// Box: account.box.com/api/oauth2/authorize, api.box.com/oauth2/token
	// and /revoke (client_id, client_secret, token in the form). Scopes are
	// set on the app. Access tokens last 1 h; a refresh token is single-use
	// (rotating) and valid 60 days, so it lapses after 60 days unused.
	// PKCE: unverified. Account: GET https://api.box.com/2.0/users/me.
	// API base: https://api.box.com/2.0 (https://developer.box.com/reference/);
	// uploads go to upload.box.com, which this base does not reach.
	"box": {
		Kind: KindOAuth2, DisplayName: "Box",
		APIBaseURL: "https://api.box.com/2.0",
		AccountURL: "https://api.box.com/2.0/users/me", AccountURLIDField: "id", AccountURLLabelField: "login",
		Docs:          "https://developer.box.com/guides/authentication/tokens/refresh/",
		AuthorizeURL:  "https://account.box.com/api/oauth2/authorize",
		TokenURL:      "https://api.box.com/oauth2/token",
		RevocationURL: "https://api.box.com/oauth2/revoke", Revocation: RevokeRFC7009,
		AuthStyle: AuthParams, ScopeSeparator: " ",
		RefreshRotates: true, RefreshIdleLifetime: days(60),
		PKCESupport: "unverified",
	},
	// Airtable: airtable.com/oauth2/v1/{authorize,token}; PKCE S256 is
	// required; confidential clients authenticate with HTTP Basic. Scopes
	// space-separated. Access tokens last 60 min; refresh tokens are
	// single-use and last 60 days (unverified here). Account: GET
	// https://api.airtable.com/v0/meta/whoami.
	// API base: https://api.airtable.com/v0
	// (https://airtable.com/developers/web/api/introduction).
	"airtable": {
		Kind: KindOAuth2, DisplayName: "Airtable",
		APIBaseURL: "https://api.airtable.com/v0",
		AccountURL: "https://api.airtable.com/v0/meta/whoami", AccountURLIDField: "id", AccountURLLabelField: "email",
		Docs:         "https://airtable.com/developers/web/api/oauth-reference",
		AuthorizeURL: "https://airtable.com/oauth2/v1/authorize",
		TokenURL:     "https://airtable.com/oauth2/v1/token",
		AuthStyle:    AuthBasic, ScopeSeparator: " ",
		Scopes:         []string{"data.records:read", "schema.bases:read"},
		RefreshRotates: true, RefreshIdleLifetime: days(60),
		PKCESupport: "required",
	},
	// Asana: app.asana.com/-/oauth_authorize, /-/oauth_token, /-/oauth_revoke.
	// Access tokens last 1 h; refresh tokens do not rotate or lapse
	// (unverified). The token answer carries the user in data (gid, name).
	// PKCE supported.
	// API base: https://app.asana.com/api/1.0
	// (https://developers.asana.com/reference/rest-api-reference).
	"asana": {
		Kind: KindOAuth2, DisplayName: "Asana",
		APIBaseURL:    "https://app.asana.com/api/1.0",
		Docs:          "https://developers.asana.com/docs/oauth",
		AuthorizeURL:  "https://app.asana.com/-/oauth_authorize",
		TokenURL:      "https://app.asana.com/-/oauth_token",
		RevocationURL: "https://app.asana.com/-/oauth_revoke", Revocation: RevokeRFC7009,
		AuthStyle: AuthParams, ScopeSeparator: " ",
		AccountIDField: "data.gid", AccountLabelField: "data.name",
		PKCESupport: "supported",
	},
	// ClickUp: authorize https://app.clickup.com/api, token
	// https://api.clickup.com/api/v2/oauth/token. No scopes (the user picks
	// workspaces); tokens do not expire and there is no refresh token.
	// Unverified: ClickUp documents client_id/client_secret/code as query
	// parameters; the form body connectd sends is assumed to work. PKCE
	// unverified. Account: GET https://api.clickup.com/api/v2/user.
	// No API base: ClickUp documents its token in Authorization without a scheme for
	// personal tokens and does not settle the form for OAuth tokens (unverified).
	"clickup": {
		Kind: KindOAuth2, DisplayName: "ClickUp",
		AccountURL: "https://api.clickup.com/api/v2/user", AccountURLIDField: "user.id", AccountURLLabelField: "user.username",
		Docs:         "https://clickup.com/api/developer-portal/authentication/",
		AuthorizeURL: "https://app.clickup.com/api",
		TokenURL:     "https://api.clickup.com/api/v2/oauth/token",
		AuthStyle:    AuthParams, ScopeSeparator: " ",
		PKCESupport: "unverified",
	},
	// monday.com: auth.monday.com/oauth2/{authorize,token}. Scopes space-
	// separated. Tokens do not expire; no refresh token. PKCE unverified.
	// Account: GraphQL me { id name }.
	// API base: https://api.monday.com/v2, the one GraphQL endpoint, the token in
	// Authorization as it is, without a scheme
	// (https://developer.monday.com/api-reference/docs/getting-started).
	"monday": {
		Kind: KindOAuth2, DisplayName: "monday.com",
		APIBaseURL:   "https://api.monday.com/v2",
		APIAuth:      APIAuth{Header: "Authorization", Value: TokenPlaceholder},
		Docs:         "https://developer.monday.com/apps/docs/oauth",
		AuthorizeURL: "https://auth.monday.com/oauth2/authorize",
		TokenURL:     "https://auth.monday.com/oauth2/token",
		AuthStyle:    AuthParams, ScopeSeparator: " ",
		PKCESupport: "unverified",
	},
	// Miro: miro.com/oauth/authorize, api.miro.com/v1/oauth/token. With
	// "expiring access tokens" on, access tokens last 1 h and come with a
	// refresh token (unverified: 60-day lifetime, rotation). The answer
	// carries user_id and team_id. PKCE unverified.
	// API base: https://api.miro.com (/v2/…; https://developers.miro.com/reference/api-reference).
	"miro": {
		Kind: KindOAuth2, DisplayName: "Miro",
		APIBaseURL:   "https://api.miro.com",
		Docs:         "https://developers.miro.com/docs/getting-started-with-oauth",
		AuthorizeURL: "https://miro.com/oauth/authorize",
		TokenURL:     "https://api.miro.com/v1/oauth/token",
		AuthStyle:    AuthParams, ScopeSeparator: " ",
		AccountIDField: "user_id", AccountLabelField: "team_id",
		PKCESupport: "unverified",
	},
	// HubSpot: app.hubspot.com/oauth/authorize, api.hubapi.com/oauth/v1/
	// token. The "oauth" scope is required. Access tokens last 30 min;
	// refresh tokens do not rotate or lapse (they end when the app is
	// uninstalled). Account: hub_id from GET /oauth/v1/access-tokens/{token}.
	// PKCE unverified.
	// API base: https://api.hubapi.com (https://developers.hubspot.com/docs/api/overview).
	"hubspot": {
		Kind: KindOAuth2, DisplayName: "HubSpot",
		APIBaseURL:   "https://api.hubapi.com",
		Docs:         "https://developers.hubspot.com/docs/api/oauth-quickstart-guide",
		AuthorizeURL: "https://app.hubspot.com/oauth/authorize",
		TokenURL:     "https://api.hubapi.com/oauth/v1/token",
		AuthStyle:    AuthParams, ScopeSeparator: " ",
		AlwaysScopes: []string{"oauth"},
		PKCESupport:  "unverified",
	},
	// Salesforce web server flow: {base_url}/services/oauth2/{authorize,
	// token,revoke}. base_url: login.salesforce.com (default),
	// test.salesforce.com (sandboxes) or a My Domain
	// (acme.my.salesforce.com, acme--dev.sandbox.my.salesforce.com):
	// BaseURLHosts, no port, no path. The "refresh_token" scope is needed
	// for a refresh token. Another account: prompt=select_account (the
	// page's "prompt" values) shows the account chooser only when more than
	// one session hint exists; with one session signed in it goes straight
	// to approval, so override with {"prompt": "login"} to make the user
	// sign in again. Token answers carry no expires_in; refreshes
	// return no new refresh token; refresh tokens live as the connected
	// app's policy says (default: until revoked). The answer's instance_url
	// is where the API lives; id is the identity URL. PKCE supported.
	// No API base: the API lives at the instance_url of each token answer, not at a
	// URL the template can name.
	"salesforce": {
		Kind: KindOAuth2, DisplayName: "Salesforce", baseURL: "https://login.salesforce.com",
		Docs:          "https://help.salesforce.com/s/articleView?id=sf.remoteaccess_oauth_web_server_flow.htm",
		BaseURLHosts:  []string{"login.salesforce.com", "test.salesforce.com", "*.my.salesforce.com", "*.sandbox.my.salesforce.com"},
		AuthorizeURL:  "{base_url}/services/oauth2/authorize",
		TokenURL:      "{base_url}/services/oauth2/token",
		RevocationURL: "{base_url}/services/oauth2/revoke", Revocation: RevokeRFC7009,
		AuthStyle: AuthParams, ScopeSeparator: " ",
		AlwaysScopes:        []string{"refresh_token"},
		SelectAccountParams: map[string]string{"prompt": "select_account"},
		AccountIDField:      "id", AccountLabelField: "instance_url",
		PKCESupport: "supported",
	},
	// Zendesk: https://{subdomain}.zendesk.com/oauth/authorizations/new and
	// /oauth/tokens (the grant-type endpoint). subdomain: the account's one
	// hostname label (CheckSubdomain). Scopes space-separated (read, write,
	// …). Access tokens expire and come with a refresh token (2025);
	// unverified: refresh rotation and idle lapse. PKCE supported.
	// Account: GET /api/v2/users/me.
	// API base: https://{subdomain}.zendesk.com/api/v2, an OAuth token as a Bearer
	// token (https://developer.zendesk.com/api-reference/introduction/requests/).
	"zendesk": {
		Kind: KindOAuth2, DisplayName: "Zendesk",
		APIBaseURL: "https://{subdomain}.zendesk.com/api/v2",
		AccountURL: "https://{subdomain}.zendesk.com/api/v2/users/me", AccountURLIDField: "user.id", AccountURLLabelField: "user.email",
		Docs:         "https://developer.zendesk.com/api-reference/ticketing/oauth/grant_type_tokens/",
		AuthorizeURL: "https://{subdomain}.zendesk.com/oauth/authorizations/new",
		TokenURL:     "https://{subdomain}.zendesk.com/oauth/tokens",
		AuthStyle:    AuthParams, ScopeSeparator: " ",
		Scopes:      []string{"read"},
		PKCESupport: "supported",
	},
	// Shopify authorization code grant: https://{subdomain}.myshopify.com/
	// admin/oauth/{authorize,access_token}; subdomain: the shop's one
	// hostname label (CheckSubdomain). Scopes comma-separated
	// (read_products, …). Offline tokens do not expire and have no refresh
	// token unless the app asks for expiring tokens. Unverified: PKCE.
	// Not handled: Shopify's hmac on the callback (connectd's own state
	// protects the flow). Account: the shop itself.
	// API base: https://{subdomain}.myshopify.com/admin/api ({version}/graphql.json),
	// the token in X-Shopify-Access-Token, not Authorization
	// (https://shopify.dev/docs/api/admin-graphql).
	"shopify": {
		Kind: KindOAuth2, DisplayName: "Shopify",
		APIBaseURL:   "https://{subdomain}.myshopify.com/admin/api",
		APIAuth:      APIAuth{Header: "X-Shopify-Access-Token", Value: TokenPlaceholder},
		Docs:         "https://shopify.dev/docs/apps/build/authentication-authorization/access-tokens/authorization-code-grant",
		AuthorizeURL: "https://{subdomain}.myshopify.com/admin/oauth/authorize",
		TokenURL:     "https://{subdomain}.myshopify.com/admin/oauth/access_token",
		AuthStyle:    AuthParams, ScopeSeparator: ",",
		Scopes:      []string{"read_products"},
		PKCESupport: "unverified",
	},
	// Intercom: app.intercom.com/oauth, api.intercom.io/auth/eagle/token
	// (EU and AU workspaces: app.eu.intercom.com / api.eu.intercom.io,
	// override both URLs). Permissions are set on the app (no scope).
	// Tokens do not expire; no refresh token. PKCE unverified. Account: GET
	// https://api.intercom.io/me.
	// API base: https://api.intercom.io (EU, AU: api.eu.intercom.io, api.au.intercom.io,
	// override api_base_url too; https://developers.intercom.com/docs/references/rest-api/api.intercom.io).
	"intercom": {
		Kind: KindOAuth2, DisplayName: "Intercom",
		APIBaseURL: "https://api.intercom.io",
		AccountURL: "https://api.intercom.io/me", AccountURLIDField: "id", AccountURLLabelField: "email",
		Docs:         "https://developers.intercom.com/docs/build-an-integration/learn-more/authentication/setting-up-oauth",
		AuthorizeURL: "https://app.intercom.com/oauth",
		TokenURL:     "https://api.intercom.io/auth/eagle/token",
		AuthStyle:    AuthParams, ScopeSeparator: " ",
		PKCESupport: "unverified",
	},
	// Stripe Connect OAuth (Standard accounts; Stripe recommends Connect
	// Onboarding for new platforms): connect.stripe.com/oauth/{authorize,
	// token}; the client secret is the platform's secret key (form).
	// Scope read_only or read_write. The answer has no expires_in and names
	// the connected account in stripe_user_id. Revocation is
	// /oauth/deauthorize with client_id and stripe_user_id, not RFC 7009
	// (not configured). PKCE unverified.
	// API base: https://api.stripe.com; the access token is a secret key for the
	// connected account, sent as a Bearer token (https://docs.stripe.com/api/authentication).
	"stripe-connect": {
		Kind: KindOAuth2, DisplayName: "Stripe Connect",
		APIBaseURL:   "https://api.stripe.com",
		Docs:         "https://docs.stripe.com/connect/oauth-standard-accounts",
		AuthorizeURL: "https://connect.stripe.com/oauth/authorize",
		TokenURL:     "https://connect.stripe.com/oauth/token",
		AuthStyle:    AuthParams, ScopeSeparator: " ",
		Scopes:         []string{"read_only"},
		AccountIDField: "stripe_user_id",
		PKCESupport:    "unverified",
	},
	// Xero: login.xero.com/identity/connect/authorize,
	// identity.xero.com/connect/{token,revocation}; HTTP Basic;
	// offline_access for a refresh token. Access tokens last 30 min;
	// refresh tokens rotate (the old one works for a 30-minute grace) and
	// unused ones lapse after 60 days (Xero's OAuth 2.0 FAQ). Issuer
	// https://identity.xero.com. PKCE supported. Account: the tenant from
	// GET https://api.xero.com/connections.
	// API base: https://api.xero.com (api.xro/2.0/…; each request also names the
	// organisation in xero-tenant-id, which the caller sends:
	// https://developer.xero.com/documentation/api/accounting/overview).
	"xero": {
		Kind: KindOAuth2, DisplayName: "Xero",
		APIBaseURL:    "https://api.xero.com",
		Docs:          "https://developer.xero.com/faq/oauth2",
		Issuer:        "https://identity.xero.com",
		AuthorizeURL:  "https://login.xero.com/identity/connect/authorize",
		TokenURL:      "https://identity.xero.com/connect/token",
		RevocationURL: "https://identity.xero.com/connect/revocation", Revocation: RevokeRFC7009,
		AuthStyle: AuthBasic, ScopeSeparator: " ",
		AlwaysScopes:   []string{"offline_access"},
		RefreshRotates: true, RefreshIdleLifetime: days(60), RefreshReuseGrace: 30 * time.Minute,
		PKCESupport: "supported",
	},
	// Intuit (QuickBooks Online): appcenter.intuit.com/connect/oauth2,
	// oauth.platform.intuit.com/oauth2/v1/tokens/bearer; HTTP Basic. Access
	// tokens last 1 h; the refresh token lasts 100 days and its value
	// changes about daily (use the latest). Unverified: exact rolling
	// rules. The company id (realmId) arrives as a callback query
	// parameter, which connectd does not keep. Revocation takes a JSON
	// body (not RFC 7009): not configured. PKCE unverified.
	// API base: https://quickbooks.api.intuit.com (sandbox companies:
	// sandbox-quickbooks.api.intuit.com, override api_base_url;
	// https://developer.intuit.com/app/developer/qbo/docs/develop/explore-the-quickbooks-online-api).
	"quickbooks": {
		Kind: KindOAuth2, DisplayName: "QuickBooks",
		APIBaseURL:   "https://quickbooks.api.intuit.com",
		Docs:         "https://developer.intuit.com/app/developer/qbo/docs/develop/authentication-and-authorization/oauth-2.0",
		AuthorizeURL: "https://appcenter.intuit.com/connect/oauth2",
		TokenURL:     "https://oauth.platform.intuit.com/oauth2/v1/tokens/bearer",
		AuthStyle:    AuthBasic, ScopeSeparator: " ",
		Scopes:         []string{"com.intuit.quickbooks.accounting"},
		RefreshRotates: true, RefreshIdleLifetime: days(100),
		PKCESupport: "unverified",
	},
	// LinkedIn 3-legged flow: www.linkedin.com/oauth/v2/{authorization,
	// accessToken}. Scopes space-separated (openid profile email for Sign In
	// with LinkedIn). Access tokens last 60 days; refresh tokens only for
	// approved partners (365 days, not rotating). PKCE: only for native
	// apps (unverified for web). Account: OIDC userinfo
	// https://api.linkedin.com/v2/userinfo.
	// API base: https://api.linkedin.com (the page above, "Make authenticated requests").
	"linkedin": {
		Kind: KindOAuth2, DisplayName: "LinkedIn",
		APIBaseURL: "https://api.linkedin.com",
		AccountURL: "https://api.linkedin.com/v2/userinfo", AccountURLIDField: "sub", AccountURLLabelField: "name",
		Docs:         "https://learn.microsoft.com/en-us/linkedin/shared/authentication/authorization-code-flow",
		AuthorizeURL: "https://www.linkedin.com/oauth/v2/authorization",
		TokenURL:     "https://www.linkedin.com/oauth/v2/accessToken",
		AuthStyle:    AuthParams, ScopeSeparator: " ",
		Scopes:      []string{"openid", "profile"},
		PKCESupport: "unverified",
	},
	// X (Twitter) OAuth 2.0 authorization code with PKCE (required):
	// x.com/i/oauth2/authorize, api.x.com/2/oauth2/{token,revoke};
	// confidential clients use HTTP Basic. offline.access for a refresh
	// token. Access tokens last 2 h. Unverified: refresh rotation. Account:
	// GET https://api.x.com/2/users/me.
	// API base: https://api.x.com (/2/…; https://docs.x.com/x-api/introduction).
	"x": {
		Kind: KindOAuth2, DisplayName: "X",
		APIBaseURL: "https://api.x.com",
		AccountURL: "https://api.x.com/2/users/me", AccountURLIDField: "data.id", AccountURLLabelField: "data.username",
		Docs:          "https://docs.x.com/resources/fundamentals/authentication/oauth-2-0/authorization-code",
		AuthorizeURL:  "https://x.com/i/oauth2/authorize",
		TokenURL:      "https://api.x.com/2/oauth2/token",
		RevocationURL: "https://api.x.com/2/oauth2/revoke", Revocation: RevokeRFC7009,
		AuthStyle: AuthBasic, ScopeSeparator: " ",
		Scopes:       []string{"tweet.read", "users.read"},
		AlwaysScopes: []string{"offline.access"},
		PKCESupport:  "required",
	},
	// Reddit: www.reddit.com/api/v1/{authorize,access_token,revoke_token};
	// HTTP Basic; duration=permanent for a refresh token. Scopes
	// space-separated. Access tokens last 1 h. Unverified: Reddit asks for
	// a descriptive User-Agent, which connectd does not set; refresh
	// rotation. PKCE unverified. Account: GET https://oauth.reddit.com/api/v1/me.
	// API base: https://oauth.reddit.com, where requests with an OAuth token go
	// (the wiki page above).
	"reddit": {
		Kind: KindOAuth2, DisplayName: "Reddit",
		APIBaseURL: "https://oauth.reddit.com",
		AccountURL: "https://oauth.reddit.com/api/v1/me", AccountURLIDField: "id", AccountURLLabelField: "name",
		Docs:          "https://github.com/reddit-archive/reddit/wiki/OAuth2",
		AuthorizeURL:  "https://www.reddit.com/api/v1/authorize",
		TokenURL:      "https://www.reddit.com/api/v1/access_token",
		RevocationURL: "https://www.reddit.com/api/v1/revoke_token", Revocation: RevokeRFC7009,
		AuthStyle: AuthBasic, ScopeSeparator: " ",
		Scopes:          []string{"identity"},
		AuthorizeParams: map[string]string{"duration": "permanent"},
		PKCESupport:     "unverified",
	},
	// Spotify authorization code flow: accounts.spotify.com/authorize and
	// /api/token; HTTP Basic. Access tokens last 1 h; a refresh may return a
	// new refresh token (use it when present). PKCE supported. Account: GET
	// https://api.spotify.com/v1/me.
	// API base: https://api.spotify.com/v1 (https://developer.spotify.com/documentation/web-api).
	"spotify": {
		Kind: KindOAuth2, DisplayName: "Spotify",
		APIBaseURL: "https://api.spotify.com/v1",
		AccountURL: "https://api.spotify.com/v1/me", AccountURLIDField: "id", AccountURLLabelField: "display_name",
		Docs:         "https://developer.spotify.com/documentation/web-api/tutorials/code-flow",
		AuthorizeURL: "https://accounts.spotify.com/authorize",
		TokenURL:     "https://accounts.spotify.com/api/token",
		AuthStyle:    AuthBasic, ScopeSeparator: " ",
		PKCESupport: "supported",
	},
	// Twitch authorization code grant: id.twitch.tv/oauth2/{authorize,token,
	// revoke}. Scopes space-separated; the token answer lists them as a JSON
	// array (read by convert). Access tokens expire (expires_in). Unverified:
	// refresh rotation; revoke takes client_id and token without the secret
	// (connectd also sends the secret). PKCE unverified. Account: GET
	// https://id.twitch.tv/oauth2/validate (user_id, login).
	// No API base: the Helix API also needs a Client-Id header naming connectd's
	// client, which nothing here adds.
	"twitch": {
		Kind: KindOAuth2, DisplayName: "Twitch",
		Docs:          "https://dev.twitch.tv/docs/authentication/getting-tokens-oauth/",
		AuthorizeURL:  "https://id.twitch.tv/oauth2/authorize",
		TokenURL:      "https://id.twitch.tv/oauth2/token",
		RevocationURL: "https://id.twitch.tv/oauth2/revoke", Revocation: RevokeRFC7009,
		AuthStyle: AuthParams, ScopeSeparator: " ",
		PKCESupport: "unverified",
	},
	// Okta (OIDC, the "default" custom authorization server):
	// {base_url}/oauth2/default/v1/{authorize,token,revoke,userinfo}.
	// base_url: the org's Okta domain (acme.okta.com, acme.oktapreview.com,
	// acme.okta-emea.com); a custom domain or the org authorization server
	// (/oauth2/v1/…) needs the URLs overridden, or a generic entry with
	// discovery. offline_access for a refresh token; rotation and lifetime
	// are set per app (rotation with a 30 s leeway by default). Another
	// account: unverified whether Okta honours OIDC's prompt=select_account,
	// so none is set (select_account_params adds it). PKCE supported.
	// Account: OIDC sub.
	// No API base: a token of the default authorization server is for userinfo
	// and the org's own APIs, not Okta's management API.
	"okta": {
		Kind: KindOAuth2, DisplayName: "Okta",
		// openid: the ID token's sub names the account (OIDC sub, above).
		AccountScopes: []string{"openid"},
		Docs:          "https://developer.okta.com/docs/api/openapi/okta-oauth/guides/overview/",
		BaseURLHosts:  []string{"*.okta.com", "*.oktapreview.com", "*.okta-emea.com"},
		Issuer:        "{base_url}/oauth2/default",
		AuthorizeURL:  "{base_url}/oauth2/default/v1/authorize",
		TokenURL:      "{base_url}/oauth2/default/v1/token",
		RevocationURL: "{base_url}/oauth2/default/v1/revoke", Revocation: RevokeRFC7009,
		AuthStyle: AuthBasic, ScopeSeparator: " ",
		Scopes:       []string{"openid", "profile"},
		AlwaysScopes: []string{"offline_access"},
		PKCESupport:  "supported",
	},
	// Auth0 (OIDC): {base_url}/authorize, /oauth/token, /oauth/revoke,
	// /userinfo; issuer "{base_url}/" (with the slash). base_url: the
	// tenant domain (acme.auth0.com or acme.us.auth0.com, .eu, .au, .jp); a
	// custom domain needs the URLs overridden. offline_access for a refresh
	// token. Another account: unverified whether Auth0 honours OIDC's
	// prompt=select_account, so none is set (select_account_params adds
	// it). Rotation and idle lifetime are tenant settings. PKCE supported.
	// Account: OIDC sub.
	// No API base: a user's token is for the tenant's own APIs (its audience), not
	// Auth0's management API.
	"auth0": {
		Kind: KindOAuth2, DisplayName: "Auth0",
		// openid: the ID token's sub names the account (OIDC sub, above).
		AccountScopes: []string{"openid"},
		Docs:          "https://auth0.com/docs/api/authentication",
		BaseURLHosts:  []string{"*.auth0.com", "*.us.auth0.com", "*.eu.auth0.com", "*.au.auth0.com", "*.jp.auth0.com"},
		Issuer:        "{base_url}/",
		AuthorizeURL:  "{base_url}/authorize",
		TokenURL:      "{base_url}/oauth/token",
		RevocationURL: "{base_url}/oauth/revoke", Revocation: RevokeRFC7009,
		AuthStyle: AuthParams, ScopeSeparator: " ",
		Scopes:       []string{"openid", "profile"},
		AlwaysScopes: []string{"offline_access"},
		PKCESupport:  "supported",
	},
	// Pipedrive: oauth.pipedrive.com/oauth/{authorize,token}; HTTP Basic.
	// Access tokens expire (expires_in); the answer names the company's
	// api_domain. Unverified: refresh tokens lapse after 60 days unused;
	// rotation. Scopes are set on the app. PKCE unverified.
	// No API base: the API lives at the company's api_domain of each token answer.
	"pipedrive": {
		Kind: KindOAuth2, DisplayName: "Pipedrive",
		Docs:         "https://pipedrive.readme.io/docs/marketplace-oauth-authorization",
		AuthorizeURL: "https://oauth.pipedrive.com/oauth/authorize",
		TokenURL:     "https://oauth.pipedrive.com/oauth/token",
		AuthStyle:    AuthBasic, ScopeSeparator: " ",
		AccountLabelField: "api_domain",
		PKCESupport:       "unverified",
	},
	// Calendly: auth.calendly.com/oauth/{authorize,token,revoke}. Access
	// tokens expire (2 h, unverified); the answer names the user in owner (a
	// URI). Unverified: refresh rotation. PKCE supported.
	// API base: https://api.calendly.com (https://developer.calendly.com/api-docs).
	"calendly": {
		Kind: KindOAuth2, DisplayName: "Calendly",
		APIBaseURL:    "https://api.calendly.com",
		Docs:          "https://developer.calendly.com/create-a-developer-account",
		AuthorizeURL:  "https://auth.calendly.com/oauth/authorize",
		TokenURL:      "https://auth.calendly.com/oauth/token",
		RevocationURL: "https://auth.calendly.com/oauth/revoke", Revocation: RevokeRFC7009,
		AuthStyle: AuthParams, ScopeSeparator: " ",
		AccountIDField: "owner",
		PKCESupport:    "supported",
	},
	// Webex integrations: webexapis.com/v1/{authorize,access_token}. Scopes
	// space-separated (spark:people_read, …). Access tokens last 14 days;
	// the refresh token lasts 90 days (refresh_token_expires_in).
	// Unverified: whether a refresh extends it. PKCE unverified.
	// API base: https://webexapis.com/v1 (https://developer.webex.com/docs/basics).
	"webex": {
		Kind: KindOAuth2, DisplayName: "Webex",
		APIBaseURL:   "https://webexapis.com/v1",
		Docs:         "https://developer.webex.com/docs/integrations",
		AuthorizeURL: "https://webexapis.com/v1/authorize",
		TokenURL:     "https://webexapis.com/v1/access_token",
		AuthStyle:    AuthParams, ScopeSeparator: " ",
		Scopes:              []string{"spark:people_read"},
		RefreshIdleLifetime: days(90),
		PKCESupport:         "unverified",
	},
	// Todoist: todoist.com/oauth/{authorize,access_token}. Scopes
	// comma-separated (data:read, …). Tokens do not expire; no refresh
	// token. PKCE unverified.
	// API base: https://api.todoist.com (/api/v1/…; https://developer.todoist.com/api/v1/).
	"todoist": {
		Kind: KindOAuth2, DisplayName: "Todoist",
		APIBaseURL:   "https://api.todoist.com",
		Docs:         "https://developer.todoist.com/guides/#oauth",
		AuthorizeURL: "https://todoist.com/oauth/authorize",
		TokenURL:     "https://todoist.com/oauth/access_token",
		AuthStyle:    AuthParams, ScopeSeparator: ",",
		Scopes:      []string{"data:read"},
		PKCESupport: "unverified",
	},
	// Canva Connect: www.canva.com/api/oauth/authorize,
	// api.canva.com/rest/v1/oauth/{token,revoke}; PKCE S256 required; HTTP
	// Basic. Access tokens last about 4 h; refresh tokens are single-use
	// (rotating). Unverified: idle lapse. Account: GET
	// https://api.canva.com/rest/v1/users/me.
	// API base: https://api.canva.com/rest (/v1/…; https://www.canva.dev/docs/connect/).
	"canva": {
		Kind: KindOAuth2, DisplayName: "Canva",
		APIBaseURL: "https://api.canva.com/rest",
		AccountURL: "https://api.canva.com/rest/v1/users/me", AccountURLIDField: "team_user.user_id",
		Docs:          "https://www.canva.dev/docs/connect/authentication/",
		AuthorizeURL:  "https://www.canva.com/api/oauth/authorize",
		TokenURL:      "https://api.canva.com/rest/v1/oauth/token",
		RevocationURL: "https://api.canva.com/rest/v1/oauth/revoke", Revocation: RevokeRFC7009,
		AuthStyle: AuthBasic, ScopeSeparator: " ",
		Scopes:         []string{"profile:read"},
		RefreshRotates: true,
		PKCESupport:    "required",
	},
	// DocuSign authorization code grant: {base_url}/oauth/{auth,token,
	// userinfo}; base_url account.docusign.com, or account-d.docusign.com
	// for the developer sandbox (BaseURLHosts). HTTP Basic. Scopes
	// space-separated (signature, extended). Access tokens last 8 h;
	// refresh tokens last 30 days (unverified: extended by use with the
	// "extended" scope). Account: userinfo (sub, accounts[].base_uri).
	// PKCE supported.
	// No API base: the eSignature API lives at each account's base_uri (userinfo),
	// not at a URL the template can name.
	"docusign": {
		Kind: KindOAuth2, DisplayName: "DocuSign", baseURL: "https://account.docusign.com",
		Docs:         "https://developers.docusign.com/platform/auth/authcode/",
		BaseURLHosts: []string{"account.docusign.com", "account-d.docusign.com"},
		AuthorizeURL: "{base_url}/oauth/auth",
		TokenURL:     "{base_url}/oauth/token",
		AuthStyle:    AuthBasic, ScopeSeparator: " ",
		Scopes:              []string{"signature"},
		RefreshIdleLifetime: days(30),
		PKCESupport:         "supported",
	},

	// API-key providers. Each checks the key's form (KeyPattern) before it
	// is stored or sent, then verifies it with the cheapest authenticated
	// read the provider documents, through the egress-bound client. The
	// proxy attaches the key to API requests as that verification request
	// does (apiAuth).

	// OpenAI: keys start sk- (project keys sk-proj-, service accounts
	// sk-svcacct-); GET /v1/models with a Bearer key.
	// API base: https://api.openai.com/v1 (https://platform.openai.com/docs/api-reference).
	"openai": {
		Kind: KindAPIKey, DisplayName: "OpenAI",
		APIBaseURL: "https://api.openai.com/v1",
		Docs:       "https://platform.openai.com/docs/api-reference/authentication",
		KeyPattern: `^sk-[A-Za-z0-9_-]{20,}$`,
		Verify:     &VerifySpec{Method: "GET", URL: "https://api.openai.com/v1/models", Header: "Authorization", Value: "Bearer {key}", ExpectStatus: 200},
	},
	// Anthropic: keys start sk-ant-; GET /v1/models with x-api-key and the
	// required anthropic-version header.
	// API base: https://api.anthropic.com (/v1/…; the caller sends anthropic-version).
	"anthropic": {
		Kind: KindAPIKey, DisplayName: "Anthropic",
		APIBaseURL: "https://api.anthropic.com",
		Docs:       "https://docs.anthropic.com/en/api/overview",
		KeyPattern: `^sk-ant-[A-Za-z0-9_-]{20,}$`,
		Verify: &VerifySpec{Method: "GET", URL: "https://api.anthropic.com/v1/models", Header: "x-api-key", Value: "{key}",
			Headers: map[string]string{"anthropic-version": "2023-06-01"}, ExpectStatus: 200},
	},
	// Stripe secret (sk_) and restricted (rk_) keys, live or test; GET
	// /v1/balance with a Bearer key. A restricted key without balance read
	// access is refused (403).
	// API base: https://api.stripe.com (https://docs.stripe.com/api).
	"stripe": {
		Kind: KindAPIKey, DisplayName: "Stripe",
		APIBaseURL: "https://api.stripe.com",
		Docs:       "https://docs.stripe.com/keys",
		KeyPattern: `^(sk|rk)_(live|test)_[A-Za-z0-9]{10,}$`,
		Verify:     &VerifySpec{Method: "GET", URL: "https://api.stripe.com/v1/balance", Header: "Authorization", Value: "Bearer {key}", ExpectStatus: 200},
	},
	// SendGrid: keys are SG.<id>.<secret>; GET /v3/scopes lists the key's
	// own scopes.
	// API base: https://api.sendgrid.com (/v3/…; https://www.twilio.com/docs/sendgrid/api-reference).
	"sendgrid": {
		Kind: KindAPIKey, DisplayName: "SendGrid",
		APIBaseURL: "https://api.sendgrid.com",
		Docs:       "https://www.twilio.com/docs/sendgrid/api-reference/api-key-permissions/retrieve-a-list-of-scopes-for-which-this-user-has-access",
		KeyPattern: `^SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}$`,
		Verify:     &VerifySpec{Method: "GET", URL: "https://api.sendgrid.com/v3/scopes", Header: "Authorization", Value: "Bearer {key}", ExpectStatus: 200},
	},
	// Twilio: HTTP Basic with an Account SID (AC…) and auth token, or an API
	// key SID (SK…) and secret; the user types "SID:secret". GET
	// /2010-04-01/Accounts.json. Unverified: the secret is 32 alphanumerics
	// for both kinds.
	// API base: https://api.twilio.com (/2010-04-01/…; other products live on
	// other hosts: https://www.twilio.com/docs/usage/api).
	"twilio": {
		Kind: KindAPIKey, DisplayName: "Twilio",
		APIBaseURL: "https://api.twilio.com",
		Docs:       "https://www.twilio.com/docs/iam/api-keys",
		KeyPattern: `^(AC|SK)[0-9a-fA-F]{32}:[A-Za-z0-9]{32}$`,
		Verify: &VerifySpec{Method: "GET", URL: "https://api.twilio.com/2010-04-01/Accounts.json", Header: "Authorization",
			Value: "Basic {key_base64}", ExpectStatus: 200},
	},
	// Datadog: API keys are 32 hex digits; GET /api/v1/validate with
	// DD-API-KEY. Other sites (datadoghq.eu, us3.datadoghq.com, …): override
	// verify.url.
	// API base: https://api.datadoghq.com (other sites: override api_base_url too;
	// most endpoints also need DD-APPLICATION-KEY: https://docs.datadoghq.com/api/latest/).
	"datadog": {
		Kind: KindAPIKey, DisplayName: "Datadog",
		APIBaseURL: "https://api.datadoghq.com",
		Docs:       "https://docs.datadoghq.com/api/latest/authentication/",
		KeyPattern: `^[0-9a-f]{32}$`,
		Verify:     &VerifySpec{Method: "GET", URL: "https://api.datadoghq.com/api/v1/validate", Header: "DD-API-KEY", Value: "{key}", ExpectStatus: 200},
	},
	// PagerDuty REST API keys: "Authorization: Token token=<key>" and the v2
	// Accept header; GET /abilities. Unverified: key length (20 characters
	// in PagerDuty's examples), so the pattern only bounds the alphabet.
	// API base: https://api.pagerduty.com (https://developer.pagerduty.com/api-reference/).
	"pagerduty": {
		Kind: KindAPIKey, DisplayName: "PagerDuty",
		APIBaseURL: "https://api.pagerduty.com",
		Docs:       "https://developer.pagerduty.com/docs/authentication",
		KeyPattern: `^[A-Za-z0-9_+-]{16,64}$`,
		Verify: &VerifySpec{Method: "GET", URL: "https://api.pagerduty.com/abilities", Header: "Authorization", Value: "Token token={key}",
			Headers: map[string]string{"Accept": "application/vnd.pagerduty+json;version=2"}, ExpectStatus: 200},
	},
	// GitHub personal access tokens, classic (ghp_) or fine-grained
	// (github_pat_); GET /user.
	// API base: https://api.github.com, as for the github template.
	"github-pat": {
		Kind: KindAPIKey, DisplayName: "GitHub (personal access token)",
		APIBaseURL: "https://api.github.com",
		RateLimits: []RateLimit{{Scope: PerUser, Requests: 5000, Per: time.Hour,
			Source: "https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api"}},
		Docs:       "https://docs.github.com/en/authentication/keeping-your-account-and-data-secure/managing-your-personal-access-tokens",
		KeyPattern: `^(ghp_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{40,255})$`,
		Verify: &VerifySpec{Method: "GET", URL: "https://api.github.com/user", Header: "Authorization", Value: "Bearer {key}",
			Headers: map[string]string{"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}, ExpectStatus: 200},
	},
	// Cloudflare API tokens: GET /client/v4/user/tokens/verify, the
	// endpoint made for this. Unverified: token format (no pattern).
	// API base: https://api.cloudflare.com/client/v4
	// (https://developers.cloudflare.com/fundamentals/api/).
	"cloudflare": {
		Kind: KindAPIKey, DisplayName: "Cloudflare",
		APIBaseURL: "https://api.cloudflare.com/client/v4",
		Docs:       "https://developers.cloudflare.com/fundamentals/api/get-started/create-token/",
		Verify:     &VerifySpec{Method: "GET", URL: "https://api.cloudflare.com/client/v4/user/tokens/verify", Header: "Authorization", Value: "Bearer {key}", ExpectStatus: 200},
	},
	// Hugging Face user access tokens start hf_; GET /api/whoami-v2.
	// API base: https://huggingface.co/api, the Hub API (https://huggingface.co/docs/hub/api).
	"huggingface": {
		Kind: KindAPIKey, DisplayName: "Hugging Face",
		APIBaseURL: "https://huggingface.co/api",
		Docs:       "https://huggingface.co/docs/hub/security-tokens",
		KeyPattern: `^hf_[A-Za-z0-9]{30,}$`,
		Verify:     &VerifySpec{Method: "GET", URL: "https://huggingface.co/api/whoami-v2", Header: "Authorization", Value: "Bearer {key}", ExpectStatus: 200},
	},
	// Vercel access tokens: GET /v2/user. Unverified: format (older tokens
	// have no prefix), so no pattern.
	// API base: https://api.vercel.com (https://vercel.com/docs/rest-api).
	"vercel": {
		Kind: KindAPIKey, DisplayName: "Vercel",
		APIBaseURL: "https://api.vercel.com",
		Docs:       "https://vercel.com/docs/rest-api#authentication",
		Verify:     &VerifySpec{Method: "GET", URL: "https://api.vercel.com/v2/user", Header: "Authorization", Value: "Bearer {key}", ExpectStatus: 200},
	},
}

// atlassian is the Atlassian Cloud 3LO template, with a product's default
// scopes.
func atlassian(display string, scopes ...string) Spec {
	return Spec{
		Kind: KindOAuth2, DisplayName: display,
		APIBaseURL:   "https://api.atlassian.com",
		Docs:         "https://developer.atlassian.com/cloud/jira/platform/oauth-2-3lo-apps/",
		AuthorizeURL: "https://auth.atlassian.com/authorize",
		TokenURL:     "https://auth.atlassian.com/oauth/token",
		AuthStyle:    AuthParams, ScopeSeparator: " ",
		Scopes:          scopes,
		AuthorizeParams: map[string]string{"audience": "api.atlassian.com", "prompt": "consent"},
		AlwaysScopes:    []string{"offline_access"},
		RefreshRotates:  true, RefreshIdleLifetime: days(90),
		PKCESupport: "unverified",
		// The user's account id: GET https://api.atlassian.com/me (scope read:me).
		AccountURL: "https://api.atlassian.com/me", AccountURLIDField: "account_id", AccountURLLabelField: "email",
		AccountScopes: []string{"read:me"},
	}
}

// google is the Google template, with a product's API base and default
// scopes.
func google(display, apiBaseURL string, scopes ...string) Spec {
	return Spec{
		Kind: KindOAuth2, DisplayName: display,
		APIBaseURL:    apiBaseURL,
		Docs:          "https://developers.google.com/identity/protocols/oauth2/web-server",
		Issuer:        "https://accounts.google.com",
		AuthorizeURL:  "https://accounts.google.com/o/oauth2/v2/auth",
		TokenURL:      "https://oauth2.googleapis.com/token",
		RevocationURL: "https://oauth2.googleapis.com/revoke", Revocation: RevokeRFC7009,
		AuthStyle: AuthParams, ScopeSeparator: " ",
		Scopes:          scopes,
		AuthorizeParams: map[string]string{"access_type": "offline", "prompt": "consent", "include_granted_scopes": "true"},
		// Replaces the prompt above when a client connects another account.
		SelectAccountParams: map[string]string{"prompt": "consent select_account"},
		// openid makes the token answer carry an ID token whose sub names
		// the Google account (OpenID Connect on Google); it is connectd's,
		// not a client's, and is taken out of the granted scopes.
		AccountScopes:       []string{"openid"},
		NarrowOnRefresh:     true,
		RefreshIdleLifetime: days(183), // "six months" unused
		PKCESupport:         "supported",
	}
}

// withLimits returns s with its rate limits.
func withLimits(s Spec, limits ...RateLimit) Spec {
	s.RateLimits = limits
	return s
}

func days(n int) time.Duration { return time.Duration(n) * 24 * time.Hour }

// Templates lists the built-in template names, sorted.
func Templates() []string {
	return slices.Sorted(maps.Keys(builtins))
}

// Template returns a copy of a built-in template (without client
// credentials; {base_url}, {subdomain} and {tenant} not yet filled).
func Template(name string) (Spec, bool) {
	t, ok := builtins[name]
	if !ok {
		return Spec{}, false
	}
	t = t.clone()
	t.ScopeDescriptions = maps.Clone(scopeTextOf(name))
	return t, true
}
