package webhook

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/problem"
)

// Service registers endpoints, emits events and answers what was delivered.
// It is safe for concurrent use; every replica has one over the same
// database.
type Service struct {
	cfg   Config
	pool  *pgxpool.Pool
	keys  *keyring.Keyring // cfg.Keyring.Purpose(secretPurpose)
	queue *river.Client[pgx.Tx]
}

// NewService returns the Service; queue is the process's River client (its
// workers include NewWorker's).
func NewService(cfg Config, queue *river.Client[pgx.Tx]) (*Service, error) {
	if cfg.Pool == nil || cfg.Keyring == nil || queue == nil {
		return nil, errors.New("webhook: Pool, Keyring and the River client are required")
	}
	cfg.defaults()
	return &Service{cfg: cfg, pool: cfg.Pool, keys: cfg.Keyring.Purpose(secretPurpose), queue: queue}, nil
}

// Endpoint is a registered webhook endpoint. It never carries its secret.
type Endpoint struct {
	ID        string    `json:"id"`
	ClientID  string    `json:"client_id"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"` // empty: every type
	CreatedAt time.Time `json:"created_at"`
}

// Wants reports whether the endpoint receives events of type t.
func (e Endpoint) Wants(t string) bool { return len(e.Events) == 0 || slices.Contains(e.Events, t) }

const (
	insertEndpoint = `INSERT INTO webhook_endpoints (id, client_id, url, key_version, secret, events, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`
	selectEndpoints = `SELECT id, client_id, url, events, created_at FROM webhook_endpoints
		WHERE client_id = $1 ORDER BY created_at, id`
	selectEndpoint = `SELECT id, client_id, url, events, created_at FROM webhook_endpoints WHERE id = $1`
	deleteEndpoint = `DELETE FROM webhook_endpoints WHERE id = $1`
	countEndpoints = `SELECT count(*) FROM webhook_endpoints WHERE client_id = $1`
)

// checkEndpointURL is the rule for an endpoint URL: the egress rule for any
// URL connectd fetches (https, a host, no user info or fragment), at most
// 2048 bytes, and nothing the delivery client would refuse without a DNS
// answer (egress.CheckDestination: http outside its allow-list, an IP
// address its guard refuses) — refused now rather than at every delivery.
// A name is checked at every dial, as the address it resolves to then.
func (s *Service) checkEndpointURL(raw string) error {
	if len(raw) > 2048 {
		return problem.Detail(ErrInvalid, "url must be at most 2048 bytes")
	}
	if err := egress.CheckURL(raw, s.cfg.AllowHTTP); err != nil {
		return problem.Detail(ErrInvalid, "url %v", err)
	}
	if err := egress.CheckDestination(s.cfg.HTTPClient, raw); err != nil {
		return problem.Detail(ErrInvalid, "url %v", err)
	}
	return nil
}

// Create registers an endpoint for clientID at rawURL receiving events (nil:
// all) and returns it with its signing secret ("whsec_" and 32 random bytes,
// base64), which is shown this once: only the sealed copy is kept.
func (s *Service) Create(ctx context.Context, clientID, rawURL string, events []string) (Endpoint, string, error) {
	if !names.ValidClientID(clientID) {
		return Endpoint{}, "", problem.Detail(ErrInvalid, "client must be a client id such as cli_k3j5")
	}
	if err := s.checkEndpointURL(rawURL); err != nil {
		return Endpoint{}, "", err
	}
	events = slices.Compact(slices.Sorted(slices.Values(events)))
	for _, t := range events {
		if !slices.Contains(Types, t) {
			return Endpoint{}, "", problem.Detail(ErrInvalid, "unknown event type %q (known: %v)", t, Types)
		}
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(raw)
	ep := Endpoint{ID: newID("we_"), ClientID: clientID, URL: rawURL, Events: nonNil(events), CreatedAt: s.cfg.Now().UTC()}
	sealed, err := s.keys.Seal([]byte(secret), secretAAD(ep.ID))
	if err != nil {
		return Endpoint{}, "", fmt.Errorf("webhook: seal secret: %w", err)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, countEndpoints, clientID).Scan(&n); err != nil {
			return err
		}
		if n >= defaultMaxEndpointsClient {
			return problem.Detail(ErrInvalid, "a client has at most %d endpoints", defaultMaxEndpointsClient)
		}
		_, err := tx.Exec(ctx, insertEndpoint, ep.ID, clientID, rawURL, int32(s.keys.Primary()), sealed, ep.Events, ep.CreatedAt)
		return err
	})
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "23505":
		return Endpoint{}, "", ErrExists
	case errors.As(err, &pe) && pe.Code == "23503":
		return Endpoint{}, "", problem.Detail(ErrNotFound, "no such client %s", clientID)
	case errors.Is(err, ErrInvalid):
		return Endpoint{}, "", err
	case err != nil:
		return Endpoint{}, "", fmt.Errorf("webhook: create endpoint: %w", err)
	}
	return ep, secret, nil
}

// secretAAD binds a sealed secret to its endpoint: moved to another row, it
// does not open.
func secretAAD(endpointID string) []byte { return []byte("connectd/webhook/secret\x00" + endpointID) }

