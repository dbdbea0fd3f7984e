package webhook_test

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/webhook"
)

// hooks is the webhook service with a running River client on a fresh
// database, a registered MCP server (client) and a receiver over TLS whose
// answers the test scripts.
type hooks struct {
	t      *testing.T
	pool   *pgxpool.Pool
	svc    *webhook.Service
	client string
	rcv    *scripted
	addr   string // the receiver's 127.0.0.1:port
}

// scripted is a receiver: it verifies each request with the Standard
// Webhooks library and answers with the next scripted status (204 when the
// script is used up).
type scripted struct {
	mu       sync.Mutex
	wh       *standardwebhooks.Webhook
	script   []int
	requests []request
}

type request struct {
	id, body string
	at       time.Time
	verified bool
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, request{id: r.Header.Get("webhook-id"), body: string(body), at: time.Now(),
		verified: s.wh != nil && s.wh.Verify(body, r.Header) == nil})
	code := http.StatusNoContent
	if len(s.script) > 0 {
		code, s.script = s.script[0], s.script[1:]
	}
	w.WriteHeader(code)
}

func (s *scripted) seen() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]request(nil), s.requests...)
}

func newHooks(t *testing.T, backoff ...time.Duration) *hooks {
	t.Helper()
	return newHooksWith(t, func(cfg *webhook.Config, _ *egress.Config) { cfg.Backoff = backoff })
}

