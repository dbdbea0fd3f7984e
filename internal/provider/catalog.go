package provider

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"sync"

	"github.com/connectd/connectd/internal/egress"
)

// Options are a catalog's runtime dependencies.
type Options struct {
	// HTTPClient makes every outbound call (discovery, token, revocation,
	// verification): in production the one egress.New makes. Default: a
	// plain client. Whatever is given, egress.Bound adds a timeout when it
	// has none (egress.DefaultTimeout), refuses redirects and caps response
	// bodies.
	HTTPClient *http.Client
	// MaxResponseBytes caps response bodies. Default
	// egress.DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// MaxConcurrent caps the calls in flight to each provider at once
	// (default DefaultMaxConcurrent): each provider has its own slots, so
	// one that hangs cannot take the outbound connections, goroutines or
	// patience of the others. A call that finds no slot within a second
	// fails with ErrUnavailable (cause ErrBusy).
	MaxConcurrent int
	Logger        *slog.Logger // default: discard
}

// Catalog is the set of configured providers, by name, and what it takes
// to build an organization's own app at one of them (WithApp).
type Catalog struct {
	byName map[string]Provider

	bound         *http.Client // opts.HTTPClient, bounded by egress.Bound: every app's calls go through it
	maxConcurrent int
	apps          sync.Map // appKey → *http.Client: each app's own bulkhead, made once
}

// New builds the catalog from a parsed providers file, running discovery for
// generic providers that ask for it. A discovery failure is a start-up error
// naming the provider.
func New(ctx context.Context, cfg *Config, opts Options) (*Catalog, error) {
	if cfg.NoSecrets {
		return nil, ErrNoSecrets
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Catalog{byName: map[string]Provider{}, maxConcurrent: opts.MaxConcurrent,
		bound: egress.Bound(opts.HTTPClient, egress.Limits{MaxResponseBytes: opts.MaxResponseBytes})}
	for i, spec := range cfg.Providers {
		p, err := NewProvider(ctx, spec, cfg.Dev, opts)
		if err != nil {
			return nil, &ConfigError{Index: i, Provider: spec.Name, Field: "issuer", Problem: err.Error()}
		}
		c.byName[spec.Name] = p
		info := p.Info()
		logger.InfoContext(ctx, "provider configured", slog.String("provider", spec.Name),
			slog.String("kind", string(info.Kind)), slog.String("template", spec.Template),
			slog.Bool("discovered", spec.Discovery), slog.Bool("pkce", info.PKCE), slog.String("api_base_url", info.APIBaseURL),
			slog.String("shared_app", string(spec.SharedApp)))
	}
	return c, nil
}

// NewProvider builds one provider from a resolved Spec (discovery included).
// A Spec made in code rather than by ParseConfig is not validated: give it
// https URLs.
func NewProvider(ctx context.Context, spec Spec, dev bool, opts Options) (Provider, error) {
	client := withBulkhead(egress.Bound(opts.HTTPClient, egress.Limits{MaxResponseBytes: opts.MaxResponseBytes}),
		spec.Name, opts.MaxConcurrent)
	switch spec.Kind {
	case KindAPIKey:
		a := &apiKeyProvider{spec: spec.clone(), client: client}
		if spec.KeyPattern != "" {
			re, err := regexp.Compile(spec.KeyPattern)
			if err != nil {
				return nil, fmt.Errorf("key pattern: %w", err)
			}
			a.pattern = re
		}
		return a, nil
	case KindOAuth2:
		spec = spec.clone()
		if spec.Discovery {
			md, err := discover(ctx, client, spec.Issuer, dev)
			if err != nil {
				return nil, fmt.Errorf("discovery failed: %w", err)
			}
			applyMetadata(&spec, md)
		}
		// Defaults for a Spec built in code rather than parsed.
		if spec.AuthStyle == "" {
			spec.AuthStyle = AuthBasic
		}
		if spec.ScopeSeparator == "" {
			spec.ScopeSeparator = " "
		}
		if spec.ScopeParam == "" {
			spec.ScopeParam = "scope"
		}
		if len(spec.InvalidGrantErrors) == 0 {
			spec.InvalidGrantErrors = []string{defaultInvalidGrant}
		}
		if spec.DisplayName == "" {
			spec.DisplayName = spec.Name
		}
		return newOAuth(spec, client), nil
	default:
		return nil, fmt.Errorf("unknown kind %q", spec.Kind)
	}
}

// Names lists the configured providers, sorted.
func (c *Catalog) Names() []string {
	return slices.Sorted(maps.Keys(c.byName))
}

// Get returns the named provider; ErrUnknownProvider when there is none.
func (c *Catalog) Get(name string) (Provider, error) {
	p, ok := c.byName[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownProvider, name)
	}
	return p, nil
}

// OAuth returns the named OAuth provider; ErrUnknownProvider when there is
// none or it is of another kind.
func (c *Catalog) OAuth(name string) (OAuth, error) {
	p, err := c.Get(name)
	if err != nil {
		return nil, err
	}
	o, ok := p.(OAuth)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not an oauth2 provider", ErrUnknownProvider, name)
	}
	return o, nil
}

// APIKey returns the named API-key provider; ErrUnknownProvider when there is
// none or it is of another kind.
func (c *Catalog) APIKey(name string) (APIKey, error) {
	p, err := c.Get(name)
	if err != nil {
		return nil, err
	}
	a, ok := p.(APIKey)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not an api_key provider", ErrUnknownProvider, name)
	}
	return a, nil
}