// Endpoints lists clientID's endpoints, oldest first.
func (s *Service) Endpoints(ctx context.Context, clientID string) ([]Endpoint, error) {
	rows, err := s.pool.Query(ctx, selectEndpoints, clientID)
	if err != nil {
		return nil, fmt.Errorf("webhook: list endpoints: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanEndpoint)
	if err != nil {
		return nil, fmt.Errorf("webhook: list endpoints: %w", err)
	}
	return out, nil
}

// Endpoint returns one endpoint, or ErrNotFound.
func (s *Service) Endpoint(ctx context.Context, id string) (Endpoint, error) {
	rows, err := s.pool.Query(ctx, selectEndpoint, id)
	if err != nil {
		return Endpoint{}, fmt.Errorf("webhook: endpoint: %w", err)
	}
	ep, err := pgx.CollectExactlyOneRow(rows, scanEndpoint)
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, problem.Detail(ErrNotFound, "no such endpoint")
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("webhook: endpoint: %w", err)
	}
	return ep, nil
}

// Delete removes an endpoint with its deliveries (their pending jobs find
// nothing and end); ErrNotFound when there was none.
func (s *Service) Delete(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, deleteEndpoint, id)
	if err != nil {
		return fmt.Errorf("webhook: delete endpoint: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return problem.Detail(ErrNotFound, "no such endpoint")
	}
	return nil
}

func scanEndpoint(r pgx.CollectableRow) (Endpoint, error) {
	var e Endpoint
	err := r.Scan(&e.ID, &e.ClientID, &e.URL, &e.Events, &e.CreatedAt)
	return e, err
}

// Event is something that happened, for the clients it concerns.
type Event struct {
	Type string
	// Clients are the MCP servers it concerns: each one's endpoints that
	// want Type receive it, with its own client_id in the data.
	Clients []string
	// Data are ids and names only, never a credential (docs/webhooks.md
	// lists them per type).
	Data map[string]any
	// Org, when not "", is the organization the event is about (a
	// connection's, ConnectionEvents): only clients of that organization
	// receive it, whoever Clients names — a second line below the callers,
	// which name only the holders of the connection's organization.
	Org string
}

// selectEndpointsOf locks the endpoints it lists against deletion (FOR KEY
// SHARE) until the emitting transaction ends: an endpoint deleted meanwhile
// would fail the delivery's foreign key and roll back the change being
// reported. $2 (not "") keeps the endpoints of that organization's clients.
const selectEndpointsOf = `SELECT e.id, e.client_id, e.url, e.events, e.created_at FROM webhook_endpoints e
	JOIN clients c ON c.id = e.client_id
	WHERE e.client_id = ANY($1) AND ($2::text = '' OR c.org_id = $2)
	ORDER BY e.id FOR KEY SHARE OF e`

// payload is the JSON body of a delivery, as the Standard Webhooks
// specification suggests: the type, when it happened, and the data.
type payload struct {
	Type      string         `json:"type"`
	Timestamp string         `json:"timestamp"`
	Data      map[string]any `json:"data"`
}

// Emit enqueues ev, within tx (the transaction of the change it reports):
// one delivery and one River job per endpoint of ev's clients that wants
// its type. Rolled back with tx, nothing is sent; committed, it is
// delivered at least once.
// EmitAll emits each of evs within tx (ConnectionEvents' per-client
// events).
func (s *Service) EmitAll(ctx context.Context, tx pgx.Tx, evs []Event) error {
	for _, ev := range evs {
		if err := s.Emit(ctx, tx, ev); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) Emit(ctx context.Context, tx pgx.Tx, ev Event) error {
	if !slices.Contains(Types, ev.Type) {
		return fmt.Errorf("webhook: emit: unknown event type %q", ev.Type)
	}
	if len(ev.Clients) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, selectEndpointsOf, ev.Clients, ev.Org)
	if err != nil {
		return fmt.Errorf("webhook: emit %s: %w", ev.Type, err)
	}
	eps, err := pgx.CollectRows(rows, scanEndpoint)
	if err != nil {
		return fmt.Errorf("webhook: emit %s: %w", ev.Type, err)
	}
	now := s.cfg.Now().UTC()
	var jobs []river.InsertManyParams
	for _, ep := range eps {
		if !ep.Wants(ev.Type) {
			continue
		}
		data := make(map[string]any, len(ev.Data)+1)
		for k, v := range ev.Data {
			data[k] = v
		}
		data["client_id"] = ep.ClientID
		body, err := json.Marshal(payload{Type: ev.Type, Timestamp: now.Format(time.RFC3339Nano), Data: data})
		if err != nil {
			return fmt.Errorf("webhook: emit %s: %w", ev.Type, err)
		}
		id := newID("msg_")
		if _, err := tx.Exec(ctx, insertDelivery, id, ep.ID, ev.Type, body, now); err != nil {
			return fmt.Errorf("webhook: emit %s: %w", ev.Type, err)
		}
		jobs = append(jobs, river.InsertManyParams{Args: DeliverArgs{DeliveryID: id}, InsertOpts: s.insertOpts()})
	}
	if len(jobs) == 0 {
		return nil
	}
	if _, err := s.queue.InsertManyTx(ctx, tx, jobs); err != nil {
		return fmt.Errorf("webhook: emit %s: enqueue: %w", ev.Type, err)
	}
	return nil
}

const insertDelivery = `INSERT INTO webhook_deliveries (id, endpoint_id, event_type, payload, created_at)
	VALUES ($1, $2, $3, $4, $5)`

func (s *Service) insertOpts() *river.InsertOpts {
	return &river.InsertOpts{Queue: queue, MaxAttempts: len(s.cfg.Backoff) + 1}
}

// Delivery is one event for one endpoint, as admins see it.
type Delivery struct {
	ID            string     `json:"id"` // the webhook-id header
	EndpointID    string     `json:"endpoint_id"`
	Type          string     `json:"type"`
	Status        string     `json:"status"` // pending, delivered, failed
	Attempts      int        `json:"attempts"`
	CreatedAt     time.Time  `json:"created_at"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	DeliveredAt   *time.Time `json:"delivered_at,omitempty"`
	Payload       string     `json:"payload"` // ids and names only
	Tries         []Attempt  `json:"attempt_log,omitempty"`
}

// Attempt is one try of a delivery.
type Attempt struct {
	N          int       `json:"attempt"`
	At         time.Time `json:"at"`
	StatusCode int       `json:"status_code,omitempty"` // 0: no HTTP answer
	Error      string    `json:"error,omitempty"`       // a class (deliver.go), never an address or the answer's body
	DurationMS int       `json:"duration_ms"`
}

const (
	selectDeliveries = `SELECT id, endpoint_id, event_type, status, attempts, created_at, next_attempt_at, delivered_at, payload
		FROM webhook_deliveries WHERE endpoint_id = $1 ORDER BY created_at DESC, id LIMIT $2`
	selectDelivery = `SELECT id, endpoint_id, event_type, status, attempts, created_at, next_attempt_at, delivered_at, payload
		FROM webhook_deliveries WHERE id = $1`
	selectAttempts = `SELECT attempt, at, coalesce(status_code, 0), error, duration_ms FROM webhook_attempts
		WHERE delivery_id = $1 ORDER BY attempt`
	resetDelivery = `UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $2 WHERE id = $1
		RETURNING status`
)

func scanDelivery(r pgx.CollectableRow) (Delivery, error) {
	var d Delivery
	var body []byte
	err := r.Scan(&d.ID, &d.EndpointID, &d.Type, &d.Status, &d.Attempts, &d.CreatedAt, &d.NextAttemptAt, &d.DeliveredAt, &body)
	d.Payload = string(body)
	return d, err
}

// Deliveries lists an endpoint's latest deliveries (at most limit, newest
// first), without their attempts.
func (s *Service) Deliveries(ctx context.Context, endpointID string, limit int) ([]Delivery, error) {
	rows, err := s.pool.Query(ctx, selectDeliveries, endpointID, limit)
	if err != nil {
		return nil, fmt.Errorf("webhook: deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanDelivery)
	if err != nil {
		return nil, fmt.Errorf("webhook: deliveries: %w", err)
	}
	return out, nil
}

// Delivery returns one delivery with every attempt, or ErrNotFound.
func (s *Service) Delivery(ctx context.Context, id string) (Delivery, error) {
	rows, err := s.pool.Query(ctx, selectDelivery, id)
	if err != nil {
		return Delivery{}, fmt.Errorf("webhook: delivery: %w", err)
	}
	d, err := pgx.CollectExactlyOneRow(rows, scanDelivery)
	if errors.Is(err, pgx.ErrNoRows) {
		return Delivery{}, problem.Detail(ErrNotFound, "no such delivery")
	}
	if err != nil {
		return Delivery{}, fmt.Errorf("webhook: delivery: %w", err)
	}
	rows, err = s.pool.Query(ctx, selectAttempts, id)
	if err != nil {
		return Delivery{}, fmt.Errorf("webhook: attempts: %w", err)
	}
	d.Tries, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Attempt, error) {
		var a Attempt
		err := r.Scan(&a.N, &a.At, &a.StatusCode, &a.Error, &a.DurationMS)
		return a, err
	})
	if err != nil {
		return Delivery{}, fmt.Errorf("webhook: attempts: %w", err)
	}
	return d, nil
}

// Redeliver sends a delivery again now, whatever its status, with a fresh
// run of attempts (the same webhook-id: receivers deduplicate on it).
func (s *Service) Redeliver(ctx context.Context, id string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var st string
		if err := tx.QueryRow(ctx, resetDelivery, id, time.Now().UTC()).Scan(&st); errors.Is(err, pgx.ErrNoRows) {
			return problem.Detail(ErrNotFound, "no such delivery")
		} else if err != nil {
			return fmt.Errorf("webhook: redeliver: %w", err)
		}
		if _, err := s.queue.InsertTx(ctx, tx, DeliverArgs{DeliveryID: id}, s.insertOpts()); err != nil {
			return fmt.Errorf("webhook: redeliver: %w", err)
		}
		return nil
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
