package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/keyring"
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
	keys *keyring.Keyring
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
		w.giveUp(ctx, id, endpointID, classSecretDoesNotOpen, "the endpoint's secret does not open with the configured "+
			"vault keys (was a key removed before `connectd vault rewrap`?)")
		return river.JobCancel(fmt.Errorf("webhook: endpoint %s: secret does not open: %w", endpointID, err))
	}
	wh, err := standardwebhooks.NewWebhook(string(secret))
	clear(secret)
	if err != nil {
		w.giveUp(ctx, id, endpointID, classSecretUnusable, "the endpoint's secret is not usable")
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
	class := attemptClass(code, sendErr)
	var codeArg any
	if code != 0 {
		codeArg = code
	}
	dur := int(time.Since(start) / time.Millisecond)
	if _, err := w.pool.Exec(context.WithoutCancel(ctx), recordAttempt, id, start.UTC(), delivered, !delivered && last, next,
		codeArg, class, dur); err != nil {
		w.cfg.Logger.ErrorContext(ctx, "webhook: attempt not recorded", slog.String("delivery", id), slog.Any("error", err))
	}
	attrs := []any{slog.String("delivery", id), slog.String("endpoint", endpointID), slog.Int("attempt", job.Attempt)}
	if delivered {
		w.cfg.OnAttempt("delivered")
		w.cfg.Logger.InfoContext(ctx, "webhook delivered", attrs...)
		return nil
	}
	// The log, for operators, has the details too (the resolved address a
	// dial was refused, say), but never the URL, which may carry the
	// receiver's token.
	attrs = append(attrs, slog.String("error", class), slog.String("detail", withoutURL(sendErr)))
	if last {
		w.cfg.OnAttempt("gave_up")
		w.cfg.Logger.WarnContext(ctx, "webhook delivery failed for good; an admin can redeliver it", attrs...)
	} else {
		w.cfg.OnAttempt("failed")
		w.cfg.Logger.InfoContext(ctx, "webhook attempt failed; will retry", append(attrs, slog.Time("next", *next))...)
	}
	// River keeps this error in its job row: the class only, like the
	// attempt's.
	return fmt.Errorf("webhook attempt failed: %s", class)
}

// giveUp records an attempt that could not be made, as class, and fails the
// delivery; why is for the log.
func (w *Worker) giveUp(ctx context.Context, id, endpointID, class, why string) {
	if _, err := w.pool.Exec(context.WithoutCancel(ctx), recordAttempt, id, time.Now().UTC(), false, true, nil, nil, class, 0); err != nil {
		w.cfg.Logger.ErrorContext(ctx, "webhook: attempt not recorded", slog.String("delivery", id), slog.Any("error", err))
	}
	w.cfg.OnAttempt("gave_up")
	w.cfg.Logger.ErrorContext(ctx, "webhook delivery failed for good", slog.String("delivery", id),
		slog.String("endpoint", endpointID), slog.String("error", class), slog.String("detail", why))
}

// send POSTs body to url, signed, and returns the answer's status code (0
// when there was none) and what went wrong, for attemptClass: an error of
// net/http or egress (which names the URL and resolved addresses: it is
// never stored), or errStatus.
func (w *Worker) send(ctx context.Context, wh *standardwebhooks.Webhook, id, url string, body []byte, at time.Time) (int, error) {
	sig, err := wh.Sign(id, at, body)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errSign, err)
	}
	ctx, cancel := context.WithTimeout(ctx, deliveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, errURL
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "connectd-webhooks")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := w.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseRead))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, errStatus
	}
	return resp.StatusCode, nil
}

var (
	errStatus = errors.New("the answer's status is not 2xx")
	errSign   = errors.New("sign")
	errURL    = errors.New("the endpoint URL is not usable")
)

// The classes an attempt's error is recorded as (docs/webhooks.md lists
// them): what admins see on the delivery's page and in the API, stable for
// tooling. A class never carries an address, a port, a URL or the answer's
// body.
const (
	classBlockedAddress    = "blocked_address"    // the egress guard refused the (resolved) address
	classInsecureScheme    = "insecure_scheme"    // http:// no longer in the dev allow-list
	classEgressProxy       = "egress_proxy"       // the operator's egress proxy did not open a tunnel
	classDNS               = "dns"                // the name did not resolve
	classConnectionRefused = "connection_refused" // nothing listening
	classUnreachable       = "unreachable"        // no route to the network or host
	classConnectionReset   = "connection_reset"   // the receiver closed or reset the connection
	classTimeout           = "timeout"            // no answer within 10 s (connecting, TLS or the answer)
	classTLS               = "tls"                // the TLS handshake failed (certificate, protocol)
	classRedirect          = "redirect"           // a 3xx answer: redirects are not followed
	classTooLarge          = "too_large"          // the answer declared a body over the egress cap
	classCancelled         = "cancelled"          // connectd stopped during the attempt
	classInvalidURL        = "invalid_url"        // the stored URL does not make a request
	classSigning           = "signing_failed"     // the request could not be signed
	classNotReached        = "not_reached"        // any other failure before an answer
	classSecretDoesNotOpen = "secret_does_not_open"
	classSecretUnusable    = "secret_unusable"
)

// attemptClass names what went wrong with an attempt, "" when it was
// delivered: http_4xx, http_5xx (or http_status for a code outside 100-599)
// for an answer, redirect for a 3xx, otherwise what kept the answer from
// arriving. Typed errors and sentinels decide it, never an error's text.
func attemptClass(code int, err error) string {
	if err == nil {
		return ""
	}
	if code != 0 {
		switch {
		case code >= 300 && code <= 399:
			return classRedirect
		case code >= 100 && code <= 599:
			return "http_" + strconv.Itoa(code/100) + "xx"
		}
		return "http_status"
	}
	var dnsErr *net.DNSError
	var netErr net.Error
	var certErr *tls.CertificateVerificationError
	var recordErr tls.RecordHeaderError
	var alertErr tls.AlertError
	var unknownCA x509.UnknownAuthorityError
	var badHost x509.HostnameError
	var badCert x509.CertificateInvalidError
	switch {
	case errors.Is(err, egress.ErrBlockedAddress):
		return classBlockedAddress
	case errors.Is(err, egress.ErrInsecureScheme):
		return classInsecureScheme
	case errors.Is(err, egress.ErrProxy): // before the dial errors: they are the proxy's, not the receiver's
		return classEgressProxy
	case errors.Is(err, egress.ErrRedirect):
		return classRedirect
	case errors.Is(err, egress.ErrTooLarge):
		return classTooLarge
	case errors.Is(err, errSign):
		return classSigning
	case errors.Is(err, errURL):
		return classInvalidURL
	case errors.Is(err, context.Canceled):
		return classCancelled
	case errors.As(err, &dnsErr): // before timeouts: a DNS timeout is a DNS failure
		return classDNS
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return classTimeout
	case errors.As(err, &certErr), errors.As(err, &recordErr), errors.As(err, &alertErr),
		errors.As(err, &unknownCA), errors.As(err, &badHost), errors.As(err, &badCert):
		return classTLS
	case errors.Is(err, syscall.ECONNREFUSED):
		return classConnectionRefused
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return classUnreachable
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF):
		return classConnectionReset
	}
	return classNotReached
}

// withoutURL is err's text without the URL net/http puts into its errors
// (the receiver may have put a token in it), for the log.
func withoutURL(err error) string {
	var ue *url.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ue):
		return ue.Err.Error()
	}
	return err.Error()
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
