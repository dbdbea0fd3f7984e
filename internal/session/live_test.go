package session_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/testkit"
)

// cachingStore is newStore with the live-session cache on, kept fresh by a
// listener of its own as connect's hub does in production.
func cachingStore(t *testing.T, clk *testkit.Clock, keys ...session.Key) *session.Store {
	t.Helper()
	s, err := session.New(session.Config{Pool: poolOf(t), Keys: keys, Now: clk.Now, CacheTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	pgtest.Listen(t, poolOf(t), s.CacheSubscriber())
	return s
}

// signIn starts a session of subject at s and returns it with its cookie.
func signIn(t *testing.T, s *session.Store, subject string) (session.Session, string) {
	t.Helper()
	w := httptest.NewRecorder()
	sess, err := s.Start(t.Context(), w, "https://idp.example", subject)
	if err != nil {
		t.Fatal(err)
	}
	return sess, setCookie(t, w, session.CookieName)
}

// TestEndedSessionIsRefusedEverywhere: a session ended on one replica (sign
// out) is refused by a copy of its cookie on that replica and, within a
// second, on another replica whose cache had already said "live" — long
// before that cache's one-hour TTL. Other sessions of the same user and of
// others keep working.
func TestEndedSessionIsRefusedEverywhere(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock(time.Now())
	key := session.NewKey()
	r1, r2 := cachingStore(t, clk, key), cachingStore(t, clk, key)
	alice, cookie := signIn(t, r1, "alice")
	_, otherTab := signIn(t, r1, "alice")
	_, bobs := signIn(t, r1, "bob")
	waitCached(t, r2, cookie)

	w := httptest.NewRecorder()
	if err := r1.End(t.Context(), w, alice); err != nil {
		t.Fatal(err)
	}
	if c := setCookie(t, w, session.CookieName); !strings.Contains(c, "Max-Age=0") {
		t.Fatalf("End did not clear the cookie: %s", c)
	}
	if _, err := r1.Get(request(cookie)); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("the copied cookie still works where it was ended: %v", err)
	}
	deadline := time.Now().Add(time.Second)
	for {
		_, err := r2.Get(request(cookie))
		if errors.Is(err, session.ErrNoSession) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other replica still accepts the ended session a second later: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, c := range []string{otherTab, bobs} {
		if _, err := r2.Get(request(c)); err != nil {
			t.Fatalf("another session ended too: %v", err)
		}
	}
	// Load (the page path) refuses it as well, and so does a fresh store.
	if _, err := r2.Load(httptest.NewRecorder(), request(cookie)); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("Load: %v", err)
	}
	if _, err := newStore(t, clk, key).Get(request(cookie)); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("uncached store: %v", err)
	}
}

