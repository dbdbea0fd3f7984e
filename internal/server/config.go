package server

import (
	"github.com/connectd/connectd/web/templates"

	"crypto/x509"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/web"
)

// Config is every dependency of a Server. cmd/connectd fills the settings
// from CONNECTD_* variables (docs/configuration.md names each one next to
// its field); tests fill them directly. The zero value of a setting means
// what the package it goes to documents (usually: its default, or off).
type Config struct {
	// Dev is CONNECTD_DEV: http:// public URLs, loopback endpoints, no HSTS,
	// and ephemeral vault and session keys when none are configured.
	Dev bool
	// PublicURL is the browser-facing origin (CONNECTD_PUBLIC_URL); connect
	// URLs, redirect URIs and the trusted origin of the cross-origin check
	// are built from it. Required.
	PublicURL *url.URL
	// Pool is the database; the caller opens and closes it. Required.
	Pool *pgxpool.Pool
	// ListenURL (CONNECTD_DATABASE_LISTEN_URL) is where the notification hub
	// connects when it must bypass a pooler in transaction mode; empty:
	// Pool's own settings.
	ListenURL string
	// Logger receives every log line. Required.
	Logger *slog.Logger

	Identity  IdentityConfig
	Vault     VaultConfig
	Egress    EgressConfig
	Connect   ConnectConfig
	Admin     AdminConfig
	RateLimit RateLimitConfig
	Cache     CacheConfig
	Jobs      JobsConfig
	// DB bounds every request's database work (CONNECTD_DB_ACQUIRE_TIMEOUT,
	// CONNECTD_DB_QUERY_TIMEOUT, CONNECTD_DB_MAX_WAITING; package db). The
	// pool must be set up by db.Configure for them to apply.
	DB db.Deadlines

	// Now is the clock of the flows, client keys, the vault and the admin
	// store (default time.Now); tests move it.
	Now func() time.Time
	// Tracing, when set, is the tracer provider of every span connectd
	// makes (package tracing; CONNECTD_TRACING): a server span per request
	// on both listeners, with spans for the statements, outbound calls and
	// River jobs under it. Nil (the default): tracing off, and nothing of it
	// installed.
	Tracing trace.TracerProvider
	// HTTPClient, when set, replaces the egress client (docs/egress.md) for
	// every outbound call: issuer discovery and JWKS, provider token,
	// refresh, revocation and API-key checks. Tests set it to trust their
	// TLS fakes; production leaves it nil.
	HTTPClient *http.Client
}

// IdentityConfig configures who connectd trusts: MCP authorization servers
// (issuers) whose user tokens it verifies and where browsers log in, sessions,
// and MCP-server client keys.
type IdentityConfig struct {
	// Issuers come from CONNECTD_ISSUERS (JSON) or CONNECTD_ISSUERS_FILE, with
	// client secrets read from the variables or files they name.
	Issuers []mcpauth.Issuer
	// SessionKeys (CONNECTD_SESSION_KEYS), newest first: the first signs, all
	// are read. Empty in dev mode means ephemeral keys (see New).
	SessionKeys        []session.Key
	SessionMaxAge      time.Duration // CONNECTD_SESSION_MAX_AGE
	SessionIdleTimeout time.Duration // CONNECTD_SESSION_IDLE_TIMEOUT
	SessionCacheTTL    time.Duration // CONNECTD_SESSION_CACHE_TTL: "this session is live" answered from memory
	TokenSkew          time.Duration // CONNECTD_TOKEN_SKEW
	ClientKeyOverlap   time.Duration // CONNECTD_CLIENT_KEY_OVERLAP: default for clients rotate-key
}

