// Package ratebudget keeps providers' rate limits for the callers of
// connectd's proxy (issue 35), across replicas: a template's documented
// limits (provider.RateLimit, per user or per provider app) and what the
// provider's own answers say (proxy.SpentUntil). When a budget is spent the
// proxy answers 429 with Retry-After itself, without calling the provider.
//
// What is shared, and how (the warm path stays in memory):
//
//   - A limit's window is counted in Postgres (rate_budget_windows, fixed
//     windows of Per), but a replica claims calls in chunks (a fiftieth of
//     the limit, at least one) with one upsert and spends them from memory:
//     a call costs a database round trip only once a chunk. A replica never
//     spends more than it claimed, so the replicas together never pass the
//     limit; what a replica claimed and did not use is lost for the window
//     (at most a chunk per replica, the price of not counting every call in
//     the database).
//   - A provider's "spent until T" (a 429's Retry-After, X-RateLimit-
//     Remaining: 0 with its reset) is written to rate_budget_holds and sent
//     to every replica on the hub (NOTIFY ratebudget): each keeps the holds
//     in memory and reads a key's hold from the table once (a replica that
//     started after it was opened), again after the hub's feed was down, and
//     on every call while the feed is down. What a replica knows is never
//     forgotten for what the table says: a hold it heard of (its own
//     provider's answer, one it read or was told of) holds while the
//     database cannot be read, and after an outage in which its write to
//     the table failed.
//
// Per user within an app: a provider's hold is per (provider, app,
// connection), since its answer was to that user's token; a per-app limit
// is counted for the app and, so that one busy user does not starve a quiet
// one, each connection may spend at most half of it (UserShare).
//
// A database that cannot be reached fails open, but for the holds this
// replica knows: the call is made (the provider still keeps its own
// limits), and a warning is logged.
package ratebudget

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/proxy"
)

// Channel is the hub channel a provider's hold is announced on; the payload
// is "<unix milliseconds> <key>".
const Channel = "ratebudget"

// UserShare is the part of a per-app limit one connection may spend.
const UserShare = 2 // 1/UserShare

// chunks is how many chunks a limit's window is claimed in, at most.
const chunks = 50

// maxKeys bounds the in-memory maps (leases, holds): past it they are
// cleared, which only costs claims and reads again.
const maxKeys = 100_000

// Config configures a Store.
type Config struct {
	Pool   *pgxpool.Pool
	Now    func() time.Time
	Logger *slog.Logger
	// OnRemaining, when set, is told what is left of a provider app's
	// budget: source "provider" (the provider's own count, its last
	// answer's) or "connectd" (the app's tightest per-app window, as this
	// replica last claimed it). It feeds a gauge labelled by provider and
	// app, never by user.
	OnRemaining func(provider, app, source string, remaining int)
}

// Store keeps the budgets. It is safe for concurrent use; a nil *Store
// budgets nothing.
type Store struct {
	cfg    Config
	mu     sync.Mutex
	live   bool
	leases map[string]lease     // window key → this replica's claimed, unspent calls
	spent  map[string]time.Time // window key → the window this replica found spent, its end
	holds  map[string]hold      // hold key → the provider's end, as this replica knows it
	// gen counts the hub's feed coming back (and payloads not understood):
	// a hold known from an earlier gen is read from the table once more.
	gen uint64
}

// hold is a provider's end for one key (zero: read, none) and the gen it
// was last read from the table or told in.
type hold struct {
	until time.Time
	gen   uint64
}

type lease struct {
	window time.Time
	left   int
}

// New returns a Store.
func New(cfg Config) *Store {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.OnRemaining == nil {
		cfg.OnRemaining = func(string, string, string, int) {}
	}
	return &Store{cfg: cfg, leases: map[string]lease{}, spent: map[string]time.Time{}, holds: map[string]hold{}}
}

// CacheSubscriber is the Store's hub subscriber (the holds of other
// replicas).
func (s *Store) CacheSubscriber() cache.Subscriber {
	return cache.Subscriber{Channel: Channel, Invalidate: s.notified, SetLive: func(live bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.live = live
		if live { // what was sent while nobody listened is read again (what is known stays)
			s.gen++
		}
	}}
}

func (s *Store) notified(payload string) {
	ms, key, ok := strings.Cut(payload, " ")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil {
		s.mu.Lock()
		s.gen++ // not understood: read them again
		s.mu.Unlock()
		return
	}
	_, _, gen := s.known(key)
	s.setHold(key, time.UnixMilli(n), gen)
}

// setHold records that key is held until until (as of gen), keeping a
// later end it knew: a hold is only ever extended (spentSQL's greatest).
func (s *Store) setHold(key string, until time.Time, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.holds) > maxKeys {
		clear(s.holds)
	}
	cur := s.holds[key]
	s.holds[key] = hold{until: later(cur.until, until), gen: max(cur.gen, gen)}
}

