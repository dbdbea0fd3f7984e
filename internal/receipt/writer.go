package receipt

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of Config.
const (
	DefaultMaxPending = 20_000                 // distinct rows held between flushes
	DefaultFlushEvery = 300 * time.Millisecond // a use is on /account within about that
	// DefaultMergeEvery is how long repeats of a row just written wait to
	// be added to it: a hot use (the same user, client, call and minute
	// many times) is one write per row and period, not one a flush; and a
	// use that goes on into the next minute starts that minute's row
	// without a write of its own (see Record), so a busy line costs one
	// write a minute. "Last used" and a line's count are on /account
	// within that; a new line within FlushEvery.
	DefaultMergeEvery   = time.Minute
	DefaultWriteTimeout = 2 * time.Second // one batch
	maxBackoff          = 5 * time.Second // the longest wait after failed flushes
	batchRows           = 250             // rows per statement (the encoded batch stays with its pool connection until that runs another query: a few hundred KB at most)
	logEvery            = time.Minute     // drops and failed writes: one line per period
	shutdownTimeout     = 5 * time.Second // the last flush
)

// Config configures a Writer.
type Config struct {
	Pool   *pgxpool.Pool // required
	Logger *slog.Logger  // required
	// MaxPending is how many distinct rows (aggregated uses) the Writer
	// holds between flushes, failed ones included (default
	// DefaultMaxPending, some 300 bytes each with the map's slack): a use
	// that finds it full is dropped and counted. As many lines written
	// within MergeEvery are kept (their repeats wait to be merged), at most.
	MaxPending int
	// FlushEvery is the period of Run's writes (default DefaultFlushEvery);
	// WriteTimeout bounds one (default DefaultWriteTimeout).
	FlushEvery, WriteTimeout time.Duration
	// MergeEvery (default DefaultMergeEvery): a use of a line this Writer
	// wrote less than that ago waits until then, or until its minute ends,
	// to be written (added to its minute's row); a use of a line not written
	// lately is written at the next flush.
	MergeEvery time.Duration
	// OnDropped, when set, counts the uses given up on (a full buffer, a
	// row the database refused, what the last flush at shutdown could not
	// write): connectd_receipts_dropped_total.
	OnDropped func(n int)
}

// key is what identical uses share, a line: one row per key and minute
// (the row's bucket, kept in the entry).
type key struct {
	org, issuer, subject, provider, connection, client string
	kind                                               Kind
	method, template                                   string
	status                                             int
}

// entry is what the Writer keeps of a line: the uses not yet written
// (count, the first and last of them, and the minute of the first: the
// row they are added to), and when this Writer last wrote the line. Times
// are Unix nanoseconds: an entry holds no pointer (a time.Time would hold
// its location's) and is kept by value in the map. One entry a line,
// whatever the minutes: a use
// of a later minute while uses of an earlier one wait is added to their
// row (its first and last times stay true; only the row it is counted in
// is the earlier minute's), which happens only in the moments between a
// minute's end and the flush that writes it, or while the database is
// down — when one growing row per line is what should be kept.
type entry struct {
	bucket      int64 // unix minute of the first use waiting
	count       int64
	first, last int64
	wrote       int64 // 0: not written by this Writer (or too long ago to matter)
}

// tally is a row's uses, as a batch writes them.
type tally struct {
	count       int64
	first, last time.Time
}

// Writer aggregates uses in memory and writes them to Postgres in the
// background (Run). Safe for concurrent use; a nil *Writer records nothing.
type Writer struct {
	pool      *pgxpool.Pool
	logger    *slog.Logger
	max       int
	every     time.Duration
	timeout   time.Duration
	onDropped func(int)

	merge time.Duration
	now   func() time.Time

	mu sync.Mutex
	// entries holds, in one map (one hash a use, one copy of each key),
	// the rows waiting to be written (count > 0: at most max of them,
	// waiting) and the rows written within MergeEvery whose repeats wait
	// (at most max more; forgotten first when there are too many: their
	// repeats are then written at the next flush, more writes, nothing
	// lost). A map never gives back the memory of what it held: peak is
	// its largest size since it was last rebuilt (take).
	entries map[key]entry // by value: no allocation, no pointer to follow
	waiting int
	peak    int

	logMu     sync.Mutex
	dropped   int64     // uses dropped since the last line about it
	loggedAt  time.Time // of that line
	failedAt  time.Time // of the last line about a failed write
	failCount int       // failed writes since that line
}

