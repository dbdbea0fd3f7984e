package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/tracing"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Config is connectd's whole configuration, read once from CONNECTD_*
// environment variables (docs/configuration.md lists them) and validated before
// anything starts.
type Config struct {
	Dev          bool     // CONNECTD_DEV: allows http:// public URLs and loopback endpoints.
	PublicURL    *url.URL // CONNECTD_PUBLIC_URL: the browser-facing origin, e.g. https://connect.example.com.
	Addr         string   // CONNECTD_ADDR: public listener.
	InternalAddr string   // CONNECTD_INTERNAL_ADDR: operators' listener (pprof, metrics).

	DatabaseURL string // CONNECTD_DATABASE_URL (or DATABASE_URL).
	DB          DBConfig
	AutoMigrate bool // CONNECTD_AUTO_MIGRATE.

	// DatabaseListenURL (CONNECTD_DATABASE_LISTEN_URL) is where the
	// notification listener connects when it must bypass a pooler in
	// transaction mode; empty: DatabaseURL. See config_scaling.go.
	DatabaseListenURL string

	LogLevel  slog.Level // CONNECTD_LOG_LEVEL: debug|info|warn|error.
	LogFormat string     // CONNECTD_LOG_FORMAT: json|text.

	HTTP HTTPConfig

	// The settings internal/server takes (see Config.server), each read by
	// the file named.
	Identity server.IdentityConfig // config_identity.go
	Vault    server.VaultConfig    // config_vault.go
	Egress   server.EgressConfig   // config_egress.go
	Connect  server.ConnectConfig  // config_connect.go
	Admin    server.AdminConfig    // config_admin.go

	RateLimit server.RateLimitConfig // config_ratelimit.go
	Cache     server.CacheConfig     // config_scaling.go
	Jobs      server.JobsConfig      // config_jobs.go

	Tracing tracing.Config // config_tracing.go; serve builds the provider
}

// DBConfig holds pgxpool settings.
type DBConfig struct {
	MaxConns        int32         // CONNECTD_DB_MAX_CONNS
	MinConns        int32         // CONNECTD_DB_MIN_CONNS
	MaxConnLifetime time.Duration // CONNECTD_DB_MAX_CONN_LIFETIME
	MaxConnIdleTime time.Duration // CONNECTD_DB_MAX_CONN_IDLE_TIME
	// Deadlines bound each request's database work: CONNECTD_DB_ACQUIRE_TIMEOUT,
	// CONNECTD_DB_QUERY_TIMEOUT, CONNECTD_DB_MAX_WAITING.
	Deadlines db.Deadlines
}

// HTTPConfig holds the public server's timeouts.
type HTTPConfig struct {
	ReadHeaderTimeout time.Duration // CONNECTD_HTTP_READ_HEADER_TIMEOUT
	ReadTimeout       time.Duration // CONNECTD_HTTP_READ_TIMEOUT
	WriteTimeout      time.Duration // CONNECTD_HTTP_WRITE_TIMEOUT
	IdleTimeout       time.Duration // CONNECTD_HTTP_IDLE_TIMEOUT
	ShutdownGrace     time.Duration // CONNECTD_SHUTDOWN_GRACE
}

// ConfigError names the variable at fault; the server package reports its
// own wiring problems (a missing key, an issuer it cannot use) with the same
// type, so one errors.As finds either.
type ConfigError = server.ConfigError

// server is the part of c that internal/server takes: the settings, with the
// process's pool and logger.
func (c *Config) server(pool *pgxpool.Pool, logger *slog.Logger) server.Config {
	return server.Config{
		Dev: c.Dev, PublicURL: c.PublicURL, Pool: pool, ListenURL: c.DatabaseListenURL, Logger: logger,
		Identity: c.Identity, Vault: c.Vault, Egress: c.Egress, Connect: c.Connect,
		Admin: c.Admin, RateLimit: c.RateLimit, Cache: c.Cache, Jobs: c.Jobs, DB: c.DB.Deadlines,
	}
}

// env reads typed values, collecting every problem so that one run reports
// them all (an operator fixing a new deployment should not need one start per
// mistake). A variable is reported once: its first problem.
type env struct {
	getenv func(string) string
	errs   []*ConfigError
}

func (e *env) fail(name, format string, args ...any) {
	if e.failed(name) {
		return
	}
	e.errs = append(e.errs, &ConfigError{Var: name, Problem: fmt.Sprintf(format, args...)})
}

// failed reports whether name has a problem already.
func (e *env) failed(name string) bool {
	for _, ce := range e.errs {
		if ce.Var == name {
			return true
		}
	}
	return false
}

