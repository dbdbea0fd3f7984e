package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/server"
)

// TestHandlersAndRun: Public is behind the production middleware (request
// ids, security headers, the cross-origin check), Internal serves probes and
// metrics, and Run starts the process's notification hub and returns once
// ctx ends.
func TestHandlersAndRun(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	u, _ := url.Parse("http://localhost:8080")
	// Dev mode: ephemeral vault and session keys, no issuers.
	s, err := server.New(context.Background(), server.Config{Dev: true, PublicURL: u, Pool: pool,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	pub := httptest.NewServer(s.Public())
	t.Cleanup(pub.Close)
	internal := httptest.NewServer(s.Internal())
	t.Cleanup(internal.Close)

	resp, err := http.Get(pub.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Request-Id") == "" || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("public /healthz: %d %v", resp.StatusCode, resp.Header)
	}
	req, _ := http.NewRequest(http.MethodPost, pub.URL+"/logout", strings.NewReader(""))
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "came from another site") {
		t.Fatalf("cross-site POST /logout: %d %s", resp.StatusCode, body)
	}
	if resp, err = http.Get(internal.URL + "/metrics"); err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "connectd_http_request_duration_seconds") ||
		!strings.Contains(string(body), "connectd_receipts_dropped_total 0") {
		t.Fatalf("internal /metrics: %d %s", resp.StatusCode, body)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1`, cache.ListenerApplicationName).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d notification listeners after Run, want 1", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// TestReceiptsRetention: the receipts retention sweep (the hourly
// receipts_retention job) deletes the receipts last seen before
// CONNECTD_RECEIPTS_RETENTION, and only those.
func TestReceiptsRetention(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	u, _ := url.Parse("http://localhost:8080")
	now := time.Now().UTC().Truncate(time.Second)
	s, err := server.New(context.Background(), server.Config{Dev: true, PublicURL: u, Pool: pool,
		Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return now },
		Connect: server.ConnectConfig{ReceiptsRetention: 30 * 24 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx := context.Background()
	for i, age := range []time.Duration{31 * 24 * time.Hour, 29 * 24 * time.Hour, 0} {
		at := now.Add(-age)
		if _, err := pool.Exec(ctx, `INSERT INTO receipts (org_id, issuer, subject, provider, connection_id, client_id,
			kind, method, template, status, bucket, count, first_at, last_at)
			VALUES ('default', 'https://idp.example', 'alice', 'fake', 'cn_a', $1, 'token', '', '', 0, $2, 1, $2, $2)`,
			fmt.Sprint("cli_", i), at); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.SweepReceipts(ctx)
	if err != nil || n != 1 {
		t.Fatalf("swept %d (%v), want 1", n, err)
	}
	var left []string
	rows, err := pool.Query(ctx, `SELECT client_id FROM receipts ORDER BY client_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		left = append(left, c)
	}
	if strings.Join(left, ",") != "cli_1,cli_2" {
		t.Fatalf("left %v, want the two within the retention", left)
	}
}