// known is key's hold as this replica knows it, and the current gen.
func (s *Store) known(key string) (h hold, ok bool, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok = s.holds[key]
	return h, ok, s.gen
}

// For is the budget of one proxied call: to provider with the provider app
// app ("" the deployment's), for connection user, to path below the API
// base, under limits. It is nil (nothing budgeted) for a nil Store.
func (s *Store) For(providerName, app, user, path string, limits []provider.RateLimit) proxy.Budget {
	if s == nil {
		return nil
	}
	return &budget{s: s, provider: providerName, app: app, user: user, path: path, limits: limits}
}

type budget struct {
	s                         *Store
	provider, app, user, path string
	limits                    []provider.RateLimit
}

// window is one limit's count a call spends of.
type window struct {
	key      string
	requests int
	per      time.Duration
	app      bool // the app's own count (the gauge's)
}

func (b *budget) holdKey() string { return b.provider + "\x1f" + b.app + "\x1f" + b.user }

func (b *budget) windows() []window {
	var out []window
	for _, l := range b.limits {
		if !l.Matches(b.path) {
			continue
		}
		id := fmt.Sprintf("%s:%d/%d:%s", l.Scope, l.Requests, int64(l.Per/time.Second), l.Path)
		if m := l.Method(b.path); m != "" {
			id += ":" + m
		}
		switch l.Scope {
		case provider.PerUser:
			out = append(out, window{key: b.holdKey() + "\x1f" + id, requests: l.Requests, per: l.Per})
		case provider.PerApp:
			out = append(out,
				window{key: b.provider + "\x1f" + b.app + "\x1f\x1f" + id, requests: l.Requests, per: l.Per, app: true},
				window{key: b.holdKey() + "\x1f" + "share:" + id, requests: max(1, (l.Requests+UserShare-1)/UserShare), per: l.Per})
		}
	}
	return out
}

// Take spends one call of every window the call counts in, or answers
// until when the first spent one is spent (the provider's hold, or the
// end of a window).
func (b *budget) Take(ctx context.Context) (time.Time, error) {
	s := b.s
	now := s.cfg.Now()
	if until, err := s.held(ctx, b.holdKey(), now); err != nil {
		s.cfg.Logger.WarnContext(ctx, "ratebudget: a provider's hold could not be read; the call is made",
			slog.String("provider", b.provider), slog.Any("error", err))
	} else if !until.IsZero() {
		return until, nil
	}
	ws := b.windows()
	if len(ws) == 0 {
		return time.Time{}, nil
	}
	var claim []window
	var spentUntil time.Time
	s.mu.Lock()
	for _, w := range ws {
		start := now.Truncate(w.per)
		if end, ok := s.spent[w.key]; ok && now.Before(end) {
			spentUntil = later(spentUntil, end)
			continue
		}
		if l, ok := s.leases[w.key]; ok && l.window.Equal(start) && l.left > 0 {
			l.left--
			s.leases[w.key] = l
			continue
		}
		claim = append(claim, w)
	}
	s.mu.Unlock()
	if !spentUntil.IsZero() {
		return spentUntil, nil
	}
	if len(claim) == 0 {
		return time.Time{}, nil
	}
	until, err := s.claim(ctx, b, claim, now)
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "ratebudget: the budget could not be claimed; the call is made",
			slog.String("provider", b.provider), slog.Any("error", err))
		return time.Time{}, nil
	}
	return until, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func chunkOf(requests int) int { return max(1, requests/chunks) }

const claimSQL = `INSERT INTO rate_budget_windows AS w (key, window_start, used)
SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::bigint[])
ON CONFLICT (key) DO UPDATE SET
    used = CASE WHEN w.window_start >= EXCLUDED.window_start THEN w.used + EXCLUDED.used ELSE EXCLUDED.used END,
    window_start = greatest(w.window_start, EXCLUDED.window_start)
RETURNING key, used, window_start`