// err is every problem found: nil, the one *ConfigError, or a
// ConfigErrors listing them in the order found.
func (e *env) err() error {
	switch len(e.errs) {
	case 0:
		return nil
	case 1:
		return e.errs[0]
	}
	return ConfigErrors(e.errs)
}

// ConfigErrors is several configuration problems found in one run; errors.As
// finds the first *ConfigError in it (so exit status 2 follows).
type ConfigErrors []*ConfigError

func (es ConfigErrors) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid configuration (%d problems):", len(es))
	for _, ce := range es {
		fmt.Fprintf(&b, "\n  %s: %s", ce.Var, ce.Problem)
	}
	return b.String()
}

// Unwrap lets errors.As and errors.Is see each problem.
func (es ConfigErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, ce := range es {
		out[i] = ce
	}
	return out
}

func (e *env) str(name, def string) string {
	if v := strings.TrimSpace(e.getenv(name)); v != "" {
		return v
	}
	return def
}

func (e *env) bool(name string, def bool) bool {
	v := e.str(name, "")
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.fail(name, "must be true or false")
		return def
	}
	return b
}

func (e *env) duration(name string, def, min, max time.Duration) time.Duration {
	v := e.str(name, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		e.fail(name, "must be a duration such as 30s or 5m")
		return def
	}
	if d < min || d > max {
		e.fail(name, "must be between %s and %s", min, max)
		return def
	}
	return d
}

func (e *env) int32(name string, def, min, max int32) int32 {
	v := e.str(name, "")
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		e.fail(name, "must be an integer")
		return def
	}
	if int32(n) < min || int32(n) > max {
		e.fail(name, "must be between %d and %d", min, max)
		return def
	}
	return int32(n)
}

func (e *env) addr(name, def string) string {
	v := e.str(name, def)
	if _, port, err := net.SplitHostPort(v); err != nil || port == "" {
		e.fail(name, "must be host:port, e.g. :8080 or 127.0.0.1:9090")
	}
	return v
}

// needs lists what a command requires beyond the defaults.
type needs struct {
	db        bool
	publicURL bool
	// keys: session and vault keys, required outside dev mode (serve). The
	// server checks again when it is built; checking here too puts a
	// missing key in the same report as every other problem.
	keys bool
	// providers: the command calls providers (serve, a revocation at the
	// provider, a provider app's check), so the providers file's secrets
	// must be there. Without it, the file is read for its names and form
	// only (provider.ParseOptions.NoSecrets): an operator shell without the
	// providers' secrets runs every other command.
	providers bool
}

