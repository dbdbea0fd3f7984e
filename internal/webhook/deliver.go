package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/connectd/connectd/internal/vault"
)

// DeliverArgs is the River job that sends one delivery.
type DeliverArgs struct {
	DeliveryID string `json:"delivery_id"`
}

// Kind names the job in River.
func (DeliverArgs) Kind() string { return "webhook_deliver" }

// Worker sends deliveries: River runs it on every replica's queue
// "webhooks" (server wiring).
type Worker struct {
	river.WorkerDefaults[DeliverArgs]
	cfg  Config
	pool *pgxpool.Pool
	keys *vault.Keyring
}

// NewWorker returns the delivery worker over cfg.
func NewWorker(cfg Config) *Worker {
	cfg.defaults()
	return &Worker{cfg: cfg, pool: cfg.Pool, keys: cfg.Keyring.Purpose(secretPurpose)}
}

// Queue is the River queue deliveries run on.
const Queue = queue

// Timeout bounds one attempt, the receiver's answer included.
func (w *Worker) Timeout(*river.Job[DeliverArgs]) time.Duration {
	return deliveryTimeout + 5*time.Second
}

// NextRetry waits Backoff[n-1] after the n-th failed attempt (on the wall
// clock, which River's scheduler compares with the database's).
func (w *Worker) NextRetry(job *river.Job[DeliverArgs]) time.Time {
	return time.Now().Add(backoffAfter(w.cfg.Backoff, job.Attempt))
}

// backoffAfter is the wait after the attempt-th failed attempt (1-based).
func backoffAfter(b []time.Duration, attempt int) time.Duration {
	i := min(max(attempt-1, 0), len(b)-1)
	return b[i]
}

const (
	selectForDelivery = `SELECT d.status, d.payload, e.id, e.url, e.secret FROM webhook_deliveries d
		JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE d.id = $1`
	recordAttempt = `WITH n AS (UPDATE webhook_deliveries SET attempts = attempts + 1,
			status = CASE WHEN $3 THEN 'delivered' WHEN $4 THEN 'failed' ELSE status END,
			delivered_at = CASE WHEN $3 THEN $2 ELSE delivered_at END,
			next_attempt_at = $5
		WHERE id = $1 RETURNING attempts)
	INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, error, duration_ms)
	SELECT $1, attempts, $2, $6, $7, $8 FROM n`
)

// Work sends the delivery once. A 2xx answer delivers it; anything else is
// an error, and River retries after NextRetry until the attempts run out.
func (w *Worker) Work(ctx context.Context, job *river.Job[DeliverArgs]) error {
	id := job.Args.DeliveryID
	var status, endpointID, url string
	var body, sealed []byte
	err := w.pool.QueryRow(ctx, selectForDelivery, id).Scan(&status, &body, &endpointID, &url, &sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return river.JobCancel(fmt.Errorf("webhook: delivery %s is gone (endpoint deleted or delivery expired)", id))
	}
	if err != nil {
		return fmt.Errorf("webhook: load delivery: %w", err)
	}
	if status == "delivered" {
		return nil // a redelivery raced a retry that already succeeded
	}
	secret, err := w.keys.Open(sealed, secretAAD(endpointID))
	if err != nil {
		// Retrying cannot help: the delivery fails, on record and visible to
		// admins, who can redeliver once the key is back.
		w.giveUp(ctx, id, endpointID, "the endpoint's secret does not open with the configured vault keys "+
			"(was a key removed before `connectd vault rewrap`?)")
		return river.JobCancel(fmt.Errorf("webhook: endpoint %s: secret does not open: %w", endpointID, err))
	}
	wh, err := standardwebhooks.NewWebhook(string(secret))
	clear(secret)
	if err != nil {
		w.giveUp(ctx, id, endpointID, "the endpoint's secret is not usable")
		return river.JobCancel(fmt.Errorf("webhook: endpoint %s: %w", endpointID, err))
	}

	start := time.Now() // the wall clock: receivers check the signed timestamp against theirs
	code, sendErr := w.send(ctx, wh, id, url, body, start)
	last := job.Attempt >= job.MaxAttempts
	delivered := sendErr == nil
	var next *time.Time
	if !delivered && !last {
		t := w.NextRetry(job)
		next = &t
	}
	errText := ""
	if sendErr != nil {
		errText = sendErr.Error()
	}
	var codeArg any
	if code != 0 {
		codeArg = code
	}
	dur := int(time.Since(start) / time.Millisecond)
	if _, err := w.pool.Exec(context.WithoutCancel(ctx), recordAttempt, id, start.UTC(), delivered, !delivered && last, next,
		codeArg, errText, dur); err != nil {
		w.cfg.Logger.ErrorContext(ctx, "webhook: attempt not recorded", slog.String("delivery", id), slog.Any("error", err))
	}
	attrs := []any{slog.String("delivery", id), slog.String("endpoint", endpointID), slog.Int("attempt", job.Attempt)}
	switch {
	case delivered:
		w.cfg.OnAttempt("delivered")
		w.cfg.Logger.InfoContext(ctx, "webhook delivered", attrs...)
		return nil
	case last:
		w.cfg.OnAttempt("gave_up")
		w.cfg.Logger.WarnContext(ctx, "webhook delivery failed for good; an admin can redeliver it",
			append(attrs, slog.String("error", errText))...)
	default:
		w.cfg.OnAttempt("failed")
		w.cfg.Logger.InfoContext(ctx, "webhook attempt failed; will retry",
			append(attrs, slog.String("error", errText), slog.Time("next", *next))...)
	}
	return sendErr
}