// NewWriter returns a Writer over cfg; Run writes what it records.
func NewWriter(cfg Config) (*Writer, error) {
	if cfg.Pool == nil || cfg.Logger == nil {
		return nil, errors.New("receipt: Pool and Logger are required")
	}
	w := &Writer{pool: cfg.Pool, logger: cfg.Logger, max: cfg.MaxPending, every: cfg.FlushEvery,
		timeout: cfg.WriteTimeout, onDropped: cfg.OnDropped, entries: map[key]entry{}, merge: cfg.MergeEvery,
		now: time.Now}
	if w.merge <= 0 {
		w.merge = DefaultMergeEvery
	}
	if w.max <= 0 {
		w.max = DefaultMaxPending
	}
	if w.every <= 0 {
		w.every = DefaultFlushEvery
	}
	if w.timeout <= 0 {
		w.timeout = DefaultWriteTimeout
	}
	return w, nil
}

// Record counts u for the next flush. It never blocks on the database and
// never fails: with the buffer full (MaxPending distinct rows waiting) the
// use is dropped and counted. A use of a line already held (the same user,
// connection, client, kind, method, template and status) only adds to its
// entry; Record allocates nothing but for the map's growth. A use of an
// unknown kind is ignored.
func (w *Writer) Record(u Use) {
	if w == nil || !u.Kind.known() {
		return
	}
	k := key{org: u.Org, issuer: u.Issuer, subject: u.Subject, provider: u.Provider, connection: u.ConnectionID,
		client: u.ClientID, kind: u.Kind, method: u.Method, template: u.Template, status: u.Status}
	at := u.At.UnixNano()
	w.mu.Lock()
	e, ok := w.entries[k]
	if e.count == 0 {
		if w.waiting >= w.max {
			w.mu.Unlock()
			w.drop(1)
			return
		}
		// A line written lately (wrote) keeps it: this use starts its
		// minute's row as a repeat, written with the rest of that minute
		// (take), not at once.
		e.bucket, e.first, e.last = u.At.Unix()/60, at, at
		w.waiting++
	}
	e.count++
	e.bucket, e.first, e.last = min(e.bucket, u.At.Unix()/60), min(e.first, at), max(e.last, at)
	w.entries[k] = e
	if !ok {
		w.peak = max(w.peak, len(w.entries))
	}
	w.mu.Unlock()
}

// drop counts n uses given up on; Run logs them once per period.
func (w *Writer) drop(n int) {
	if n <= 0 {
		return
	}
	if w.onDropped != nil {
		w.onDropped(n)
	}
	w.logMu.Lock()
	w.dropped += int64(n)
	w.logMu.Unlock()
}

// Pending is how many rows wait to be written.
func (w *Writer) Pending() int {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waiting
}

// take removes and returns what is due: everything when all is set; else
// the rows of lines not written lately (a new line, or one written
// MergeEvery ago or more) and those whose minute is over. The rest waits,
// still counting. It keeps the lines written within MergeEvery (their
// repeats wait), at most max of them, and forgets the others. It returns
// at most limit rows: a batch, so that a flush of many holds one batch at
// a time (the memory of a burst of writes stays that of a batch).
func (w *Writer) take(all bool, limit int) []row {
	now := w.now()
	nowNano, minute, merge := now.UnixNano(), now.Unix()/60, int64(w.merge)
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []row
	idle := 0
	for k, e := range w.entries {
		lately := e.wrote != 0 && nowNano-e.wrote < merge
		if e.count == 0 {
			if !lately || idle >= w.max {
				delete(w.entries, k)
			} else {
				idle++
			}
			continue
		}
		if lately && e.bucket >= minute && !all || len(out) >= limit {
			continue
		}
		out = append(out, row{k, e.bucket, tally{count: e.count, first: time.Unix(0, e.first), last: time.Unix(0, e.last)}})
		e.count = 0
		e.wrote = 0 // until this write succeeds (wrote)
		w.entries[k] = e
		w.waiting--
	}
	if w.peak > 1024 && len(w.entries) < w.peak/4 {
		// Most of the map is gone: copy the rest, so that the memory of a
		// burst does not stay held (the garbage collector would scan it).
		m := make(map[key]entry, len(w.entries))
		for k, e := range w.entries {
			m[k] = e
		}
		w.entries, w.peak = m, len(m)
	}
	return out
}

// wrote notes that rows were written now: their repeats wait MergeEvery.
func (w *Writer) wrote(rows []row) {
	now := w.now().UnixNano()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range rows {
		if e, ok := w.entries[r.key]; ok {
			e.wrote = now
			w.entries[r.key] = e
		}
	}
}

