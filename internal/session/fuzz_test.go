package session_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/session"
)

// fuzzKey is fixed (not random) so that cookies issued by one fuzz worker
// still open in another and the property below is checked on them too.
var fuzzKey = session.Key{Hash: []byte("connectd fuzz hash key, public!!"), Block: []byte("connectd fuzz block key, public!")}

// FuzzSessionCookie: whatever the browser sends as the session or
// state-binding cookie, Get and ReadBinding never panic, and a cookie that
// opens yields exactly the identity that was signed in: tampering, another
// cookie's value under this name, another key or truncation never produce a
// session for anyone else. Run longer with
//
//	go test -run '^$' -fuzz FuzzSessionCookie -fuzztime 1m ./internal/session
func FuzzSessionCookie(f *testing.F) {
	now := time.Unix(1_900_000_000, 0)
	pool := poolOf(f)
	store := func(keys ...session.Key) *session.Store {
		s, err := session.New(session.Config{Pool: pool, Keys: keys, Now: func() time.Time { return now }})
		if err != nil {
			f.Fatal(err)
		}
		return s
	}
	s := store(fuzzKey)
	w := httptest.NewRecorder()
	if _, err := s.Start(f.Context(), w, "https://issuer.example", "alice"); err != nil {
		f.Fatal(err)
	}
	if _, err := s.Binding(w, httptest.NewRequest("GET", "/", nil)); err != nil {
		f.Fatal(err)
	}
	values := map[string]string{}
	for _, c := range w.Result().Cookies() {
		values[c.Name] = c.Value
	}
	good, binding := values[session.CookieName], values[session.BindingCookieName]
	other := httptest.NewRecorder()
	if _, err := store(session.NewKey()).Start(f.Context(), other, "https://issuer.example", "mallory"); err != nil {
		f.Fatal(err)
	}
	foreign := other.Result().Cookies()[0].Value
	flip := []byte(good)
	flip[len(flip)/2] ^= 1
	for _, seed := range []string{good, binding, foreign, string(flip), good[:len(good)-2], good + "=", "", "x",
		strings.ToUpper(good), strings.Replace(good, "-", "+", 1)} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, value string, asBinding bool) {
		r := httptest.NewRequest("GET", "/", nil)
		name := session.CookieName
		if asBinding {
			name = session.BindingCookieName
		}
		r.Header.Set("Cookie", name+"="+value)
		if asBinding {
			if b, err := s.ReadBinding(r); err == nil && len(b) != 32 {
				t.Fatalf("binding of %d bytes", len(b))
			}
			return
		}
		sess, err := s.Get(r)
		if err != nil {
			return
		}
		if sess.Issuer != "https://issuer.example" || sess.Subject != "alice" || len(sess.ID) != 43 ||
			!sess.IssuedAt.Equal(now) {
			t.Fatalf("cookie %q opened as %+v", value, sess)
		}
		if sent, _ := r.Cookie(session.CookieName); sent == nil {
			t.Fatal("opened without a cookie")
		}
		// The CSRF token of what opened is that session's, not a new one.
		if s.CheckCSRF(sess, s.CSRFToken(sess)) != nil {
			t.Fatal("CSRF token of an opened session does not check")
		}
	})
}

// TestSessionCookieIsNotReadable: the cookie value reveals nothing of the
// session (it is encrypted, not just signed).
func TestSessionCookieIsNotReadable(t *testing.T) {
	t.Parallel()
	s, err := session.New(session.Config{Pool: poolOf(t), Keys: []session.Key{fuzzKey}})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	sess, err := s.Start(t.Context(), w, "https://issuer.example", "alice")
	if err != nil {
		t.Fatal(err)
	}
	var raw string
	for _, c := range w.Result().Cookies() {
		if c.Name == session.CookieName {
			raw = c.Value
		}
	}
	for _, leak := range []string{"alice", "issuer.example", sess.ID, "YWxpY2U"} {
		if strings.Contains(raw, leak) {
			t.Fatalf("cookie value reveals %q", leak)
		}
	}
	if r := httptest.NewRequest(http.MethodGet, "/", nil); r != nil {
		r.Header.Set("Cookie", session.CookieName+"="+raw)
		if got, err := s.Get(r); err != nil || got.ID != sess.ID {
			t.Fatalf("round trip: %v", err)
		}
	}
}
