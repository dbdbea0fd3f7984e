package session

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/securecookie"
	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/cache"
)

// A cookie alone cannot be taken back: a copy keeps working until it
// expires. So every session also has a row in browser_sessions, keyed by the
// SHA-256 of its id (the id itself is never stored), and a cookie signs its
// browser in only while that row is live. Ending a session (sign-out, a new
// sign-in in the same browser, or an admin ending all of a user's sessions)
// sets ended_at and sends pg_notify(Channel, hash) in the same statement, so
// the notification commits with the change.
//
// Pages ask "is this session live" on every request, so the answer is cached
// per replica (package cache): filled from the table on a miss, dropped when
// the notification arrives from any replica, and trusted only while the
// process's listener is up (CacheSubscriber). A Store nobody subscribes for
// never caches and asks the table every time.

// Channel is the NOTIFY channel of ended sessions. A payload is the hex
// SHA-256 of the session id (cache.Digest.Payload), or cache.Flush.
const Channel = "connectd_sessions"

const (
	insertSession = `INSERT INTO browser_sessions (id_hash, cookie, issuer, subject, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6)`
	// selectLive reads what Get needs: whether the row is there and not
	// ended, and until when it may be cached.
	selectLive = `SELECT expires_at FROM browser_sessions WHERE id_hash = $1 AND ended_at IS NULL`
	// endSession ends one session and announces it, in one statement: the
	// notification commits with the change, or neither happens.
	endSession = `WITH ended AS (
		UPDATE browser_sessions SET ended_at = $2 WHERE id_hash = $1 AND ended_at IS NULL RETURNING id_hash)
		SELECT pg_notify('` + Channel + `', encode(id_hash, 'hex')) FROM ended`
	// endUserSessions ends every live session of (issuer, subject), one
	// notification per session, in one statement.
	endUserSessions = `WITH ended AS (
		UPDATE browser_sessions SET ended_at = $3
		WHERE issuer = $1 AND subject = $2 AND ended_at IS NULL AND expires_at > $3 RETURNING id_hash)
		SELECT pg_notify('` + Channel + `', encode(id_hash, 'hex')) FROM ended`
	// sweepSessions deletes expired rows a batch at a time; SKIP LOCKED lets
	// every replica sweep at once without waiting on each other. No
	// notification: an expired session is refused by its cookie's own
	// lifetime, and a cached answer never outlives expires_at.
	sweepSessions = `DELETE FROM browser_sessions WHERE id_hash IN (
		SELECT id_hash FROM browser_sessions WHERE expires_at < $1 LIMIT 5000 FOR UPDATE SKIP LOCKED)`
)

// idHash is how a session id is stored, cached and announced.
func idHash(id string) cache.Digest { return cache.Digest(sha256.Sum256([]byte(id))) }

// live reports whether the session id has not ended on the server, from the
// cache when it knows.
func (s *Store) isLive(ctx context.Context, id string) (bool, error) {
	k := idHash(id)
	if live, ok := s.live.Get(k); ok {
		return live, nil
	}
	gen := s.live.Gen()
	var expires time.Time
	err := s.pool.QueryRow(ctx, selectLive, k[:]).Scan(&expires)
	if errors.Is(err, pgx.ErrNoRows) {
		// Ended, swept or never started here: final, so it may be cached
		// too (a copied cookie hammering a page costs no query).
		s.live.Put(k, false, gen, time.Time{})
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("session: check session: %w", err)
	}
	if !s.now().Before(expires) {
		return false, nil
	}
	s.live.Put(k, true, gen, expires)
	return true, nil
}

// record inserts the row of a new session.
func (s *Store) record(ctx context.Context, sess Session) error {
	k := idHash(sess.ID)
	if _, err := s.pool.Exec(ctx, insertSession, k[:], s.name, sess.Issuer, sess.Subject, sess.IssuedAt,
		sess.IssuedAt.Add(s.maxAge)); err != nil {
		return fmt.Errorf("session: record session: %w", err)
	}
	return nil
}

// End signs the browser out everywhere its session cookie went: the cookie
// is cleared in this browser and the session ends on the server, so a copy
// of the cookie stops working on every replica within a second.
func (s *Store) End(ctx context.Context, w http.ResponseWriter, sess Session) error {
	s.Clear(w)
	return s.end(ctx, sess.ID)
}

// EndCarried ends on the server, as End does, the session that r's cookie
// carries, and leaves the cookie to the caller. A sign-in calls it before
// it replaces (Start) or clears the cookie: otherwise the session the
// browser held before — another user's on a shared computer, or its own —
// would go on in every copy of its cookie. It takes any cookie this Store
// can open, idle or ended as it may be: a copy of it may have been used
// since, so this browser's view of the session's idleness does not count
// (a cookie past the session's lifetime opens no more, and its row is
// expired anyway). Without such a cookie it does nothing.
func (s *Store) EndCarried(ctx context.Context, r *http.Request) error {
	c, err := r.Cookie(s.name)
	if err != nil {
		return nil
	}
	var v value
	if securecookie.DecodeMulti(s.name, c.Value, &v, s.session...) != nil {
		return nil // not ours (or only a retired key opens it): no session of ours goes on in it
	}
	return s.end(ctx, v.ID)
}

// end ends the session id on the server and announces it in one statement
// (endSession); this replica forgets it at once, the others when the
// notification arrives.
func (s *Store) end(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	k := idHash(id)
	rows, err := s.pool.Query(ctx, endSession, k[:], s.now())
	if err == nil {
		rows.Close()
		err = rows.Err()
	}
	s.live.Delete(k)
	if err != nil {
		return fmt.Errorf("session: end session: %w", err)
	}
	return nil
}

// Querier is what EndUser runs its statement on: a pool, or a transaction
// the caller commits together with its audit record.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// EndUser ends every live browser session (end user's and admin's) of
// (issuer, subject) through q and returns how many it ended. Each ended
// session is announced on Channel in the same statement, so every replica's
// cache forgets it once q's transaction commits.
func EndUser(ctx context.Context, q Querier, issuer, subject string, now time.Time) (int, error) {
	if issuer == "" || subject == "" {
		return 0, errors.New("session: EndUser needs an issuer and a subject")
	}
	rows, err := q.Query(ctx, endUserSessions, issuer, subject, now)
	if err != nil {
		return 0, fmt.Errorf("session: end sessions: %w", err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("session: end sessions: %w", err)
	}
	return n, nil
}

// Sweep deletes sessions past their absolute lifetime and returns how many.
// It is safe to run on every replica at once.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	cutoff := s.now()
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, sweepSessions, cutoff)
		if err != nil {
			return total, fmt.Errorf("session: sweep: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < 5000 {
			return total, nil
		}
	}
}

// CacheSubscriber is what the process's notification listener needs to keep
// this Store's cache of live sessions fresh (see package cache). It is strict:
// unlike the credential and consent caches, which keep answering within
// their TTL while the listener is down, the live-session cache is emptied the
// moment the feed drops, so a sign-out or an admin's "end sessions" on
// another replica takes effect here within about a second whatever the
// fault (DESIGN invariant 12).
func (s *Store) CacheSubscriber() cache.Subscriber {
	return cache.SubscribeStrict(Channel, s.live)
}

// CacheStats reports the live-session cache's counters (zero when disabled).
func (s *Store) CacheStats() cache.Stats { return s.live.Stats() }
