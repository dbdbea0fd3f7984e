package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrWebhookSignature: a webhook request that is not connectd's (no or a
// wrong signature, a timestamp too far from now, a missing header).
var ErrWebhookSignature = errors.New("connectd: webhook signature does not verify")

// WebhookTolerance is how far a webhook's timestamp may be from now.
const WebhookTolerance = 5 * time.Minute

// WebhookEvent is a verified webhook delivery from connectd
// (docs/webhooks.md).
type WebhookEvent struct {
	// ID is the webhook-id header: the same on every retry of one delivery;
	// deduplicate on it.
	ID        string         `json:"-"`
	Type      string         `json:"type"` // elicitation.completed, connection.revoked, …
	Timestamp time.Time      `json:"timestamp"`
	Data      map[string]any `json:"data"` // ids and names, never a credential
}

// VerifyWebhook checks a webhook request connectd sent to one of this MCP
// server's endpoints — its Standard Webhooks signature (webhook-id,
// webhook-timestamp, webhook-signature: HMAC-SHA256 with the endpoint's
// "whsec_" secret), and a timestamp within WebhookTolerance of now — and
// returns the event. Pass the raw body, exactly as received. Any published
// Standard Webhooks library verifies the same requests.
func VerifyWebhook(secret string, header http.Header, body []byte, now time.Time) (*WebhookEvent, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || len(key) == 0 {
		return nil, errors.New("connectd client: the webhook secret must be the whsec_… value connectd showed")
	}
	id, ts, sigs := header.Get("webhook-id"), header.Get("webhook-timestamp"), header.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return nil, fmt.Errorf("%w: missing webhook-id, webhook-timestamp or webhook-signature", ErrWebhookSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: bad webhook-timestamp", ErrWebhookSignature)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > WebhookTolerance || d < -WebhookTolerance {
		return nil, fmt.Errorf("%w: timestamp outside the tolerance", ErrWebhookSignature)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	ok := false
	for _, s := range strings.Fields(sigs) {
		version, sig, found := strings.Cut(s, ",")
		if !found || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			ok = true
		}
	}
	if !ok {
		return nil, ErrWebhookSignature
	}
	var ev WebhookEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("connectd client: webhook body: %w", err)
	}
	ev.ID = id
	return &ev, nil
}
