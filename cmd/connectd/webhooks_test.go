package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/webhook"
)

// TestClientsWebhooksCommand registers an endpoint with the CLI, checks that
// the secret it prints once signs a real delivery (the delivery worker,
// over TLS, to a receiver verifying with the Standard Webhooks library),
// lists, shows and redelivers deliveries, removes the endpoint, and refuses
// every mistake with exit status 2 and a message saying what is wrong.
func TestClientsWebhooksCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	keyLine := genKey(t, 1)
	env := envOf(map[string]string{"CONNECTD_DATABASE_URL": dbURL, "CONNECTD_VAULT_KEYS": keyLine, "USER": "ops"})
	noKeys := envOf(map[string]string{"CONNECTD_DATABASE_URL": dbURL})
	var outputs []string
	wh := func(env func(string) string, args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, append([]string{"clients", "webhooks"}, args...), env, &out, &errOut)
		outputs = append(outputs, out.String(), errOut.String())
		return out.String(), errOut.String(), err
	}

	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	client, _, err := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool}).Create(ctx, "Acme tools",
		[]string{"https://mcp.acme.example/"}, nil)
	if err != nil {
		t.Fatal(err)
	}

	// The receiver: verifies every delivery with the secret it is given.
	var secret string
	var verified atomic.Int32
	rcv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		v, err := standardwebhooks.NewWebhook(secret)
		if err != nil || v.Verify(body, r.Header) != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		verified.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rcv.Close)
	// The receiver is on loopback, so it is reached only in dev mode, with
	// its host:port allow-listed, as a development setup would.
	rcvHost := strings.TrimPrefix(rcv.URL, "https://")
	devEnv := func(user string) func(string) string {
		return envOf(map[string]string{"CONNECTD_DATABASE_URL": dbURL, "CONNECTD_VAULT_KEYS": keyLine, "USER": user,
			"CONNECTD_DEV": "true", "CONNECTD_EGRESS_ALLOW_HOSTS": rcvHost + ",hooks.dev.test:8080"})
	}
	dev := devEnv("ops")
	devOther := devEnv("dev") // another operator, so that the audit counts below stay ops's

	for _, tt := range []struct {
		name string
		env  func(string) string
		args []string
		says string
	}{
		{"no subcommand", env, nil, "clients webhooks add"},
		{"unknown subcommand", env, []string{"frobnicate"}, "unknown webhooks command"},
		{"add without --url", env, []string{"add", "--client", client.ID}, "--url is required"},
		{"add without --client", env, []string{"add", "--url", rcv.URL}, "--client is required"},
		{"positional argument", env, []string{"list", client.ID}, "usage"},
		{"http outside dev mode", env, []string{"add", "--client", client.ID, "--url", "http://hooks.example.com/"}, "must use https"},
		{"user info", env, []string{"add", "--client", client.ID, "--url", "https://u:p@hooks.example.com/"}, "user info"},
		{"javascript URL", env, []string{"add", "--client", client.ID, "--url", "javascript:alert(1)"}, "not allowed"},
		{"private address", env, []string{"add", "--client", client.ID, "--url", "https://10.0.0.1/"}, "never connects to"},
		{"cloud metadata", env, []string{"add", "--client", client.ID, "--url", "https://169.254.169.254/latest/meta-data/"}, "never connects to"},
		{"loopback outside dev mode", env, []string{"add", "--client", client.ID, "--url", rcv.URL + "/hooks"}, "never connects to"},
		{"loopback names the allow-list", env, []string{"add", "--client", client.ID, "--url", "https://127.0.0.1:9/"},
			"listed in CONNECTD_EGRESS_ALLOW_HOSTS"},
		{"IPv4-mapped loopback", dev, []string{"add", "--client", client.ID, "--url",
			"https://[::ffff:127.0.0.1]:" + rcvHost[strings.LastIndex(rcvHost, ":")+1:] + "/"}, "never connects to"},
		{"unique-local IPv6", env, []string{"add", "--client", client.ID, "--url", "https://[fd00::1]/"}, "never connects to"},
		{"an address in another spelling", env, []string{"add", "--client", client.ID, "--url", "https://2130706433/"}, "neither an IP address"},
		{"dev-mode http outside the allow-list", dev, []string{"add", "--client", client.ID, "--url", "http://hooks.example.com/"},
			"dev allow-list (CONNECTD_EGRESS_ALLOW_HOSTS"},
		{"dev-mode http to a private address", dev, []string{"add", "--client", client.ID, "--url", "http://10.0.0.1/"}, "dev allow-list"},
		{"unknown event type", env, []string{"add", "--client", client.ID, "--url", "https://hooks.example.com/", "--events", "connection.revoked,nope"}, `"nope"`},
		{"unknown client", env, []string{"add", "--client", "cli_nope", "--url", "https://hooks.example.com/"}, "no such client"},
		{"list of an unknown client", env, []string{"list", "--client", "cli_nope"}, "no such client"},
		{"no vault keys", noKeys, []string{"add", "--client", client.ID, "--url", rcv.URL}, "CONNECTD_VAULT_KEYS"},
		{"bad limit", env, []string{"deliveries", "--endpoint", "we_x", "--limit", "0"}, "--limit"},
		{"unknown endpoint", env, []string{"deliveries", "--endpoint", "we_nope"}, "not found"},
		{"unknown delivery", env, []string{"delivery", "--id", "msg_nope"}, "not found"},
		{"redeliver unknown", env, []string{"redeliver", "--id", "msg_nope"}, "not found"},
		{"remove unknown", env, []string{"remove", "--id", "we_nope"}, "not found"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := wh(tt.env, tt.args...)
			if exitCode(err) != 2 || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("%v (exit %d), want exit 2 saying %q", err, exitCode(err), tt.says)
			}
		})
	}
	if n := count(t, pool, `SELECT count(*) FROM webhook_endpoints`); n != 0 {
		t.Fatalf("refused commands left %d endpoints", n)
	}

	// An allow-listed dev-mode http endpoint is accepted.
	if out, _, err := wh(devOther, "add", "--client", client.ID, "--url", "http://hooks.dev.test:8080/hooks"); err != nil ||
		!strings.HasPrefix(out, "id: we_") {
		t.Fatalf("allow-listed http endpoint in dev mode: %q %v", out, err)
	} else if _, _, err := wh(devOther, "remove", "--id", strings.Fields(out)[1]); err != nil {
		t.Fatal(err)
	}

	out, errOut, err := wh(dev, "add", "--client", client.ID, "--url", rcv.URL+"/hooks", "--events", " connection.revoked , approval.withdrawn")
	m := regexp.MustCompile(`(?m)\Aid: (we_[a-z0-9]+)\nsecret: (whsec_[A-Za-z0-9+/]{43}=)\n\z`).FindStringSubmatch(out)
	if err != nil || m == nil || !strings.Contains(errOut, "shown only now") {
		t.Fatalf("add: %q %q %v", out, errOut, err)
	}
	epID := m[1]
	secret = m[2]
	outputs = outputs[:len(outputs)-2] // the one output that holds the secret
	if _, _, err := wh(dev, "add", "--client", client.ID, "--url", rcv.URL+"/hooks"); exitCode(err) != 2 ||
		!strings.Contains(err.Error(), "already has an endpoint") {
		t.Fatalf("the same URL again: %v", err)
	}
	out, _, err = wh(env, "list", "--client", client.ID)
	if err != nil || !strings.Contains(out, epID) || !strings.Contains(out, rcv.URL+"/hooks") ||
		!strings.Contains(out, "approval.withdrawn,connection.revoked") {
		t.Fatalf("list: %q %v", out, err)
	}

	// A real delivery: an event enqueued as the services do, sent by the
	// delivery worker with the sealed secret.
	keys, err := keyring.Parse(keyLine)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	svc, err := server.NewWebhooks(server.Config{Logger: logger}, pool, keys)
	if err != nil {
		t.Fatal(err)
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return svc.Emit(ctx, tx, webhook.Event{Type: webhook.ConnectionRevoked, Clients: []string{client.ID},
			Data: map[string]any{"connection_id": "cn_test", "by": "admin"}})
	}); err != nil {
		t.Fatal(err)
	}
	var msgID string
	if err := pool.QueryRow(ctx, `SELECT id FROM webhook_deliveries`).Scan(&msgID); err != nil {
		t.Fatal(err)
	}
	worker := webhook.NewWorker(webhook.Config{Pool: pool, Keyring: keys, HTTPClient: rcv.Client(), Logger: logger})
	job := &river.Job[webhook.DeliverArgs]{JobRow: &rivertype.JobRow{Attempt: 1, MaxAttempts: 10},
		Args: webhook.DeliverArgs{DeliveryID: msgID}}
	if err := worker.Work(ctx, job); err != nil || verified.Load() != 1 {
		t.Fatalf("delivery with the printed secret: %v (verified %d)", err, verified.Load())
	}

	out, _, err = wh(env, "deliveries", "--endpoint", epID, "--limit", "5")
	if err != nil || !strings.Contains(out, msgID) || !strings.Contains(out, "delivered") || !strings.Contains(out, "connection.revoked") {
		t.Fatalf("deliveries: %q %v", out, err)
	}
	out, _, err = wh(env, "delivery", "--id", msgID)
	if err != nil || !strings.Contains(out, "cn_test") || !strings.Contains(out, "204") || !regexp.MustCompile(`status:\s+delivered`).MatchString(out) {
		t.Fatalf("delivery: %q %v", out, err)
	}
	jobs := func() int {
		return count(t, pool, `SELECT count(*) FROM river_job WHERE kind = 'webhook_deliver' AND args->>'delivery_id' = $1`, msgID)
	}
	before := jobs()
	if out, _, err = wh(env, "redeliver", "--id", msgID); err != nil || !strings.Contains(out, "queued") {
		t.Fatalf("redeliver: %q %v", out, err)
	}
	if jobs() != before+1 {
		t.Fatal("redeliver queued no job")
	}
	if out, _, err = wh(env, "remove", "--id", epID); err != nil || !strings.Contains(out, "removed "+epID) {
		t.Fatalf("remove: %q %v", out, err)
	}
	if out, _, _ = wh(env, "list", "--client", client.ID); strings.Contains(out, epID) {
		t.Fatalf("list after remove: %q", out)
	}
	if n := count(t, pool, `SELECT count(*) FROM webhook_deliveries`); n != 0 {
		t.Fatalf("remove left %d deliveries", n)
	}

	for kind, n := range map[string]int{"webhook.created": 1, "webhook.redelivered": 1, "webhook.deleted": 1} {
		if got := count(t, pool, `SELECT count(*) FROM audit_events WHERE kind = $1 AND actor = 'cli:ops'`, kind); got != n {
			t.Errorf("%s by cli:ops: %d, want %d", kind, got, n)
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM audit_events WHERE detail::text LIKE '%' || $1 || '%'`, secret[6:]); n != 0 {
		t.Fatal("the secret reached the audit trail")
	}
	for _, o := range outputs {
		if strings.Contains(o, secret[6:]) {
			t.Fatalf("the secret was printed again:\n%s", o)
		}
	}
}

func count(t *testing.T, pool *pgxpool.Pool, q string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