// giveBack returns rows whose write failed, for the next flush, merged with
// what was recorded since; what no longer fits is dropped and counted.
func (w *Writer) giveBack(rows []row) {
	lost := 0
	w.mu.Lock()
	for _, r := range rows {
		e := w.entries[r.key]
		if e.count == 0 {
			if w.waiting >= w.max {
				lost += int(r.count)
				continue
			}
			e.bucket, e.first, e.last = r.bucket, r.first.UnixNano(), r.last.UnixNano()
			w.waiting++
		}
		e.bucket = min(e.bucket, r.bucket)
		e.count += r.count
		e.first, e.last = min(e.first, r.first.UnixNano()), max(e.last, r.last.UnixNano())
		w.entries[r.key] = e
		w.peak = max(w.peak, len(w.entries))
	}
	w.mu.Unlock()
	w.drop(lost)
}

// row is one aggregated row to write: a line's uses, added to its row of
// the minute bucket.
type row struct {
	key
	bucket int64
	tally
}

// rowsOf sorts what take returned in the order of the tables' keys (so
// that concurrent writers on several replicas lock rows in one order, and
// never deadlock), setting aside the rows Postgres could not store (text
// that is not valid UTF-8 or holds a NUL: a user id from a token, say),
// which are dropped and counted.
func (w *Writer) rowsOf(taken []row) []row {
	rows := taken[:0]
	bad := 0
	for _, r := range taken {
		if !storable(r.key) {
			bad += int(r.count)
			continue
		}
		rows = append(rows, r)
	}
	w.drop(bad)
	slices.SortFunc(rows, func(a, b row) int {
		return cmp.Or(strings.Compare(a.issuer, b.issuer), strings.Compare(a.subject, b.subject),
			strings.Compare(a.connection, b.connection), strings.Compare(a.client, b.client),
			strings.Compare(string(a.kind), string(b.kind)), strings.Compare(a.method, b.method),
			strings.Compare(a.template, b.template), cmp.Compare(a.status, b.status), cmp.Compare(a.bucket, b.bucket))
	})
	return rows
}