// claim claims a chunk of each of ws's current windows with one upsert
// and spends one call of each; a window already spent is remembered until
// its end, which is the answer.
func (s *Store) claim(ctx context.Context, b *budget, ws []window, now time.Time) (time.Time, error) {
	slices.SortFunc(ws, func(a, b window) int { return strings.Compare(a.key, b.key) }) // rows locked in one order
	keys, starts, n := make([]string, len(ws)), make([]time.Time, len(ws)), make([]int64, len(ws))
	byKey := map[string]window{}
	for i, w := range ws {
		keys[i], starts[i], n[i] = w.key, now.Truncate(w.per), int64(chunkOf(w.requests))
		byKey[w.key] = w
	}
	rows, err := s.cfg.Pool.Query(ctx, claimSQL, keys, starts, n)
	if err != nil {
		return time.Time{}, fmt.Errorf("ratebudget: claim: %w", err)
	}
	type got struct {
		key   string
		used  int64
		start time.Time
	}
	var answers []got
	for rows.Next() {
		var g got
		if err := rows.Scan(&g.key, &g.used, &g.start); err != nil {
			rows.Close()
			return time.Time{}, fmt.Errorf("ratebudget: claim: %w", err)
		}
		answers = append(answers, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return time.Time{}, fmt.Errorf("ratebudget: claim: %w", err)
	}
	var until time.Time
	appLeft := -1
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.leases) > maxKeys {
		clear(s.leases)
	}
	if len(s.spent) > maxKeys {
		clear(s.spent)
	}
	for _, g := range answers {
		w := byKey[g.key]
		chunk := int64(chunkOf(w.requests))
		before := g.used - chunk // what others had claimed
		granted := min(chunk, int64(w.requests)-before)
		if w.app {
			left := int(max(0, int64(w.requests)-g.used))
			if appLeft < 0 || left < appLeft {
				appLeft = left
			}
		}
		if granted <= 0 {
			end := g.start.Add(w.per)
			s.spent[g.key] = end
			until = later(until, end)
			continue
		}
		s.leases[g.key] = lease{window: g.start, left: int(granted) - 1}
	}
	if appLeft >= 0 {
		s.cfg.OnRemaining(b.provider, b.app, "connectd", appLeft)
	}
	return until, nil
}

const heldSQL = `SELECT until FROM rate_budget_holds WHERE key = $1`

// held answers key's hold: from memory while the hub's feed is live (the
// table read once per key, and once more after the feed was down), from
// the table and memory while it is not; from memory alone when the table
// cannot be read.
func (s *Store) held(ctx context.Context, key string, now time.Time) (time.Time, error) {
	h, known, gen := s.known(key)
	s.mu.Lock()
	live := s.live
	s.mu.Unlock()
	until := h.until
	if !known || !live || h.gen != gen {
		var t time.Time
		err := s.cfg.Pool.QueryRow(ctx, heldSQL, key).Scan(&t)
		switch {
		case err == nil:
		case isNoRows(err):
			t = time.Time{}
		case until.After(now):
			return until, nil // the table cannot be read: what this replica knows holds
		default:
			return time.Time{}, fmt.Errorf("ratebudget: hold: %w", err)
		}
		if live {
			s.setHold(key, t, gen)
		}
		until = later(until, t)
	}
	if until.After(now) {
		return until, nil
	}
	return time.Time{}, nil
}

const spentSQL = `WITH h AS (
    INSERT INTO rate_budget_holds AS h (key, until) VALUES ($1, $2)
    ON CONFLICT (key) DO UPDATE SET until = greatest(h.until, EXCLUDED.until)
    RETURNING key, until)
SELECT pg_notify('` + Channel + `', (floor(extract(epoch FROM until) * 1000))::bigint::text || ' ' || key) FROM h`

// spentTimeout bounds the write of a provider's hold (made while its
// answer is being relayed).
const spentTimeout = 2 * time.Second

// Spent opens the provider's hold for this call's connection on every
// replica.
func (b *budget) Spent(until time.Time) {
	s := b.s
	key := b.holdKey()
	h, ok, gen := s.known(key)
	if ok { // what the table holds besides is still to be read, if it was
		gen = h.gen
	}
	s.setHold(key, until, gen)
	ctx, cancel := context.WithTimeout(context.Background(), spentTimeout)
	defer cancel()
	if _, err := s.cfg.Pool.Exec(ctx, spentSQL, key, until); err != nil {
		s.cfg.Logger.Warn("ratebudget: a provider's hold could not be shared; this replica keeps it",
			slog.String("provider", b.provider), slog.Any("error", err))
	}
}

// Remaining reports the provider's own count (n < 0: its answer had none).
func (b *budget) Remaining(n int) {
	if n >= 0 {
		b.s.cfg.OnRemaining(b.provider, b.app, "provider", n)
	}
}

const sweepSQL = `WITH a AS (DELETE FROM rate_budget_holds WHERE until < $1)
DELETE FROM rate_budget_windows WHERE window_start < $2`

// Sweep deletes the holds that ended and the windows older than a day
// (the longest Per), which nothing reads again.
func (s *Store) Sweep(ctx context.Context) error {
	now := s.cfg.Now()
	if _, err := s.cfg.Pool.Exec(ctx, sweepSQL, now, now.Add(-25*time.Hour)); err != nil {
		return fmt.Errorf("ratebudget: sweep: %w", err)
	}
	return nil
}