// VaultConfig configures credential encryption and the provider catalog.
type VaultConfig struct {
	// Keyring holds the vault keys from CONNECTD_VAULT_KEYS or
	// CONNECTD_VAULT_KEYS_FILE; nil when neither is set (in dev mode New then generates an ephemeral key).
	Keyring *keyring.Keyring
	// Providers is the parsed CONNECTD_PROVIDERS_FILE (client secrets
	// resolved); empty when the variable is not set.
	Providers *provider.Config
	// RefreshSkew: tokens expiring within it are refreshed before use
	// (CONNECTD_REFRESH_SKEW).
	RefreshSkew time.Duration
	// ProviderTimeout (CONNECTD_PROVIDER_TIMEOUT, default 30s) bounds one
	// call to a provider's token or revocation endpoint. The outbound
	// client's own timeouts for provider calls are set to it, so connectd
	// never abandons a refresh before the vault's deadline for it.
	ProviderTimeout time.Duration
	// ProviderConcurrency (CONNECTD_PROVIDER_MAX_CONCURRENCY, default 16)
	// caps the calls in flight to one provider from this process: a
	// provider that hangs costs its own callers a fast provider_unavailable
	// and nobody else anything.
	ProviderConcurrency int
	// MaxAccounts (CONNECTD_MAX_ACCOUNTS, default 10) limits a user's
	// connections (provider accounts) at one provider.
	MaxAccounts int
	// Proxy bounds the provider API proxy (/v1/proxy): request and response
	// bodies (CONNECTD_PROXY_MAX_REQUEST_BYTES, default 10 MiB;
	// CONNECTD_PROXY_MAX_RESPONSE_BYTES, default 100 MiB) and one call,
	// streaming included (CONNECTD_PROXY_TIMEOUT, default 5m); the calls
	// in flight to one provider from one replica
	// (CONNECTD_PROXY_MAX_IN_FLIGHT, default proxy.DefaultMaxInFlight).
	ProxyMaxRequestBytes, ProxyMaxResponseBytes int64
	ProxyTimeout                                time.Duration
	// ProxyAnswerTimeout (CONNECTD_PROXY_ANSWER_TIMEOUT, default
	// proxy.DefaultHeaderTimeout, 15s) bounds the wait for the provider's
	// status and headers: past it a proxied call is 504 provider_timeout.
	ProxyAnswerTimeout time.Duration
	ProxyMaxInFlight   int
}

// EgressConfig configures outbound HTTP (see docs/egress.md).
type EgressConfig struct {
	// AllowHosts (CONNECTD_EGRESS_ALLOW_HOSTS, dev mode only): exact
	// host:port pairs connectd may fetch over plain http and on loopback.
	AllowHosts []string
	// Proxies (CONNECTD_EGRESS_PROXY, CONNECTD_EGRESS_PROXY_TOKEN, _REFRESH,
	// _REVOKE, _API, _WEBHOOKS): the operator's egress proxies, per class of
	// call (egress.Proxies). Not used when HTTPClient is set.
	Proxies egress.Proxies
	// RootCAs replaces the system roots of outbound TLS (tests, whose fakes
	// share httptest's certificate; no variable sets it). Nil: system roots.
	RootCAs *x509.CertPool
}

// ConnectConfig configures the connect flow and the /v1 API.
type ConnectConfig struct {
	ElicitationTTL  time.Duration // CONNECTD_ELICITATION_TTL: how long a connect URL stays usable.
	RequestStateTTL time.Duration // CONNECTD_REQUEST_STATE_TTL: how long a request_state can be resolved.
	// Brand is the product name, logo and accent colour of every page
	// (CONNECTD_BRAND_NAME, CONNECTD_BRAND_LOGO_URL, CONNECTD_BRAND_ACCENT).
	Brand templates.Brand
	// ReceiptsRetention (CONNECTD_RECEIPTS_RETENTION, 1d–400d) is how long
	// the users' access receipts are kept (default receipt.DefaultRetention,
	// 90 days).
	ReceiptsRetention time.Duration
	// ReceiptsMaxPending bounds the receipts waiting in memory for the next
	// write (default receipt.DefaultMaxPending); tests set it.
	ReceiptsMaxPending int
}