// TestLoginEndsTheCarriedSessionEverywhere: a sign-in ends the session the
// browser's cookie carried (EndCarried, then Start), so a copy of that
// cookie is refused on the replica of the sign-in and, within a second, on
// another replica whose cache had already said "live" — whether the browser
// now belongs to bob or to alice again. It counts even when this browser's
// copy has gone idle while another copy kept the session in use, and it
// ends only its own cookie's session: not the user's other sessions, not a
// session under another cookie name.
func TestLoginEndsTheCarriedSessionEverywhere(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, next string
		idle       bool // this browser's cookie is past the idle timeout; the thief's copy is not
	}{
		{"as bob", "bob", false},
		{"as alice again", "alice", false},
		{"with an idle cookie", "bob", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := testkit.NewClock(time.Now())
			key := session.NewKey()
			r1, r2 := cachingStore(t, clk, key), cachingStore(t, clk, key)
			_, browser := signIn(t, r1, "alice")
			thief := browser
			_, otherTab := signIn(t, r1, "alice")
			if tc.idle {
				// The thief keeps using the session, so the copy's LastSeen moves on.
				clk.Advance(50 * time.Minute)
				w := httptest.NewRecorder()
				if _, err := r2.Load(w, request(thief)); err != nil {
					t.Fatal(err)
				}
				thief = setCookie(t, w, session.CookieName)
				clk.Advance(20 * time.Minute)
				if _, err := r1.Get(request(browser)); !errors.Is(err, session.ErrNoSession) {
					t.Fatalf("the browser's own cookie is not idle: %v", err)
				}
				_, otherTab = signIn(t, r1, "alice")
			}
			waitCached(t, r2, thief)
			admins, err := session.New(session.Config{Pool: poolOf(t), Keys: []session.Key{key}, Now: clk.Now,
				Name: "__Host-test_admin", BindingName: "__Host-test_admin_binding"})
			if err != nil {
				t.Fatal(err)
			}
			w := httptest.NewRecorder()
			if _, err := admins.Start(t.Context(), w, "https://idp.example", "alice"); err != nil {
				t.Fatal(err)
			}
			adminCookie := setCookie(t, w, "__Host-test_admin")

			// The same browser signs in again, carrying alice's cookies.
			login := request(browser, adminCookie)
			if err := r1.EndCarried(t.Context(), login); err != nil {
				t.Fatal(err)
			}
			w = httptest.NewRecorder()
			if _, err := r1.Start(t.Context(), w, "https://idp.example", tc.next); err != nil {
				t.Fatal(err)
			}
			fresh := setCookie(t, w, session.CookieName)

			if _, err := r1.Get(request(thief)); !errors.Is(err, session.ErrNoSession) {
				t.Fatalf("the copied cookie still works where the browser signed in again: %v", err)
			}
			deadline := time.Now().Add(time.Second)
			for {
				_, err := r2.Get(request(thief))
				if errors.Is(err, session.ErrNoSession) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the other replica still accepts the copied cookie a second after the sign-in: %v", err)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if s, err := r2.Get(request(fresh)); err != nil || s.Subject != tc.next {
				t.Fatalf("the new session: %+v %v", s, err)
			}
			if _, err := r2.Get(request(otherTab)); err != nil {
				t.Fatalf("alice's session in another browser ended too: %v", err)
			}
			if _, err := admins.Get(request(adminCookie)); err != nil {
				t.Fatalf("the session under the other cookie name ended too: %v", err)
			}
		})
	}
	// Without a cookie, or with one this Store cannot open, there is nothing
	// to end.
	s := newStore(t, testkit.NewClock(time.Now()), session.NewKey())
	_, foreign := signIn(t, newStore(t, testkit.NewClock(time.Now()), session.NewKey()), "mallory")
	for _, r := range []*http.Request{request(), request(foreign)} {
		if err := s.EndCarried(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
}

// waitCached reads the cookie's session at s until s answers from its cache
// (its listener is up and the answer "live" is held).
func waitCached(t *testing.T, s *session.Store, cookie string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		before := s.CacheStats().Hits
		if _, err := s.Get(request(cookie)); err != nil {
			t.Fatal(err)
		}
		if s.CacheStats().Hits > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the store does not answer from its cache")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestEndUser: ending all sessions of (issuer, subject) ends each of that
// user's sessions, end-user and admin cookie alike, on every replica, and no
// one else's: not another subject's, not the same subject's at another
// issuer.
func TestEndUser(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock(time.Now())
	key := session.NewKey()
	users, other := cachingStore(t, clk, key), cachingStore(t, clk, key)
	admins, err := session.New(session.Config{Pool: poolOf(t), Keys: []session.Key{key}, Now: clk.Now,
		Name: "__Host-test_admin", BindingName: "__Host-test_admin_binding"})
	if err != nil {
		t.Fatal(err)
	}
	_, a1 := signIn(t, users, "alice")
	_, a2 := signIn(t, users, "alice")
	w := httptest.NewRecorder()
	if _, err := admins.Start(t.Context(), w, "https://idp.example", "alice"); err != nil {
		t.Fatal(err)
	}
	aAdmin := setCookie(t, w, "__Host-test_admin")
	_, b := signIn(t, users, "bob")
	w = httptest.NewRecorder()
	if _, err := users.Start(t.Context(), w, "https://other-idp.example", "alice"); err != nil {
		t.Fatal(err)
	}
	elsewhere := setCookie(t, w, session.CookieName)
	waitCached(t, other, a1)

	n, err := session.EndUser(t.Context(), poolOf(t), "https://idp.example", "alice", clk.Now())
	if err != nil || n != 3 {
		t.Fatalf("EndUser = %d, %v; want 3 sessions", n, err)
	}
	deadline := time.Now().Add(time.Second)
	for _, c := range []string{a1, a2} {
		for {
			_, err := other.Get(request(c))
			if errors.Is(err, session.ErrNoSession) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("alice's session still works on the other replica a second later: %v", err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if _, err := admins.Get(request(aAdmin)); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("alice's admin session survived: %v", err)
	}
	for name, c := range map[string]string{"bob": b, "alice at another issuer": elsewhere} {
		if _, err := other.Get(request(c)); err != nil {
			t.Fatalf("%s was signed out: %v", name, err)
		}
	}
	if n, err := session.EndUser(t.Context(), poolOf(t), "https://idp.example", "alice", clk.Now()); err != nil || n != 0 {
		t.Fatalf("ending again = %d, %v", n, err)
	}
	if _, err := session.EndUser(t.Context(), poolOf(t), "", "alice", clk.Now()); err == nil {
		t.Fatal("EndUser without an issuer ended something")
	}
}

// TestSessionIDNeverStored: the table holds the SHA-256 of a session id,
// never the id, in any column or encoding.
func TestSessionIDNeverStored(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock(time.Now())
	s := newStore(t, clk, session.NewKey())
	sess, _ := signIn(t, s, "alice")
	var rows []string
	r, err := poolOf(t).Query(context.Background(), `SELECT t::text, encode(id_hash, 'hex'), encode(id_hash, 'base64')
		FROM browser_sessions t`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var a, b, c string
		if err := r.Scan(&a, &b, &c); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, a, b, c)
	}
	if err := r.Err(); err != nil || len(rows) != 3 {
		t.Fatalf("rows %v, %v", rows, err)
	}
	for _, row := range rows {
		if strings.Contains(row, sess.ID) {
			t.Fatalf("the session id is stored in clear: %s", row)
		}
	}
	var n int
	h := sha256.Sum256([]byte(sess.ID))
	if err := poolOf(t).QueryRow(context.Background(), `SELECT count(*) FROM browser_sessions WHERE id_hash = $1`,
		h[:]).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the session is not stored by its hash: %d %v", n, err)
	}
}

// TestSweep: rows past their lifetime are deleted; live ones stay.
func TestSweep(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock(time.Now())
	s := newStore(t, clk, session.NewKey())
	signIn(t, s, "alice")
	clk.Advance(11 * time.Hour)
	young, _ := signIn(t, s, "bob")
	clk.Advance(2 * time.Hour)
	if n, err := s.Sweep(t.Context()); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1", n, err)
	}
	var left []string
	r, err := poolOf(t).Query(context.Background(), `SELECT subject FROM browser_sessions`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var s string
		if err := r.Scan(&s); err != nil {
			t.Fatal(err)
		}
		left = append(left, s)
	}
	if len(left) != 1 || left[0] != young.Subject {
		t.Fatalf("left after the sweep: %v, want only bob's", left)
	}
}