// newHooksWith is newHooks with its configuration adjusted by update before
// anything is built: the webhook Config, and the egress Config of its
// delivery client (the production client, allow-listing the receiver's
// 127.0.0.1:port and trusting its certificate).
func newHooksWith(t *testing.T, update func(*webhook.Config, *egress.Config)) *hooks {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &hooks{t: t, pool: pgtest.Pool(t), rcv: &scripted{}}
	srv := httptest.NewTLSServer(h.rcv)
	t.Cleanup(srv.Close)
	h.addr = srv.Listener.Addr().String()
	line, _ := keyring.GenerateKey(1)
	keys, err := keyring.Parse(line)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	ec := egress.Config{AllowHosts: []string{h.addr}, RootCAs: roots}
	cfg := webhook.Config{Pool: h.pool, Keyring: keys}
	update(&cfg, &ec)
	if cfg.HTTPClient, err = egress.New(ec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cfg.HTTPClient.CloseIdleConnections)
	workers := river.NewWorkers()
	river.AddWorker(workers, webhook.NewWorker(cfg))
	rc, err := river.NewClient(riverpgxv5.New(h.pool), &river.Config{Workers: workers,
		Queues: map[string]river.QueueConfig{webhook.Queue: {MaxWorkers: 2}}, FetchPollInterval: 50 * time.Millisecond,
		FetchCooldown: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-rc.Stopped() })
	if h.svc, err = webhook.NewService(cfg, rc); err != nil {
		t.Fatal(err)
	}
	cl, _, err := clientauth.NewClients(clientauth.ClientsConfig{Pool: h.pool}).Create(ctx, "Files", []string{"https://files.mcp.example/"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.client = cl.ID
	ep, secret, err := h.svc.Create(ctx, h.client, srv.URL+"/hooks", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, "whsec_") || ep.ID == "" {
		t.Fatalf("endpoint %+v, secret %q", ep, secret)
	}
	if h.rcv.wh, err = standardwebhooks.NewWebhook(secret); err != nil {
		t.Fatal(err)
	}
	return h
}

// emit reports one event for the client in its own transaction, committed
// or (commit false) rolled back.
func (h *hooks) emit(commit bool) {
	h.t.Helper()
	ctx := context.Background()
	tx, err := h.pool.Begin(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	u := identity.User{Issuer: "https://idp.example", Subject: "alice"}
	if err := h.svc.Emit(ctx, tx, webhook.ApprovalEvent(h.client, u, "github", "cn_"+strings.Repeat("a", 26), "user")); err != nil {
		h.t.Fatal(err)
	}
	if commit {
		if err := tx.Commit(ctx); err != nil {
			h.t.Fatal(err)
		}
	}
}

// deliveryOf waits until the only delivery has status want, and returns it
// with its attempts.
func (h *hooks) deliveryOf(want string) webhook.Delivery {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var id string
		err := h.pool.QueryRow(context.Background(), `SELECT id FROM webhook_deliveries`).Scan(&id)
		if err == nil {
			d, err := h.svc.Delivery(context.Background(), id)
			if err != nil {
				h.t.Fatal(err)
			}
			if d.Status == want {
				return d
			}
		} else if !errors.Is(err, pgx.ErrNoRows) {
			h.t.Fatal(err)
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no delivery reached %s", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *hooks) count(table string) int {
	h.t.Helper()
	var n int
	if err := h.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// TestRetriedWithBackoff: a receiver that fails twice gets the same signed
// delivery (the same webhook-id) a third time, each retry after at least
// its backoff, and every attempt is on record.
func TestRetriedWithBackoff(t *testing.T) {
	t.Parallel()
	backoff := []time.Duration{300 * time.Millisecond, 900 * time.Millisecond, time.Minute}
	h := newHooks(t, backoff...)
	h.rcv.script = []int{http.StatusInternalServerError, http.StatusBadGateway}
	h.emit(true)
	d := h.deliveryOf("delivered")
	reqs := h.rcv.seen()
	if len(reqs) != 3 || d.Attempts != 3 || len(d.Tries) != 3 {
		t.Fatalf("%d requests, delivery %+v", len(reqs), d)
	}
	for i, r := range reqs {
		if !r.verified || r.id != d.ID {
			t.Fatalf("request %d: verified %v, webhook-id %q (delivery %s)", i, r.verified, r.id, d.ID)
		}
		if i > 0 && r.at.Sub(reqs[i-1].at) < backoff[i-1] {
			t.Fatalf("retry %d came %v after the previous attempt, before its backoff %v", i, r.at.Sub(reqs[i-1].at), backoff[i-1])
		}
	}
	for i, want := range []int{500, 502, 204} {
		if d.Tries[i].StatusCode != want || d.Tries[i].N != i+1 {
			t.Fatalf("attempt %d: %+v", i+1, d.Tries[i])
		}
	}
	if d.Tries[0].Error != "http_5xx" || d.Tries[2].Error != "" {
		t.Fatalf("attempt errors: %+v", d.Tries)
	}
}

// TestGivesUpThenRedelivered: out of attempts, a delivery is failed; a
// redelivery sends it again, with the same webhook-id.
func TestGivesUpThenRedelivered(t *testing.T) {
	t.Parallel()
	h := newHooks(t, 100*time.Millisecond)
	h.rcv.script = []int{500, 500}
	h.emit(true)
	d := h.deliveryOf("failed")
	if d.Attempts != 2 || d.NextAttemptAt != nil {
		t.Fatalf("after the last attempt: %+v", d)
	}
	if err := h.svc.Redeliver(context.Background(), d.ID); err != nil {
		t.Fatal(err)
	}
	d = h.deliveryOf("delivered")
	if reqs := h.rcv.seen(); len(reqs) != 3 || reqs[2].id != d.ID || !reqs[2].verified || d.Attempts != 3 {
		t.Fatalf("redelivery: %+v %+v", reqs, d)
	}
	if err := h.svc.Redeliver(context.Background(), "msg_nosuch"); !errors.Is(err, webhook.ErrNotFound) {
		t.Fatalf("redeliver unknown: %v", err)
	}
}

// TestEnqueuedWithTheChange: an event emitted in a transaction that rolls
// back leaves no delivery and no job; committed, exactly one of each.
func TestEnqueuedWithTheChange(t *testing.T) {
	t.Parallel()
	h := newHooks(t)
	h.emit(false)
	if h.count("webhook_deliveries") != 0 || h.count("river_job") != 0 {
		t.Fatal("a rolled-back change left a delivery or a job")
	}
	h.emit(true)
	h.deliveryOf("delivered")
	if h.count("webhook_deliveries") != 1 || h.count("river_job") != 1 || len(h.rcv.seen()) != 1 {
		t.Fatalf("one committed event: %d deliveries, %d jobs, %d requests", h.count("webhook_deliveries"),
			h.count("river_job"), len(h.rcv.seen()))
	}
}

// TestEndpointRules: endpoint URLs follow the egress rule (https, a host, no
// user info or fragment), event types must exist, one URL per client, and
// the secret is shown once: nothing that lists endpoints carries it.
func TestEndpointRules(t *testing.T) {
	t.Parallel()
	h := newHooks(t)
	ctx := context.Background()
	for _, bad := range []string{"http://hooks.example/x", "javascript:alert(1)", "https://user:pw@hooks.example/x",
		"https://hooks.example/x#frag", "ftp://hooks.example/x", "/relative", "https://" + strings.Repeat("a", 2050) + ".example/"} {
		if _, _, err := h.svc.Create(ctx, h.client, bad, nil); !errors.Is(err, webhook.ErrInvalid) {
			t.Errorf("url %.60q: %v, want ErrInvalid", bad, err)
		}
	}
	if _, _, err := h.svc.Create(ctx, h.client, "https://hooks.example/x", []string{"connection.exploded"}); !errors.Is(err, webhook.ErrInvalid) {
		t.Errorf("unknown event type: %v", err)
	}
	if _, _, err := h.svc.Create(ctx, "cli_nosuchclient", "https://hooks.example/x", nil); !errors.Is(err, webhook.ErrNotFound) {
		t.Errorf("unknown client: %v", err)
	}
	if _, _, err := h.svc.Create(ctx, "../etc", "https://hooks.example/x", nil); !errors.Is(err, webhook.ErrInvalid) {
		t.Errorf("malformed client: %v", err)
	}
	eps, err := h.svc.Endpoints(ctx, h.client)
	if err != nil || len(eps) != 1 {
		t.Fatalf("endpoints: %+v %v", eps, err)
	}
	if _, _, err := h.svc.Create(ctx, h.client, eps[0].URL, nil); !errors.Is(err, webhook.ErrExists) {
		t.Errorf("same URL twice: %v", err)
	}
	ep, _, err := h.svc.Create(ctx, h.client, "https://hooks.example/only-revoked", []string{webhook.ConnectionRevoked})
	if err != nil || ep.Wants(webhook.ApprovalWithdrawn) || !ep.Wants(webhook.ConnectionRevoked) {
		t.Fatalf("filtered endpoint: %+v %v", ep, err)
	}
	var sealed []byte
	if err := h.pool.QueryRow(ctx, `SELECT secret FROM webhook_endpoints WHERE id = $1`, ep.ID).Scan(&sealed); err != nil ||
		strings.Contains(string(sealed), "whsec_") {
		t.Fatalf("the secret is stored in clear: %v", err)
	}
	if err := h.svc.Delete(ctx, ep.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.svc.Delete(ctx, ep.ID); !errors.Is(err, webhook.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
}

// TestHostileEndpointsRefused: an endpoint URL is refused at registration
// when its delivery would be refused without a DNS answer — an IP address in
// a range the egress guard refuses (whatever its spelling), a host that is
// an IP address in another spelling, a port no dial accepts — with
// ErrInvalid, as every other URL rule, and the egress error it comes from.
// A name is accepted (its address is checked at every dial), and so is the
// allow-listed receiver and a public address.
func TestHostileEndpointsRefused(t *testing.T) {
	t.Parallel()
	h := newHooks(t)
	ctx := context.Background()
	_, port, _ := strings.Cut(h.addr, ":")
	for _, bad := range []string{
		"https://10.0.0.1/",
		"https://169.254.169.254/latest/meta-data/",
		"https://172.16.0.1/x",
		"https://192.168.1.1:8443/x",
		"https://100.64.0.1/x",         // CGNAT
		"https://224.0.0.1/x",          // multicast
		"https://255.255.255.255/x",    // broadcast
		"https://0.0.0.0/x",            // unspecified
		"https://[::]/x",               // unspecified
		"https://127.0.0.1/x",          // loopback, not the allow-listed port
		"https://127.0.0.2:" + port,    // loopback, not the allow-listed address
		"https://[::1]:" + port + "/x", // loopback
		"https://[::ffff:127.0.0.1]:" + port + "/x",
		"https://[::ffff:10.0.0.1]/x",
		"https://[::ffff:8.8.8.8]/x", // IPv4-mapped: refused as such, whatever it maps
		"https://[fe80::1]/x",
		"https://[fe80::1%25eth0]/x",
		"https://[fd00::1]/x",
		"https://[64:ff9b::7f00:1]/x", // NAT64 of loopback
		"https://[2002:7f00:1::1]/x",  // 6to4 of loopback
		"https://10.0.0.1./x",         // a trailing dot
		"https://2130706433/x",        // 127.0.0.1 to inet_aton
		"https://0x7f000001/x",
		"https://0x7f.1/x",
		"https://0177.0.0.1/x",
		"https://127.1/x",
		"https://hooks.example:0/x",
		"https://hooks.example:65536/x",
	} {
		t.Run(bad, func(t *testing.T) {
			_, _, err := h.svc.Create(ctx, h.client, bad, nil)
			if !errors.Is(err, webhook.ErrInvalid) || !errors.Is(err, egress.ErrBlockedAddress) {
				t.Fatalf("%v, want ErrInvalid from egress.ErrBlockedAddress", err)
			}
			if d, _ := problem.Description(err); !strings.HasPrefix(d, "url ") {
				t.Fatalf("description %q does not say what is wrong with the url", d)
			}
		})
	}
	for _, good := range []string{"https://127.0.0.1:" + port + "/other", "https://localhost/x", "https://hooks.example:8443/x",
		"https://93.184.215.14/x", "https://[2606:4700:4700::1111]/x", "https://hooks.example./x", "https://1.example/x"} {
		if _, _, err := h.svc.Create(ctx, h.client, good, nil); err != nil {
			t.Errorf("%s: %v", good, err)
		}
	}
}

// TestDevModeEndpoints: in dev mode http:// endpoints are accepted only for
// the host:port pairs of the egress allow-list — the rule the delivery
// client applies — and an allow-listed private address is still refused.
func TestDevModeEndpoints(t *testing.T) {
	t.Parallel()
	h := newHooksWith(t, func(cfg *webhook.Config, ec *egress.Config) {
		cfg.AllowHTTP = true
		ec.AllowHosts = append(ec.AllowHosts, "hooks.dev.test:8080", "10.0.0.5:80")
	})
	ctx := context.Background()
	for _, tt := range []struct {
		url  string
		want error // nil: accepted
	}{
		{"http://hooks.dev.test:8080/x", nil},
		{"http://HOOKS.dev.test:8080/y", nil},
		{"http://" + h.addr + "/x", nil},
		{"https://hooks.other.test/x", nil},
		{"http://hooks.other.test/x", egress.ErrInsecureScheme},
		{"http://hooks.dev.test/x", egress.ErrInsecureScheme},
		{"http://hooks.dev.test:8081/x", egress.ErrInsecureScheme},
		{"http://10.0.0.1/x", egress.ErrInsecureScheme},
		{"http://10.0.0.5/x", egress.ErrBlockedAddress},
	} {
		t.Run(tt.url, func(t *testing.T) {
			_, _, err := h.svc.Create(ctx, h.client, tt.url, nil)
			if tt.want == nil && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tt.want != nil && (!errors.Is(err, webhook.ErrInvalid) || !errors.Is(err, tt.want)) {
				t.Fatalf("%v, want ErrInvalid from %v", err, tt.want)
			}
		})
	}
}

// addressPattern finds an IPv4 address, an IPv6 one or a port in a text.
var addressPattern = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+|[0-9a-f]*::[0-9a-f]*|:\d+|localhost|\[`)

// TestBlockedAttemptRecordsClass: a delivery the egress guard refuses (a
// name resolving to loopback, or an endpoint registered before the
// registration rule, on a private or metadata address) is recorded as
// blocked_address — never the dial error with the resolved address and
// port — and retried like any failure.
func TestBlockedAttemptRecordsClass(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		register bool // through Create; otherwise written as an older row
		url      func(port string) string
	}{
		{"a name resolving to loopback", true, func(port string) string { return "https://localhost:" + port + "/hooks" }},
		{"cloud metadata, registered earlier", false, func(string) string { return "https://169.254.169.254/latest" }},
		{"private address, registered earlier", false, func(string) string { return "https://10.0.0.1:8443/hooks" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHooks(t, 50*time.Millisecond)
			ctx := context.Background()
			_, port, _ := strings.Cut(h.addr, ":")
			u := tt.url(port)
			if tt.register {
				old, err := h.svc.Endpoints(ctx, h.client)
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := h.svc.Create(ctx, h.client, u, nil); err != nil {
					t.Fatal(err)
				}
				if err := h.svc.Delete(ctx, old[0].ID); err != nil {
					t.Fatal(err)
				}
			} else if _, err := h.pool.Exec(ctx, `UPDATE webhook_endpoints SET url = $1`, u); err != nil {
				t.Fatal(err)
			}
			h.emit(true)
			d := h.deliveryOf("failed")
			if len(d.Tries) != 2 || len(h.rcv.seen()) != 0 {
				t.Fatalf("delivery %+v, %d requests", d, len(h.rcv.seen()))
			}
			for _, a := range d.Tries {
				if a.Error != "blocked_address" || a.StatusCode != 0 {
					t.Errorf("attempt %d: %+v, want error blocked_address", a.N, a)
				}
				if m := addressPattern.FindString(a.Error); m != "" {
					t.Errorf("attempt %d's error %q names an address or port (%q)", a.N, a.Error, m)
				}
			}
			var stored string
			if err := h.pool.QueryRow(ctx, `SELECT string_agg(error, ' ') FROM webhook_attempts`).Scan(&stored); err != nil ||
				strings.Contains(stored, port) || strings.Contains(stored, "127.0.0.1") || addressPattern.MatchString(stored) {
				t.Fatalf("stored attempt errors %q (%v)", stored, err)
			}
			var jobErrors string
			if err := h.pool.QueryRow(ctx, `SELECT coalesce(errors::text, '') FROM river_job`).Scan(&jobErrors); err != nil ||
				strings.Contains(jobErrors, "127.0.0.1") || strings.Contains(jobErrors, "10.0.0.1") || strings.Contains(jobErrors, "169.254") {
				t.Fatalf("River's record of the job names the address: %q (%v)", jobErrors, err)
			}
		})
	}
}

// TestSecretThatDoesNotOpenFailsOnRecord: a secret the configured keys no
// longer open (a key removed before `vault rewrap`) fails the delivery at
// once, with an attempt that says why, instead of leaving it pending.
func TestSecretThatDoesNotOpenFailsOnRecord(t *testing.T) {
	t.Parallel()
	h := newHooks(t)
	other, _ := keyring.GenerateKey(7)
	keys, err := keyring.Parse(other)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := keys.Seal([]byte("whsec_c2VjcmV0"), nil) // under a key connectd does not hold
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.pool.Exec(context.Background(), `UPDATE webhook_endpoints SET secret = $1, key_version = 7`, sealed); err != nil {
		t.Fatal(err)
	}
	h.emit(true)
	d := h.deliveryOf("failed")
	if len(d.Tries) != 1 || d.Tries[0].Error != "secret_does_not_open" || len(h.rcv.seen()) != 0 {
		t.Fatalf("delivery %+v, %d requests", d, len(h.rcv.seen()))
	}
}
