package receipt_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/receipt"
	"github.com/connectd/connectd/internal/testkit"
)

func TestTemplate(t *testing.T) {
	long := strings.Repeat("a", 33)
	for _, tt := range []struct{ path, want string }{
		{"/user/repos", "/user/repos"},
		{"user/repos", "/user/repos"},
		{"/repos/octo/hello/issues/42", "/repos/octo/hello/issues/*"},
		{"/repos/octo/hello/issues?state=open&page=2", "/repos/octo/hello/issues"},
		{"/files/abc#frag", "/files/abc"},
		{"/v1/messages", "/*/messages"}, // a digit: an id or a version alike
		{"/a%2Fb/c", "/*/c"},            // an escape holds digits
		{"/gists/" + long, "/gists/*"},
		{"/gists/" + strings.Repeat("a", 32), "/gists/" + strings.Repeat("a", 32)},
		{"/users/2026-12-02/events", "/users/*/events"},
		{"/", "/"},
		{"", "/"},
		{"/a//b/", "/a//b/"},
		{"/x\x00y/z", "/*/z"},
		{"/\xff/z", "/*/z"},
		{"/" + strings.Repeat("seg/", 200), "/" + strings.Repeat("seg/", 127) + "…"},
	} {
		if got := receipt.Template(tt.path); got != tt.want {
			t.Errorf("Template(%q) = %q, want %q", tt.path, got, tt.want)
		}
		if got := receipt.Template(tt.path); len(got) > receipt.MaxTemplate {
			t.Errorf("Template(%q) is %d bytes", tt.path, len(got))
		}
	}
	if n := testing.AllocsPerRun(100, func() { receipt.Template("/user/repos") }); n != 0 {
		t.Errorf("a path that needs no change allocates %v times", n)
	}
}

// downPool is a pool on a database that does not answer (nothing listens
// on the port): every write fails at once.
func downPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), "postgres://connectd@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func use(client string, kind receipt.Kind, status int, at time.Time) receipt.Use {
	u := receipt.Use{Org: "default", Issuer: "https://idp.example", Subject: "alice", Provider: "fake",
		ConnectionID: "cn_alice", ClientID: client, Kind: kind, At: at}
	if kind != receipt.KindToken {
		u.Method, u.Template, u.Status = "GET", "/files", status
	}
	return u
}

// TestRecordNeverBlocksWhenFull: with a buffer of two rows, a third distinct
// use is dropped and counted at once, identical uses still add to their
// row, and while the database is down a flush gives its rows back (merged
// with what came meanwhile) and drops what no longer fits — Record never
// waits for any of it.
func TestRecordNeverBlocksWhenFull(t *testing.T) {
	t.Parallel()
	var dropped atomic.Int64
	logs := &testkit.LogBuffer{}
	w, err := receipt.NewWriter(receipt.Config{Pool: downPool(t), Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		MaxPending: 2, WriteTimeout: time.Second, OnDropped: func(n int) { dropped.Add(int64(n)) }})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	w.Record(use("cli_a", receipt.KindToken, 0, now))
	w.Record(use("cli_a", receipt.KindProxy, 200, now))
	start := time.Now()
	for range 1000 {
		w.Record(use("cli_b", receipt.KindToken, 0, now)) // a third row: no room
		w.Record(use("cli_a", receipt.KindToken, 0, now)) // identical to the first: counted
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("2000 Records with a full buffer took %s", d)
	}
	if dropped.Load() != 1000 || w.Pending() != 2 {
		t.Fatalf("dropped %d, pending %d; want 1000 dropped, 2 pending", dropped.Load(), w.Pending())
	}
	var unknown receipt.Kind = "nonsense"
	w.Record(receipt.Use{Kind: unknown}) // ignored, not counted
	if dropped.Load() != 1000 {
		t.Fatal("a use of an unknown kind was counted")
	}

	// The database is down: the flush fails and gives both rows back,
	// which still fit; a new distinct use then finds the buffer full (the
	// database down longer than the buffer holds) and is dropped.
	if err := w.Flush(context.Background()); err == nil {
		t.Fatal("a flush to a database that is down succeeded")
	}
	if w.Pending() != 2 || dropped.Load() != 1000 {
		t.Fatalf("after the failed flush: %d pending, %d dropped; want 2 and 1000", w.Pending(), dropped.Load())
	}
	w.Record(use("cli_c", receipt.KindToken, 0, now))
	if dropped.Load() != 1001 {
		t.Fatalf("dropped %d, want 1001", dropped.Load())
	}

	// A nil Writer is a no-op.
	var none *receipt.Writer
	none.Record(use("cli_a", receipt.KindToken, 0, now))
	if err := none.Flush(context.Background()); err != nil || none.Pending() != 0 {
		t.Fatal("a nil Writer did something")
	}

	// Run's last flush at shutdown drops and logs what it cannot write.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := dropped.Load()
	w.Run(ctx)
	if dropped.Load() == before || w.Pending() != 0 {
		t.Fatalf("the last flush dropped %d, left %d", dropped.Load()-before, w.Pending())
	}
	if !strings.Contains(logs.String(), "receipts dropped") {
		t.Fatalf("the drops were not logged:\n%s", logs.String())
	}
}

