// Package webhook owns connectd's signed webhooks: the endpoints MCP servers
// register (table webhook_endpoints, secrets sealed by the vault keyring),
// the events connectd reports to them, and their delivery (tables
// webhook_deliveries and webhook_attempts) on River, the Postgres-backed job
// queue.
//
// An event is enqueued by Emit inside the transaction of the change it
// reports — its delivery rows and River jobs commit or roll back with that
// change — and delivered at least once: River holds the job through restarts
// and shares it across replicas, retries it with the backoff of Config.Backoff
// (about a day), and rescues a job whose replica died mid-delivery. Each
// request is signed as the Standard Webhooks specification says (webhook-id,
// webhook-timestamp, webhook-signature: HMAC-SHA256 with the endpoint's
// "whsec_" secret), with its reference library, so receivers verify it with
// any of the published libraries. Deliveries go out through the egress client
// (SSRF guard, https only, no redirects), and an endpoint URL that client
// would refuse without a DNS answer is refused at registration. Each
// attempt records an error class (blocked_address, timeout, http_5xx, …),
// never the error's text, which names resolved addresses.
//
// It must never put a credential into a payload, an attempt's error or a log
// line, and never import the packages that emit (connect, admin, server).
package webhook

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/problem"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Event types.
const (
	ElicitationCompleted      = "elicitation.completed"
	ElicitationDeclined       = "elicitation.declined"
	ElicitationExpired        = "elicitation.expired"
	ElicitationFailed         = "elicitation.failed"
	ConnectionCreated         = "connection.created"
	ConnectionScopesChanged   = "connection.scopes_changed"
	ConnectionReauthRequired  = "connection.reauthorization_required"
	ConnectionRevoked         = "connection.revoked"
	ApprovalWithdrawn         = "approval.withdrawn"
	ApprovalRequested         = "approval.requested"
	ApprovalGranted           = "approval.granted"
	ApprovalDenied            = "approval.denied"
	ClientCutOff              = "client.cut_off"
	secretPurpose             = "connectd/webhook/secret/v1"
	queue                     = "webhooks"
	deliveryTimeout           = 10 * time.Second
	maxResponseRead           = 4 << 10
	defaultRetention          = 30 * 24 * time.Hour
	defaultMaxEndpointsClient = 10
)

// Types lists every event type, in the order the docs list them.
var Types = []string{ElicitationCompleted, ElicitationDeclined, ElicitationExpired, ElicitationFailed,
	ConnectionCreated, ConnectionScopesChanged, ConnectionReauthRequired, ConnectionRevoked, ApprovalWithdrawn,
	ClientCutOff, ApprovalRequested, ApprovalGranted, ApprovalDenied}

// DefaultBackoff is the wait before each retry of a failed delivery: 9
// retries over about a day, then the delivery is marked failed (an admin can
// redeliver it).
var DefaultBackoff = []time.Duration{30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour, 8 * time.Hour}

// Errors.
var (
	ErrNotFound = fmt.Errorf("webhook: %w", problem.ErrNotFound)
	ErrInvalid  = fmt.Errorf("webhook: %w", problem.ErrInvalid)
	ErrExists   = problem.Detail(problem.ErrConflict, "this MCP server already has an endpoint at that URL")
)

// Config holds what the package needs.
type Config struct {
	Pool *pgxpool.Pool
	// Keyring is the vault keyring as configured; secrets are sealed under
	// its webhook-secret purpose key.
	Keyring *keyring.Keyring
	// HTTPClient delivers: the egress client (SSRF guard, https only outside
	// the dev allow-list, no redirects). Registration refuses a URL this
	// client would refuse without resolving a name
	// (egress.CheckDestination); a test's own client refuses nothing.
	HTTPClient *http.Client
	// AllowHTTP admits http:// endpoint URLs (dev mode: the egress client
	// still reaches only its allow-listed hosts over http).
	AllowHTTP bool
	// Backoff is the wait before each retry (default DefaultBackoff); its
	// length + 1 is the number of attempts.
	Backoff []time.Duration
	// Retention is how long deliveries are kept (default 30 days).
	Retention time.Duration
	// OnAttempt, when set, is told the outcome of every attempt
	// ("delivered", "failed", "gave_up"), for metrics.
	OnAttempt func(outcome string)
	Logger    *slog.Logger
	// Now is the clock of the events' timestamps (default time.Now);
	// signing and retries use the wall clock, which receivers and River
	// compare with.
	Now func() time.Time
}

func (c *Config) defaults() {
	if len(c.Backoff) == 0 {
		c.Backoff = DefaultBackoff
	}
	if c.Retention <= 0 {
		c.Retention = defaultRetention
	}
	if c.OnAttempt == nil {
		c.OnAttempt = func(string) {}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// newID returns prefix and 128 random bits in lower-case base32.
func newID(prefix string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}
