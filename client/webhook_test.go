package client_test

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/connectd/connectd/client"
)

// TestVerifyWebhook: VerifyWebhook accepts exactly what the Standard
// Webhooks reference library signs (as connectd does), and refuses a
// tampered body, another secret, a stale or future timestamp and missing
// headers.
func TestVerifyWebhook(t *testing.T) {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(raw)
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"connection.revoked","timestamp":"2026-11-30T12:00:00Z","data":{"provider":"github","by":"admin"}}`)
	now := time.Now()
	signed := func(at time.Time, payload []byte) http.Header {
		sig, err := wh.Sign("msg_1", at, payload)
		if err != nil {
			t.Fatal(err)
		}
		return http.Header{"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {strconv.FormatInt(at.Unix(), 10)},
			"Webhook-Signature": {"v1,bm9wZQ== " + sig}} // a rotated-out signature first
	}
	ev, err := client.VerifyWebhook(secret, signed(now, body), body, now)
	if err != nil || ev.ID != "msg_1" || ev.Type != "connection.revoked" || ev.Data["by"] != "admin" {
		t.Fatalf("verified: %+v %v", ev, err)
	}
	other := "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 32))
	for name, tc := range map[string]struct {
		secret string
		h      http.Header
		body   []byte
	}{
		"tampered body":   {secret, signed(now, body), []byte(`{"type":"connection.created"}`)},
		"another secret":  {other, signed(now, body), body},
		"stale":           {secret, signed(now.Add(-6*time.Minute), body), body},
		"from the future": {secret, signed(now.Add(6*time.Minute), body), body},
		"no signature":    {secret, http.Header{"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {"1"}}, body},
		"no headers":      {secret, http.Header{}, body},
		"v2 signature only": {secret, http.Header{"Webhook-Id": {"msg_1"},
			"Webhook-Timestamp": {strconv.FormatInt(now.Unix(), 10)}, "Webhook-Signature": {"v2,abc"}}, body},
	} {
		if _, err := client.VerifyWebhook(tc.secret, tc.h, tc.body, now); !errors.Is(err, client.ErrWebhookSignature) {
			t.Errorf("%s: %v, want ErrWebhookSignature", name, err)
		}
		// The reference library agrees.
		if tc.secret == secret && wh.Verify(tc.body, tc.h) == nil && name != "stale" && name != "from the future" {
			t.Errorf("%s: the reference library accepts what VerifyWebhook refuses", name)
		}
	}
}