func newWriter(t *testing.T, pool *pgxpool.Pool) *receipt.Writer {
	t.Helper()
	w, err := receipt.NewWriter(receipt.Config{Pool: pool, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

var alice = identity.User{Issuer: "https://idp.example", Subject: "alice"}

// TestFlushAggregates: a thousand identical token reads are one row with
// their count and first and last time; proxied calls with another status
// are another row; a second flush adds to the same minute's row; "Last
// used" follows the uses of the credential (not the approvals); another
// user, naming alice's connection, reads nothing.
func TestFlushAggregates(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	w := newWriter(t, pool)
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Minute).Add(10 * time.Second)
	for i := range 1000 {
		w.Record(use("cli_a", receipt.KindToken, 0, base.Add(time.Duration(i)*time.Millisecond)))
	}
	w.Record(use("cli_b", receipt.KindProxy, 200, base))
	w.Record(use("cli_b", receipt.KindProxy, 404, base.Add(time.Second)))
	later := base.Add(20 * time.Second)
	w.Record(use("cli_c", receipt.KindApprovalAsked, 0, later))
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	w.Record(use("cli_a", receipt.KindToken, 0, base.Add(5*time.Second)))
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM receipts`).Scan(&rows); err != nil || rows != 4 {
		t.Fatalf("%d rows (%v), want 4", rows, err)
	}
	recent, err := receipt.Recent(ctx, pool, alice, []string{"cn_alice"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]receipt.Receipt{}
	for _, r := range recent["cn_alice"] {
		got[r.ClientID+" "+string(r.Kind)+" "+r.Template] = r
	}
	tok := got["cli_a token "]
	if tok.Count != 1001 || !tok.First.Equal(base) || !tok.Last.Equal(base.Add(5*time.Second)) {
		t.Fatalf("token row %+v, want 1001 from %s to %s", tok, base, base.Add(5*time.Second))
	}
	if len(recent["cn_alice"]) != 4 || recent["cn_alice"][0].Kind != receipt.KindApprovalAsked {
		t.Fatalf("recent: %+v, want 4 rows, the approval first", recent["cn_alice"])
	}
	last, err := receipt.LastUses(ctx, pool, alice)
	if err != nil {
		t.Fatal(err)
	}
	if len(last) != 2 || !last[receipt.Pair{ConnectionID: "cn_alice", ClientID: "cli_a"}].Equal(base.Add(5*time.Second)) ||
		!last[receipt.Pair{ConnectionID: "cn_alice", ClientID: "cli_b"}].Equal(base.Add(time.Second)) {
		t.Fatalf("last uses %v", last)
	}

	bob := identity.User{Issuer: alice.Issuer, Subject: "bob"}
	other := identity.User{Issuer: "https://other.example", Subject: "alice"} // the same subject at another issuer
	for _, u := range []identity.User{bob, other} {
		if r, err := receipt.Recent(ctx, pool, u, []string{"cn_alice"}, 10); err != nil || len(r) != 0 {
			t.Fatalf("%v reads alice's receipts by her connection id: %v %v", u, r, err)
		}
		if r, _, err := receipt.All(ctx, pool, u, 10); err != nil || len(r) != 0 {
			t.Fatalf("%v downloads alice's receipts: %v %v", u, r, err)
		}
		if l, err := receipt.LastUses(ctx, pool, u); err != nil || len(l) != 0 {
			t.Fatalf("%v reads alice's last uses: %v %v", u, l, err)
		}
	}
	all, more, err := receipt.All(ctx, pool, alice, 3)
	if err != nil || len(all) != 3 || !more {
		t.Fatalf("All(3): %d rows, more %v, %v", len(all), more, err)
	}
}

// TestSweepDeletesOldRowsOnly: the retention sweep deletes the receipts and
// last uses last seen before its cut, and nothing newer.
func TestSweepDeletesOldRowsOnly(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	w := newWriter(t, pool)
	ctx := context.Background()
	now := time.Now().UTC()
	old := now.Add(-100 * 24 * time.Hour)
	w.Record(use("cli_old", receipt.KindToken, 0, old))
	w.Record(use("cli_old", receipt.KindProxy, 200, old))
	w.Record(use("cli_new", receipt.KindToken, 0, now))
	w.Record(use("cli_new", receipt.KindProxy, 200, now.Add(-89*24*time.Hour)))
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := receipt.Sweep(ctx, pool, now.Add(-receipt.DefaultRetention))
	if err != nil || n != 3 { // two receipts and one last use of cli_old
		t.Fatalf("swept %d (%v), want 3", n, err)
	}
	all, _, err := receipt.All(ctx, pool, alice, 10)
	if err != nil || len(all) != 2 || all[0].ClientID != "cli_new" || all[1].ClientID != "cli_new" {
		t.Fatalf("left: %+v %v", all, err)
	}
	last, err := receipt.LastUses(ctx, pool, alice)
	if err != nil || len(last) != 1 {
		t.Fatalf("last uses left: %v %v", last, err)
	}
}

// BenchmarkRecord is the hot path's cost: the same use again (a hot token
// read) and, in parallel, several callers' uses.
func BenchmarkRecord(b *testing.B) {
	w, err := receipt.NewWriter(receipt.Config{Pool: downPool(b), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	u := use("cli_a", receipt.KindToken, 0, time.Now())
	b.Run("same", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w.Record(u)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			v := u
			for pb.Next() {
				w.Record(v)
			}
		})
	})
	b.Run("proxy", func(b *testing.B) {
		b.ReportAllocs()
		p := use("cli_a", receipt.KindProxy, 200, time.Now())
		for b.Loop() {
			p.Template = receipt.Template("/repos/octo/hello/issues/42")
			w.Record(p)
		}
	})
}

// TestRepeatsWaitToBeMerged: Run's periodic flush writes a new row at once
// but holds the repeats of a row it wrote less than MergeEvery ago (a hot
// token read is one write per row and period, not one per flush), and
// writes them once due — or all of them on Flush (the shutdown's).
func TestRepeatsWaitToBeMerged(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	w, err := receipt.NewWriter(receipt.Config{Pool: pool, Logger: slog.New(slog.DiscardHandler), MergeEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := time.Now().UTC().Add(2 * time.Minute) // a minute that is not over while the test runs
	count := func(client string) int64 {
		t.Helper()
		var n int64
		if err := pool.QueryRow(ctx, `SELECT coalesce(sum(count), 0) FROM receipts WHERE client_id = $1`, client).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	w.Record(use("cli_a", receipt.KindToken, 0, at))
	if err := w.FlushDue(ctx); err != nil || count("cli_a") != 1 {
		t.Fatalf("a new row is not written at once: %d %v", count("cli_a"), err)
	}
	for range 5 {
		w.Record(use("cli_a", receipt.KindToken, 0, at))
	}
	w.Record(use("cli_b", receipt.KindToken, 0, at))
	if err := w.FlushDue(ctx); err != nil {
		t.Fatal(err)
	}
	if count("cli_a") != 1 || count("cli_b") != 1 || w.Pending() != 1 {
		t.Fatalf("after a periodic flush: cli_a %d (want 1: its repeats wait), cli_b %d (want 1), %d waiting",
			count("cli_a"), count("cli_b"), w.Pending())
	}
	if err := w.Flush(ctx); err != nil || count("cli_a") != 6 || w.Pending() != 0 {
		t.Fatalf("Flush wrote cli_a %d, want 6 (%v), %d waiting", count("cli_a"), err, w.Pending())
	}
}

// TestMemoryIsBounded: what the Writer keeps is at most MaxPending rows
// waiting and MaxPending written lately; a written row is forgotten once
// its repeats no longer wait (MergeEvery later), and its next use is then a
// new row, written at the next flush.
func TestMemoryIsBounded(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	var dropped atomic.Int64
	w, err := receipt.NewWriter(receipt.Config{Pool: pool, Logger: slog.New(slog.DiscardHandler), MaxPending: 10,
		MergeEvery: time.Minute, OnDropped: func(n int) { dropped.Add(int64(n)) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Minute).Add(10 * time.Second)
	w.SetNow(func() time.Time { return now })
	record := func(prefix string, n int) {
		for i := range n {
			w.Record(use(fmt.Sprintf("%s%02d", prefix, i), receipt.KindProxy, 200, now))
		}
	}
	record("cli_a", 30) // ten fit, twenty are dropped
	if w.Pending() != 10 || dropped.Load() != 20 {
		t.Fatalf("%d waiting, %d dropped; want 10 and 20", w.Pending(), dropped.Load())
	}
	if err := w.FlushDue(ctx); err != nil {
		t.Fatal(err)
	}
	record("cli_b", 10) // ten more rows wait beside the ten written
	if w.Pending() != 10 || w.Held() != 20 {
		t.Fatalf("%d waiting, %d held; want 10 and 20", w.Pending(), w.Held())
	}
	record("cli_a", 10) // repeats of rows just written wait to be merged, but the waiting rows are full
	if dropped.Load() != 30 {
		t.Fatalf("dropped %d, want 30", dropped.Load())
	}
	if err := w.FlushDue(ctx); err != nil {
		t.Fatal(err)
	}
	if w.Pending() != 0 || w.Held() != 20 {
		t.Fatalf("after the flush %d waiting, %d held; want 0 and 20", w.Pending(), w.Held())
	}
	now = now.Add(time.Minute + 5*time.Second) // past MergeEvery, and into the next minute
	if err := w.FlushDue(ctx); err != nil || w.Held() != 0 {
		t.Fatalf("written rows not forgotten: %d held (%v)", w.Held(), err)
	}
	var n int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(count), 0) FROM receipts`).Scan(&n); err != nil || n != 20 {
		t.Fatalf("%d uses written, want 20 (%v)", n, err)
	}
}

// TestNextMinuteIsARepeat: a use that goes on into the next minute starts
// that minute's row without a write of its own — a busy line is one write a
// minute — and the row is written once its minute is over; a use of a line
// not written lately is written at once.
func TestNextMinuteIsARepeat(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	w := newWriter(t, pool) // the default MergeEvery, a minute
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Minute).Add(50 * time.Second)
	w.SetNow(func() time.Time { return now })
	rows := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM receipts`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	w.Record(use("cli_a", receipt.KindProxy, 200, now))
	if err := w.FlushDue(ctx); err != nil || rows() != 1 {
		t.Fatalf("a new line is not written at once: %d rows (%v)", rows(), err)
	}
	now = now.Add(20 * time.Second) // the next minute
	w.Record(use("cli_a", receipt.KindProxy, 200, now))
	w.Record(use("cli_b", receipt.KindProxy, 200, now)) // a line not written lately
	if err := w.FlushDue(ctx); err != nil || rows() != 2 || w.Pending() != 1 {
		t.Fatalf("%d rows, %d waiting (%v); want cli_b written and cli_a's next minute waiting", rows(), w.Pending(), err)
	}
	now = now.Add(time.Minute) // that minute is over
	if err := w.FlushDue(ctx); err != nil || rows() != 3 || w.Pending() != 0 {
		t.Fatalf("%d rows, %d waiting (%v); want the minute's row written", rows(), w.Pending(), err)
	}
}

// TestOneEntryALine: while the database is down a busy line is one entry
// and one growing row, whatever the minutes, with its true first and last
// times; nothing is dropped while it fits.
func TestOneEntryALine(t *testing.T) {
	t.Parallel()
	var dropped atomic.Int64
	w, err := receipt.NewWriter(receipt.Config{Pool: downPool(t), Logger: slog.New(slog.DiscardHandler), MaxPending: 1,
		WriteTimeout: time.Second, OnDropped: func(n int) { dropped.Add(int64(n)) }})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Minute)
	for i := range 5 { // five minutes of uses, a failed flush after each
		w.SetNow(func() time.Time { return now.Add(time.Duration(i) * time.Minute) })
		w.Record(use("cli_a", receipt.KindProxy, 200, now.Add(time.Duration(i)*time.Minute)))
		if err := w.FlushDue(context.Background()); err == nil {
			t.Fatal("a flush to a database that is down succeeded")
		}
	}
	if w.Held() != 1 || w.Pending() != 1 || dropped.Load() != 0 {
		t.Fatalf("%d held, %d waiting, %d dropped; want one line waiting, nothing dropped", w.Held(), w.Pending(), dropped.Load())
	}
}
