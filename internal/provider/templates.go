package provider

import (
	"maps"
	"slices"
)

// builtins are the built-in templates, by name. A providers-file entry names
// one with "template" and adds client credentials; any field can be
// overridden. Endpoints and quirks were taken from each provider's public
// documentation; docs/providers.md lists them with the reasons.
var builtins = map[string]Spec{
	"github": {
		Kind: KindOAuth2, DisplayName: "GitHub",
		AuthorizeURL: "https://github.com/login/oauth/authorize",
		TokenURL:     "https://github.com/login/oauth/access_token",
		// GitHub answers the token endpoint form-encoded unless asked for
		// JSON, and reports errors with HTTP 200 and its own codes.
		AcceptJSON: true, AuthStyle: AuthParams, ScopeSeparator: " ",
		InvalidGrantErrors: []string{"invalid_grant", "bad_verification_code", "bad_refresh_token"},
	},
	"gitlab": {
		Kind: KindOAuth2, DisplayName: "GitLab", baseURL: "https://gitlab.com",
		Issuer:        "{base_url}",
		AuthorizeURL:  "{base_url}/oauth/authorize",
		TokenURL:      "{base_url}/oauth/token",
		RevocationURL: "{base_url}/oauth/revoke", Revocation: RevokeRFC7009,
		AuthStyle: AuthParams, ScopeSeparator: " ",
	},
	"google": {
		Kind: KindOAuth2, DisplayName: "Google",
		Issuer:        "https://accounts.google.com",
		AuthorizeURL:  "https://accounts.google.com/o/oauth2/v2/auth",
		TokenURL:      "https://oauth2.googleapis.com/token",
		RevocationURL: "https://oauth2.googleapis.com/revoke", Revocation: RevokeRFC7009,
		AuthStyle: AuthParams, ScopeSeparator: " ",
		// Without offline + consent Google issues no refresh token (or only on
		// the very first consent); include_granted_scopes makes a new grant
		// cover earlier ones (incremental authorization).
		AuthorizeParams: map[string]string{"access_type": "offline", "prompt": "consent", "include_granted_scopes": "true"},
		// A refresh with "scope" returns an access token for that subset of
		// the grant (Google's OAuth 2.0 for web server apps, "Refreshing an
		// access token").
		NarrowOnRefresh: true,
	},
	"microsoft": {
		Kind: KindOAuth2, DisplayName: "Microsoft", tenant: "common",
		AuthorizeURL: "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/authorize",
		TokenURL:     "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token",
		AuthStyle:    AuthParams, ScopeSeparator: " ",
		AlwaysScopes: []string{"offline_access"}, // else no refresh token
		// The refresh-token grant takes "scope" and returns a token for that
		// subset (Microsoft identity platform, "Refresh the access token").
		NarrowOnRefresh: true,
	},
	"slack": {
		Kind: KindOAuth2, DisplayName: "Slack",
		AuthorizeURL:  "https://slack.com/oauth/v2/authorize",
		TokenURL:      "https://slack.com/api/oauth.v2.access",
		RevocationURL: "https://slack.com/api/auth.revoke", Revocation: RevokeBearer,
		// User-token flow: scopes go in user_scope, comma-separated, and the
		// user token comes back nested in authed_user; errors are HTTP 200
		// {"ok":false,"error":…} with Slack's own codes.
		ScopeSeparator: ",", ScopeParam: "user_scope", TokenResponse: ResponseSlackUser, AuthStyle: AuthParams,
		InvalidGrantErrors: []string{"invalid_grant", "invalid_code", "code_already_used", "code_expired",
			"invalid_refresh_token", "token_revoked", "token_expired"},
		AccountIDField: "authed_user.id", AccountLabelField: "team.name",
	},
	"atlassian": {
		Kind: KindOAuth2, DisplayName: "Atlassian",
		AuthorizeURL: "https://auth.atlassian.com/authorize",
		TokenURL:     "https://auth.atlassian.com/oauth/token",
		AuthStyle:    AuthParams, ScopeSeparator: " ",
		AuthorizeParams: map[string]string{"audience": "api.atlassian.com", "prompt": "consent"},
		AlwaysScopes:    []string{"offline_access"}, // else no refresh token
	},
	"notion": {
		Kind: KindOAuth2, DisplayName: "Notion",
		AuthorizeURL: "https://api.notion.com/v1/oauth/authorize",
		TokenURL:     "https://api.notion.com/v1/oauth/token",
		// Notion takes client credentials only as HTTP Basic, has no scopes,
		// and its tokens carry no expires_in.
		AuthStyle: AuthBasic, ScopeSeparator: " ",
		AuthorizeParams: map[string]string{"owner": "user"},
		AccountIDField:  "owner.user.id", AccountLabelField: "workspace_name",
	},
	"linear": {
		Kind: KindOAuth2, DisplayName: "Linear",
		AuthorizeURL:  "https://linear.app/oauth/authorize",
		TokenURL:      "https://api.linear.app/oauth/token",
		RevocationURL: "https://api.linear.app/oauth/revoke", Revocation: RevokeRFC7009,
		AuthStyle: AuthParams, ScopeSeparator: ",",
		Scopes: []string{"read"},
	},
	"dropbox": {
		Kind: KindOAuth2, DisplayName: "Dropbox",
		AuthorizeURL:  "https://www.dropbox.com/oauth2/authorize",
		TokenURL:      "https://api.dropboxapi.com/oauth2/token",
		RevocationURL: "https://api.dropboxapi.com/2/auth/token/revoke", Revocation: RevokeBearer,
		// offline: a refresh token; refreshes return no new refresh token.
		AuthStyle: AuthParams, ScopeSeparator: " ",
		AuthorizeParams: map[string]string{"token_access_type": "offline"},
		AccountIDField:  "account_id",
	},
	"salesforce": {
		Kind: KindOAuth2, DisplayName: "Salesforce", baseURL: "https://login.salesforce.com",
		AuthorizeURL:  "{base_url}/services/oauth2/authorize",
		TokenURL:      "{base_url}/services/oauth2/token",
		RevocationURL: "{base_url}/services/oauth2/revoke", Revocation: RevokeRFC7009,
		// No expires_in in token responses; refreshes return no new refresh
		// token; the "refresh_token" scope is needed to get one at all.
		AuthStyle: AuthParams, ScopeSeparator: " ",
		AlwaysScopes:   []string{"refresh_token"},
		AccountIDField: "id", AccountLabelField: "instance_url",
	},
	"hubspot": {
		Kind: KindOAuth2, DisplayName: "HubSpot",
		AuthorizeURL: "https://app.hubspot.com/oauth/authorize",
		TokenURL:     "https://api.hubapi.com/oauth/v1/token",
		AuthStyle:    AuthParams, ScopeSeparator: " ",
		AlwaysScopes: []string{"oauth"},
	},
	"zoom": {
		Kind: KindOAuth2, DisplayName: "Zoom",
		AuthorizeURL:  "https://zoom.us/oauth/authorize",
		TokenURL:      "https://zoom.us/oauth/token",
		RevocationURL: "https://zoom.us/oauth/revoke", Revocation: RevokeRFC7009,
		AuthStyle: AuthBasic, ScopeSeparator: " ",
	},
}

// Templates lists the built-in template names, sorted.
func Templates() []string {
	return slices.Sorted(maps.Keys(builtins))
}

// Template returns a copy of a built-in template (without client
// credentials; {base_url} and {tenant} not yet filled).
func Template(name string) (Spec, bool) {
	t, ok := builtins[name]
	if !ok {
		return Spec{}, false
	}
	return t.clone(), true
}