// AdminConfig configures the admin pages, the admin API and the audit
// trail's retention (docs/admin.md).
type AdminConfig struct {
	// Issuer (CONNECTD_ADMIN_ISSUER) is the id or URL of the login issuer
	// admins sign in at; empty disables admin sign-in (the API still takes
	// admin keys).
	Issuer string
	// Subjects (CONNECTD_ADMIN_SUBJECTS) are the allow-listed subjects at
	// Issuer.
	Subjects []string
	// Claim and ClaimValue (CONNECTD_ADMIN_CLAIM=name=value): an ID token
	// claim admins must carry. With Subjects too, both must hold.
	Claim, ClaimValue string
	SessionMaxAge     time.Duration // CONNECTD_ADMIN_SESSION_MAX_AGE
	AuditRetention    time.Duration // CONNECTD_AUDIT_RETENTION
}

// JobsConfig configures the background jobs on River (webhook delivery, the
// connection health job; docs/webhooks.md).
type JobsConfig struct {
	// WebhookBackoff is the wait before each retry of a failed webhook
	// delivery (default webhook.DefaultBackoff, about a day in all).
	WebhookBackoff []time.Duration
	// WebhookRetention (CONNECTD_WEBHOOK_RETENTION) is how long deliveries
	// are kept (default 30 days).
	WebhookRetention time.Duration
	// RescueAfter (CONNECTD_JOBS_RESCUE_AFTER) is how long a job may stay
	// running before another replica takes it over: a replica that died
	// mid-delivery (default 5m).
	RescueAfter time.Duration
	// Workers (CONNECTD_WEBHOOK_WORKERS) is how many deliveries one replica
	// sends at once (default 8).
	Workers int
	// HealthInterval (CONNECTD_HEALTH_INTERVAL) is how often the connection
	// health job runs (default 1h; package keepalive).
	HealthInterval time.Duration
}

// RateLimitConfig holds the request budgets (see docs/configuration.md). Each
// is "N/WINDOW" (e.g. 120/1m) or "off", and counts per replica.
type RateLimitConfig struct {
	// Public are the budgets of the public listener by route class:
	// CONNECTD_RATE_API (per client key on /v1), CONNECTD_RATE_API_PER_IP,
	// CONNECTD_RATE_BROWSER and CONNECTD_RATE_LOGIN (per client IP), and
	// CONNECTD_RATE_TRUSTED_PROXIES (load balancers whose X-Forwarded-For is
	// believed).
	Public web.RateLimits
	// Mint (CONNECTD_RATE_MINT) is per (user, client) on POST
	// /v1/elicitations; MintUser (CONNECTD_RATE_MINT_USER) is the ceiling per
	// user over all clients.
	Mint, MintUser web.Rate
	// MaxWaiters (CONNECTD_MAX_WAITERS_PER_CLIENT) caps the long-polls one
	// client key holds open at once.
	MaxWaiters int
}

// CacheConfig configures the in-memory caches of the token path (see
// docs/scaling.md). Changes reach every replica's caches through Postgres
// LISTEN/NOTIFY within milliseconds; a TTL only bounds staleness should a
// notification be lost in a way the listener cannot see. A TTL of 0 disables
// that cache.
type CacheConfig struct {
	// CredentialTTL: how long a connection's sealed credential (never the
	// plaintext) may be used from memory. CONNECTD_CREDENTIAL_CACHE=false
	// sets it to 0 (CONNECTD_CREDENTIAL_CACHE_TTL).
	CredentialTTL time.Duration
	// ConsentTTL: how long a user's consents for a provider may be used from
	// memory (CONNECTD_CONSENT_CACHE_TTL).
	ConsentTTL time.Duration
	// Size caps the credential and the consent cache, in entries each
	// (CONNECTD_CACHE_SIZE).
	Size int
	// ClientKeyTTL: how long an authenticated client key is remembered
	// (CONNECTD_CLIENT_CACHE_TTL).
	ClientKeyTTL time.Duration
	// StaleIfError: how long past its TTL an entry of the token path's
	// caches may still answer while the database is unreachable
	// (CONNECTD_CACHE_STALE_IF_ERROR); 0: cache.DefaultStaleIfError,
	// negative: never.
	StaleIfError time.Duration
}

// ConfigError names the variable at fault and what is wrong with it. Its text
// never includes the value, which may be a secret.
type ConfigError struct {
	Var     string
	Problem string
}

func (e *ConfigError) Error() string { return "invalid configuration: " + e.Var + ": " + e.Problem }