// giveUp records an attempt that could not be made and fails the delivery.
func (w *Worker) giveUp(ctx context.Context, id, endpointID, why string) {
	if _, err := w.pool.Exec(context.WithoutCancel(ctx), recordAttempt, id, time.Now().UTC(), false, true, nil, nil, why, 0); err != nil {
		w.cfg.Logger.ErrorContext(ctx, "webhook: attempt not recorded", slog.String("delivery", id), slog.Any("error", err))
	}
	w.cfg.OnAttempt("gave_up")
	w.cfg.Logger.ErrorContext(ctx, "webhook delivery failed for good", slog.String("delivery", id),
		slog.String("endpoint", endpointID), slog.String("error", why))
}

// send POSTs body to url, signed, and returns the answer's status code (0
// when there was none). The error says what went wrong without a secret,
// the URL or the answer's body.
func (w *Worker) send(ctx context.Context, wh *standardwebhooks.Webhook, id, url string, body []byte, at time.Time) (int, error) {
	sig, err := wh.Sign(id, at, body)
	if err != nil {
		return 0, fmt.Errorf("sign: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, deliveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, errors.New("the endpoint URL is not usable")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "connectd-webhooks")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := w.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, transportError(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseRead))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// transportError names what kind of failure err is, without the URL
// net/http puts into its errors.
func transportError(err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return errors.New("timed out")
	case errors.Is(err, context.Canceled):
		return errors.New("cancelled (connectd stopping)")
	}
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return fmt.Errorf("not reached: %v", inner)
		}
	}
	return errors.New("not reached")
}

// CleanupArgs is the periodic job that deletes deliveries past the
// retention.
type CleanupArgs struct{}

// Kind names the job in River.
func (CleanupArgs) Kind() string { return "webhook_cleanup" }

// CleanupWorker deletes old deliveries (their attempts go with them).
type CleanupWorker struct {
	river.WorkerDefaults[CleanupArgs]
	cfg Config
}

// NewCleanupWorker returns the retention job's worker.
func NewCleanupWorker(cfg Config) *CleanupWorker {
	cfg.defaults()
	return &CleanupWorker{cfg: cfg}
}

const deleteOldDeliveries = `DELETE FROM webhook_deliveries WHERE id IN (
	SELECT id FROM webhook_deliveries WHERE created_at < $1 AND status <> 'pending' ORDER BY created_at LIMIT 5000)`

// Work deletes a batch at a time until none is left.
func (w *CleanupWorker) Work(ctx context.Context, _ *river.Job[CleanupArgs]) error {
	cutoff := w.cfg.Now().Add(-w.cfg.Retention)
	for {
		tag, err := w.cfg.Pool.Exec(ctx, deleteOldDeliveries, cutoff)
		if err != nil {
			return fmt.Errorf("webhook: cleanup: %w", err)
		}
		if tag.RowsAffected() < 5000 {
			return nil
		}
	}
}