func storable(k key) bool {
	for _, s := range [...]string{k.org, k.issuer, k.subject, k.provider, k.connection, k.client, k.method, k.template} {
		if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// insertRows writes a batch in one statement and round trip: the columns
// as arrays, unnested; identical keys summed (the conflict target must be
// unique within a statement); receipt_last_uses moved on for the uses of
// the credential. The rows come sorted (rowsOf), and are locked in that
// order.
const insertRows = `WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
		$8::text[], $9::text[], $10::int[], $11::bigint[], $12::bigint[], $13::timestamptz[], $14::timestamptz[])
		WITH ORDINALITY AS t(org_id, issuer, subject, provider, connection_id, client_id, kind, method, template,
			status, bucket, count, first_at, last_at, n)
), receipts_in AS (
	INSERT INTO receipts AS r (org_id, issuer, subject, provider, connection_id, client_id, kind, method, template,
		status, bucket, count, first_at, last_at)
	SELECT max(org_id), issuer, subject, max(provider), connection_id, client_id, kind, method, template, status,
		to_timestamp(bucket * 60), sum(count), min(first_at), max(last_at)
	FROM input GROUP BY issuer, subject, connection_id, client_id, kind, method, template, status, bucket
	ORDER BY min(n)
	ON CONFLICT (issuer, subject, connection_id, client_id, kind, method, template, status, bucket) DO UPDATE
	SET count = r.count + EXCLUDED.count, first_at = least(r.first_at, EXCLUDED.first_at),
		last_at = greatest(r.last_at, EXCLUDED.last_at)
)
INSERT INTO receipt_last_uses AS l (issuer, subject, connection_id, client_id, org_id, provider, last_at)
SELECT issuer, subject, connection_id, client_id, max(org_id), max(provider), max(last_at)
FROM input WHERE kind IN ('proxy', 'token') GROUP BY issuer, subject, connection_id, client_id
ORDER BY min(n)
ON CONFLICT (issuer, subject, connection_id, client_id) DO UPDATE SET last_at = greatest(l.last_at, EXCLUDED.last_at)`

// insert writes rows in one statement, bounded by the write timeout.
func (w *Writer) insert(ctx context.Context, rows []row) error {
	var text [9][]string
	status := make([]int32, 0, len(rows))
	bucket := make([]int64, 0, len(rows))
	count := make([]int64, 0, len(rows))
	first := make([]time.Time, 0, len(rows))
	last := make([]time.Time, 0, len(rows))
	for _, r := range rows {
		for i, v := range [9]string{r.org, r.issuer, r.subject, r.provider, r.connection, r.client, string(r.kind),
			r.method, r.template} {
			text[i] = append(text[i], v)
		}
		status = append(status, int32(r.status))
		bucket = append(bucket, r.bucket)
		count = append(count, r.count)
		first = append(first, r.first)
		last = append(last, r.last)
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	if _, err := w.pool.Exec(ctx, insertRows, text[0], text[1], text[2], text[3], text[4], text[5], text[6], text[7],
		text[8], status, bucket, count, first, last); err != nil {
		return fmt.Errorf("receipt: write %d rows: %w", len(rows), err)
	}
	return nil
}

// refused reports whether err is the database refusing the rows
// themselves (a data exception: a value it cannot store), which no retry
// will write.
func refused(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && strings.HasPrefix(pe.Code, "22")
}

// Flush writes everything waiting, a batch per statement, each on the
// write timeout (ctx's values only: its end does not cut a write short,
// which might have been committed all the same). A batch that fails goes
// back to be written by the next flush (the rest with it), and the error
// is returned; a batch the database refuses as data is dropped and
// counted. Tests and the shutdown call it to write at once; Run's periodic
// flush writes only what is due (take).
func (w *Writer) Flush(ctx context.Context) error {
	if w == nil {
		return nil
	}
	return w.flush(ctx, true)
}

func (w *Writer) flush(ctx context.Context, all bool) error {
	wctx := context.WithoutCancel(ctx)
	// At most what waits now: uses recorded meanwhile are the next flush's
	// (under load this flush would otherwise never end); take at least
	// once, which also forgets what is no longer needed.
	for budget := max(w.Pending(), 1); budget > 0; {
		taken := w.take(all, batchRows)
		if len(taken) == 0 {
			return nil
		}
		budget -= len(taken)
		rows := w.rowsOf(taken)
		if len(rows) == 0 {
			continue
		}
		err := w.insert(wctx, rows)
		switch {
		case err == nil:
			w.wrote(rows)
		case refused(err):
			lost := 0
			for _, r := range rows {
				lost += int(r.count)
			}
			w.drop(lost)
			w.logger.ErrorContext(ctx, "receipts refused by the database, dropped", slog.Int("uses", lost),
				slog.Any("error", err))
		default:
			w.giveBack(rows)
			return err
		}
	}
	return nil
}

// Run writes what is recorded every flush period until ctx ends; after a
// failed flush it waits twice as long as before, up to 5 s (what is
// recorded meanwhile is aggregated, and dropped and counted past
// MaxPending). At the end it writes what is left, on a deadline of its own
// (5 s): what that cannot write is dropped, counted and logged. Drops and
// failed writes are logged once per minute.
func (w *Writer) Run(ctx context.Context) {
	if w == nil {
		return
	}
	wait := w.every
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			w.last(ctx)
			return
		case <-t.C:
		}
		if err := w.flush(ctx, false); err != nil {
			wait = min(2*wait, maxBackoff)
			w.failed(ctx, err)
		} else {
			wait = w.every
		}
		w.logDrops(ctx, false)
		t.Reset(wait)
	}
}

// last is the flush at shutdown.
func (w *Writer) last(ctx context.Context) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := w.Flush(fctx); err != nil {
		lost := 0
		for _, r := range w.take(true, w.max) {
			lost += int(r.count)
		}
		w.drop(lost)
		w.logger.ErrorContext(ctx, "receipts not written before the replica stopped, dropped", slog.Int("uses", lost),
			slog.Any("error", err))
	}
	w.logDrops(ctx, true)
}

// failed logs a failed flush, once per period.
func (w *Writer) failed(ctx context.Context, err error) {
	w.logMu.Lock()
	w.failCount++
	now := time.Now()
	if now.Sub(w.failedAt) < logEvery {
		w.logMu.Unlock()
		return
	}
	n := w.failCount
	w.failedAt, w.failCount = now, 0
	w.logMu.Unlock()
	w.logger.WarnContext(ctx, "receipts not written, will retry", slog.Int("failed_writes", n),
		slog.Int("pending", w.Pending()), slog.Any("error", err))
}

// logDrops logs the uses dropped since the last line, once per period (or
// now, at shutdown).
func (w *Writer) logDrops(ctx context.Context, now bool) {
	w.logMu.Lock()
	if w.dropped == 0 || !now && time.Since(w.loggedAt) < logEvery {
		w.logMu.Unlock()
		return
	}
	n := w.dropped
	w.dropped, w.loggedAt = 0, time.Now()
	w.logMu.Unlock()
	w.logger.WarnContext(ctx, "receipts dropped (buffer full or database unavailable); counted in connectd_receipts_dropped_total",
		slog.Int64("uses", n))
}
