package provider

import (
	"errors"
	"fmt"
	"net/http"
)

// SharedAppPolicy says which organizations may use the deployment's own app
// at a provider (the client id and secret of the providers file) when they
// have none of their own there: the providers file's shared_app.
type SharedAppPolicy string

// Shared-app policies.
const (
	// SharedDefault (the default): only the default organization uses the
	// deployment's app; every other organization needs its own
	// (connectd orgs apps set). A single-team deployment sees no change.
	SharedDefault SharedAppPolicy = "default"
	// SharedAll: every organization without its own app at the provider
	// uses the deployment's.
	SharedAll SharedAppPolicy = "all"
)

// AppCredentials are an organization's own OAuth app at a provider: its id
// in connectd (provider_apps.id), and the client id and secret the provider
// issued for it.
type AppCredentials struct {
	ID       string
	ClientID string
	Secret   Secret
}

// ErrAppCredentials: WithApp was given no app id or no client id.
var ErrAppCredentials = errors.New("provider: an app needs an id and a client id")

// appKey names one app's bulkhead: the provider and the app's id.
type appKey struct{ provider, app string }

// WithApp is the OAuth provider name of the catalog, as an organization's
// own app: the same template, endpoints (discovered ones included), scopes,
// PKCE, quirks and egress client, with app's client id and secret on every
// token, refresh and revocation request and its own bulkhead (each app has
// Options.MaxConcurrent slots of its own, kept across calls and secret
// rotations under the same app id, so one organization's load at a
// provider holds back no other's). ErrUnknownProvider when name is not an
// OAuth provider of the catalog.
func (c *Catalog) WithApp(name string, app AppCredentials) (OAuth, error) {
	p, ok := c.byName[name].(*oauthProvider)
	if !ok {
		if _, exists := c.byName[name]; exists {
			return nil, fmt.Errorf("%w: %q is not an oauth2 provider", ErrUnknownProvider, name)
		}
		return nil, fmt.Errorf("%w: %q", ErrUnknownProvider, name)
	}
	if app.ID == "" || app.ClientID == "" {
		return nil, ErrAppCredentials
	}
	spec := p.spec.clone()
	spec.ClientID, spec.ClientSecret = app.ClientID, app.Secret
	return newOAuth(spec, c.appClient(name, app.ID)), nil
}

// appClient is the HTTP client of one app: the catalog's bounded client
// behind a bulkhead of the app's own, made on first use and then shared.
func (c *Catalog) appClient(name, appID string) *http.Client {
	k := appKey{name, appID}
	if hc, ok := c.apps.Load(k); ok {
		return hc.(*http.Client)
	}
	base := c.bound
	if base == nil { // a Catalog not made by New
		base = &http.Client{}
	}
	hc, _ := c.apps.LoadOrStore(k, withBulkhead(base, name+" (app "+appID+")", c.maxConcurrent))
	return hc.(*http.Client)
}

// SharedApp is the shared-app policy of provider name (SharedDefault for
// a provider the catalog lacks, or of the api_key kind, which needs no
// app).
func (c *Catalog) SharedApp(name string) SharedAppPolicy {
	if p, ok := c.byName[name].(*oauthProvider); ok && p.spec.SharedApp != "" {
		return p.spec.SharedApp
	}
	return SharedDefault
}

// CallbackPath is the path of connectd's redirect URI, the one registered at
// every provider (the deployment's app and each organization's): the public
// URL and CallbackPath. The CLI prints it when an app is set, for the
// operator to register at the provider.
const CallbackPath = "/oauth/callback"
