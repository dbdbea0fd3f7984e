package connect_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/internal/pgtest"
)

// freezingTracer is the pool's tracer (db.Configure's) that, once armed,
// freezes the database's proxy as the next INSERT of an elicitation
// starts: its bytes are held until Restore, as by a Postgres under SIGSTOP.
type freezingTracer struct {
	inner  pgx.QueryTracer
	arm    *atomic.Bool
	freeze func()
}

func (f *freezingTracer) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "INSERT INTO elicitations") && f.arm.CompareAndSwap(true, false) {
		f.freeze()
	}
	return f.inner.TraceQueryStart(ctx, c, d)
}

func (f *freezingTracer) TraceQueryEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryEndData) {
	f.inner.TraceQueryEnd(ctx, c, d)
}

// TestMintStoredButAnswered503 (issue 35): a mint whose INSERT reached a
// frozen database is answered 503 database_unavailable once its statement
// deadline passes, yet the database stores it when it continues — two of
// 58 such mints in the outside fault study. A retry of the same request
// (same client, user, provider, scopes and request_digest), on any replica,
// gets that elicitation (200), not a second link: what docs/api.md tells
// clients to rely on.
func TestMintStoredButAnswered503(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	// A replica whose database freezes as its mint's INSERT is sent.
	proxy, url := pgtest.NewProxy(t, e.pool.Config().ConnString())
	freezeOnInsert := &atomic.Bool{}
	pool := pgtest.NewPoolWith(t, url, func(pc *pgxpool.Config) {
		pc.MaxConns = 2
		pc.ConnConfig.Tracer = &freezingTracer{inner: pc.ConnConfig.Tracer.(pgx.QueryTracer), arm: freezeOnInsert, freeze: proxy.Freeze}
	})
	cfg := e.cfg
	cfg.Pool, cfg.Logger = pool, slog.New(slog.NewJSONHandler(e.logs, nil))
	cfg.DB = db.Deadlines{Acquire: 300 * time.Millisecond, Query: 700 * time.Millisecond}
	_, base := e.replica(cfg)
	body := func(digest string) map[string]any {
		return map[string]any{"provider": "fake", "scopes": []string{"read"}, "request_digest": digest}
	}
	// A mint on the replica first (its pool dialed).
	for i := 0; ; i++ {
		st, _, raw := m.send(base, http.MethodPost, "/v1/elicitations", m.token("alice"), body("warm"))
		if st == http.StatusCreated {
			break
		}
		if i == 4 {
			t.Fatalf("mint before the fault: %d %s", st, raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	tok := m.token("alice")
	freezeOnInsert.Store(true)
	st, out, raw := m.send(base, http.MethodPost, "/v1/elicitations", tok, body("d-lost"))
	if st != http.StatusServiceUnavailable || out["error"] != "database_unavailable" {
		proxy.Restore()
		t.Fatalf("mint, database frozen: %d %s", st, raw)
	}
	proxy.Restore() // the held INSERT reaches Postgres, which commits it

	var id string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := e.pool.QueryRow(context.Background(),
			`SELECT id FROM elicitations WHERE request_digest = 'd-lost' AND status = 'pending'`).Scan(&id)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mint sent to the frozen database was not stored: %v", err)
		}
	}
	// The client retries the same request, here on the other replica.
	st, again := m.call(http.MethodPost, "/v1/elicitations", "alice", body("d-lost"))
	if st != http.StatusOK || again["elicitation_id"] != id {
		t.Fatalf("retry of the mint answered 503: %d %v, want 200 with the stored %s", st, again, id)
	}
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM elicitations WHERE request_digest = 'd-lost'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d elicitations for the request (%v), want the one stored", n, err)
	}
}