// loadConfig reads and validates the configuration. It returns every
// problem found: one *ConfigError, or ConfigErrors when there are several.
func loadConfig(getenv func(string) string, n needs) (*Config, error) {
	e := &env{getenv: getenv}
	c := &Config{}
	c.Dev = e.bool("CONNECTD_DEV", false)
	c.Addr = e.addr("CONNECTD_ADDR", ":8080")
	c.InternalAddr = e.addr("CONNECTD_INTERNAL_ADDR", "127.0.0.1:9090")
	c.AutoMigrate = e.bool("CONNECTD_AUTO_MIGRATE", false)

	c.DatabaseURL = e.str("CONNECTD_DATABASE_URL", e.str("DATABASE_URL", ""))
	if n.db {
		switch {
		case c.DatabaseURL == "":
			e.fail("CONNECTD_DATABASE_URL", "is required (a PostgreSQL URL such as postgres://user:pass@host:5432/connectd)")
		default:
			u, err := url.Parse(c.DatabaseURL)
			if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
				e.fail("CONNECTD_DATABASE_URL", "must be a postgres:// or postgresql:// URL")
			}
		}
	}
	c.DB = DBConfig{
		MaxConns:        e.int32("CONNECTD_DB_MAX_CONNS", 20, 1, 1000),
		MinConns:        e.int32("CONNECTD_DB_MIN_CONNS", 0, 0, 1000),
		MaxConnLifetime: e.duration("CONNECTD_DB_MAX_CONN_LIFETIME", time.Hour, time.Minute, 24*time.Hour),
		MaxConnIdleTime: e.duration("CONNECTD_DB_MAX_CONN_IDLE_TIME", 30*time.Minute, time.Second, 24*time.Hour),
		Deadlines: db.Deadlines{
			Acquire:    e.duration("CONNECTD_DB_ACQUIRE_TIMEOUT", db.DefaultAcquire, 10*time.Millisecond, time.Minute),
			Query:      e.duration("CONNECTD_DB_QUERY_TIMEOUT", db.DefaultQuery, 10*time.Millisecond, 10*time.Minute),
			MaxWaiting: int(e.int32("CONNECTD_DB_MAX_WAITING", db.DefaultMaxWaiting, 0, 100_000)),
		},
	}
	if c.DB.MinConns > c.DB.MaxConns {
		e.fail("CONNECTD_DB_MIN_CONNS", "must not exceed CONNECTD_DB_MAX_CONNS")
	}

	switch lvl := strings.ToLower(e.str("CONNECTD_LOG_LEVEL", "info")); lvl {
	case "debug":
		c.LogLevel = slog.LevelDebug
	case "info":
		c.LogLevel = slog.LevelInfo
	case "warn":
		c.LogLevel = slog.LevelWarn
	case "error":
		c.LogLevel = slog.LevelError
	default:
		e.fail("CONNECTD_LOG_LEVEL", "must be one of debug, info, warn, error")
	}
	c.LogFormat = strings.ToLower(e.str("CONNECTD_LOG_FORMAT", "json"))
	if c.LogFormat != "json" && c.LogFormat != "text" {
		e.fail("CONNECTD_LOG_FORMAT", "must be json or text")
	}

	c.HTTP = HTTPConfig{
		ReadHeaderTimeout: e.duration("CONNECTD_HTTP_READ_HEADER_TIMEOUT", 5*time.Second, 100*time.Millisecond, time.Minute),
		ReadTimeout:       e.duration("CONNECTD_HTTP_READ_TIMEOUT", 30*time.Second, time.Second, 10*time.Minute),
		// Long-polls wait up to 60 s, so writes must be allowed longer than that.
		WriteTimeout:  e.duration("CONNECTD_HTTP_WRITE_TIMEOUT", 90*time.Second, time.Second, 10*time.Minute),
		IdleTimeout:   e.duration("CONNECTD_HTTP_IDLE_TIMEOUT", 120*time.Second, time.Second, time.Hour),
		ShutdownGrace: e.duration("CONNECTD_SHUTDOWN_GRACE", 30*time.Second, 0, 10*time.Minute),
	}

	raw := e.str("CONNECTD_PUBLIC_URL", "")
	if raw == "" && n.publicURL {
		e.fail("CONNECTD_PUBLIC_URL", "is required (the https:// origin browsers use to reach connectd)")
	} else if raw != "" {
		u, err := parsePublicURL(raw, c.Dev)
		if err != nil {
			e.fail("CONNECTD_PUBLIC_URL", "%s", err)
		}
		c.PublicURL = u
	}

	c.loadIdentity(e)
	c.loadVault(e, n.providers)
	c.loadEgress(e)
	c.loadConnect(e)
	c.loadAdmin(e)
	c.loadRateLimit(e)
	c.loadScaling(e)
	c.loadJobs(e)
	c.loadTracing(e)

	if n.keys && !c.Dev {
		if len(c.Identity.SessionKeys) == 0 && !e.failed("CONNECTD_SESSION_KEYS") {
			e.fail("CONNECTD_SESSION_KEYS", "is required (comma-separated, newest first; generate one with: openssl rand -base64 64 | tr -d '\\n')")
		}
		if c.Vault.Keyring == nil && !e.failed("CONNECTD_VAULT_KEYS") && !e.failed("CONNECTD_VAULT_KEYS_FILE") {
			e.fail("CONNECTD_VAULT_KEYS", "is required (or CONNECTD_VAULT_KEYS_FILE): make a key with `connectd vault gen-key`")
		}
	}
	if err := e.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// parsePublicURL accepts an absolute https origin (http only in dev mode) with
// no user info, query or fragment, and at most a path prefix.
func parsePublicURL(raw string, dev bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("must be an absolute URL such as https://connect.example.com")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && dev:
	case u.Scheme == "http":
		return nil, errors.New("must use https (http:// is allowed only with CONNECTD_DEV=true)")
	default:
		return nil, errors.New("must be an absolute http(s) URL such as https://connect.example.com")
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, errors.New("must name a host")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, errors.New("must not contain user info, a query or a fragment")
	}
	if !dev && isLoopbackHost(u.Hostname()) {
		return nil, errors.New("must not be a loopback host outside dev mode (CONNECTD_DEV=true)")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return u, nil
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") || strings.HasSuffix(strings.ToLower(h), ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && (ip.IsLoopback() || ip.IsUnspecified())
}
