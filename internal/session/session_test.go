package session_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/testkit"
)

// pools holds each test's database, so that the stores of one test (a
// rotated keyring, a second replica) share their sessions.
var pools sync.Map // testing.TB → *pgxpool.Pool

// poolOf returns t's database (a fresh migrated one, made on first use).
func poolOf(t testing.TB) *pgxpool.Pool {
	t.Helper()
	if p, ok := pools.Load(t); ok {
		return p.(*pgxpool.Pool)
	}
	p := pgtest.Pool(t)
	pools.Store(t, p)
	t.Cleanup(func() { pools.Delete(t) })
	return p
}

func newStore(t *testing.T, clk *testkit.Clock, keys ...session.Key) *session.Store {
	t.Helper()
	s, err := session.New(session.Config{Pool: poolOf(t), Keys: keys, MaxAge: 12 * time.Hour, IdleTimeout: time.Hour,
		Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// request returns a request carrying the cookies of the Set-Cookie headers.
func request(setCookies ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	for _, sc := range setCookies {
		c, err := http.ParseSetCookie(sc)
		if err == nil && c.MaxAge >= 0 {
			r.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
		}
	}
	return r
}

func setCookie(t *testing.T, w *httptest.ResponseRecorder, name string) string {
	t.Helper()
	for _, sc := range w.Result().Header.Values("Set-Cookie") {
		if strings.HasPrefix(sc, name+"=") {
			return sc
		}
	}
	t.Fatalf("no Set-Cookie for %s in %v", name, w.Result().Header.Values("Set-Cookie"))
	return ""
}

// attrs splits a raw Set-Cookie header into its value and sorted attributes.
func attrs(raw string) (string, []string) {
	parts := strings.Split(raw, "; ")
	rest := slices.Clone(parts[1:])
	slices.Sort(rest)
	_, v, _ := strings.Cut(parts[0], "=")
	return v, rest
}

func TestCookieAttributes(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock(time.Unix(1_900_000_000, 0))
	s := newStore(t, clk, session.NewKey())
	tests := []struct {
		name   string
		cookie string
		write  func(w http.ResponseWriter)
		want   []string
	}{
		{"session", session.CookieName, func(w http.ResponseWriter) { s.Start(t.Context(), w, "https://idp.example", "alice") },
			[]string{"HttpOnly", "Max-Age=43200", "Path=/", "SameSite=Lax", "Secure"}},
		{"session cleared", session.CookieName, func(w http.ResponseWriter) { s.Clear(w) },
			[]string{"HttpOnly", "Max-Age=0", "Path=/", "SameSite=Lax", "Secure"}},
		{"state binding", session.BindingCookieName, func(w http.ResponseWriter) { s.Binding(w, request()) },
			[]string{"HttpOnly", "Max-Age=600", "Path=/", "SameSite=Lax", "Secure"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := httptest.NewRecorder()
			tt.write(w)
			raw := setCookie(t, w, tt.cookie)
			if !strings.HasPrefix(raw, "__Host-") {
				t.Fatalf("cookie without the __Host- prefix: %s", raw)
			}
			_, got := attrs(raw)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("attributes %v, want exactly %v (no Domain, no Expires)", got, tt.want)
			}
		})
	}
}

func TestSessionRoundTripAndFreshIDs(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock(time.Unix(1_900_000_000, 0))
	s := newStore(t, clk, session.NewKey())
	w := httptest.NewRecorder()
	started, err := s.Start(t.Context(), w, "https://idp.example", "alice")
	if err != nil {
		t.Fatal(err)
	}
	raw := setCookie(t, w, session.CookieName)
	got, err := s.Get(request(raw))
	if err != nil || got.ID != started.ID || got.Subject != "alice" || got.Issuer != "https://idp.example" ||
		!got.IssuedAt.Equal(clk.Now()) {
		t.Fatalf("got %+v %v", got, err)
	}
	if len(got.ID) < 43 {
		t.Fatalf("session id %q is shorter than 256 bits", got.ID)
	}
	if v, _ := attrs(raw); strings.Contains(v, "alice") || strings.Contains(v, got.ID) {
		t.Fatal("the cookie is not encrypted")
	}
	again, _ := s.Start(t.Context(), httptest.NewRecorder(), "https://idp.example", "alice")
	if again.ID == started.ID {
		t.Fatal("a second login reused the session id")
	}
}

func TestRefusedCookies(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock(time.Unix(1_900_000_000, 0))
	k1, k2 := session.NewKey(), session.NewKey()
	old := newStore(t, clk, k1)
	w := httptest.NewRecorder()
	old.Start(t.Context(), w, "https://idp.example", "alice")
	raw := setCookie(t, w, session.CookieName)
	value, _ := attrs(raw)

	bw := httptest.NewRecorder()
	old.Binding(bw, request())
	bindingValue, _ := attrs(setCookie(t, bw, session.BindingCookieName))

	tampered := []byte(value)
	tampered[len(tampered)/2] ^= 0x01
	tests := []struct {
		name   string
		store  *session.Store
		cookie string
	}{
		{"tampered", old, string(tampered)},
		{"truncated", old, value[:len(value)-4]},
		{"garbage", old, "not-a-cookie"},
		{"state-binding cookie presented as session", old, bindingValue},
		{"signed by a rotated-out key", newStore(t, clk, k2), value},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.AddCookie(&http.Cookie{Name: session.CookieName, Value: tt.cookie})
			if _, err := tt.store.Get(r); !errors.Is(err, session.ErrNoSession) {
				t.Fatalf("got %v, want ErrNoSession", err)
			}
		})
	}
}

// TestKeyRotation: a new key signs, the previous one still reads, and a
// touched cookie moves to the new key, after which the old key can go.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock(time.Unix(1_900_000_000, 0))
	k1, k2 := session.NewKey(), session.NewKey()
	w := httptest.NewRecorder()
	newStore(t, clk, k1).Start(t.Context(), w, "https://idp.example", "alice")
	raw := setCookie(t, w, session.CookieName)

	rotated := newStore(t, clk, k2, k1)
	clk.Advance(2 * time.Minute)
	w = httptest.NewRecorder()
	if _, err := rotated.Load(w, request(raw)); err != nil {
		t.Fatalf("previous key no longer read: %v", err)
	}
	reissued := setCookie(t, w, session.CookieName)
	if _, err := newStore(t, clk, k2).Get(request(reissued)); err != nil {
		t.Fatalf("re-issued cookie is not under the new key: %v", err)
	}
	if _, err := newStore(t, clk, k2).Get(request(raw)); !errors.Is(err, session.ErrNoSession) {
		t.Fatal("a cookie of a retired key is still accepted")
	}
}

func TestLifetimeAndIdleTimeout(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock(time.Unix(1_900_000_000, 0))
	s := newStore(t, clk, session.NewKey())
	w := httptest.NewRecorder()
	s.Start(t.Context(), w, "https://idp.example", "alice")
	cookie := setCookie(t, w, session.CookieName)

	clk.Advance(30 * time.Second)
	w = httptest.NewRecorder()
	if _, err := s.Load(w, request(cookie)); err != nil {
		t.Fatal(err)
	}
	if len(w.Result().Header.Values("Set-Cookie")) != 0 {
		t.Fatal("cookie re-issued within a minute of the last")
	}
	clk.Advance(61 * time.Minute)
	if _, err := s.Get(request(cookie)); !errors.Is(err, session.ErrNoSession) {
		t.Fatal("session survived the idle timeout")
	}

	// Used every 50 minutes, it lives until the absolute lifetime, not beyond.
	clk = testkit.NewClock(time.Unix(1_900_000_000, 0))
	s = newStore(t, clk, session.NewKey())
	w = httptest.NewRecorder()
	s.Start(t.Context(), w, "https://idp.example", "alice")
	cookie = setCookie(t, w, session.CookieName)
	for elapsed := 50 * time.Minute; elapsed < 12*time.Hour; elapsed += 50 * time.Minute {
		clk.Advance(50 * time.Minute)
		w = httptest.NewRecorder()
		if _, err := s.Load(w, request(cookie)); err != nil {
			t.Fatalf("active session ended after %s: %v", elapsed, err)
		}
		cookie = setCookie(t, w, session.CookieName)
	}
	clk.Advance(50 * time.Minute)
	if _, err := s.Get(request(cookie)); !errors.Is(err, session.ErrNoSession) {
		t.Fatal("session outlived its maximum age")
	}
}

func TestCSRF(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock(time.Unix(1_900_000_000, 0))
	k1, k2 := session.NewKey(), session.NewKey()
	s := newStore(t, clk, k1)
	mine, _ := s.Start(t.Context(), httptest.NewRecorder(), "https://idp.example", "alice")
	theirs, _ := s.Start(t.Context(), httptest.NewRecorder(), "https://idp.example", "bob")
	token := s.CSRFToken(mine)
	if err := s.CheckCSRF(mine, token); err != nil {
		t.Fatalf("own token refused: %v", err)
	}
	tampered := []byte(token)
	tampered[3] ^= 0x01
	for _, tt := range []struct {
		name  string
		sess  session.Session
		token string
	}{
		{"another session's token", mine, s.CSRFToken(theirs)},
		{"token presented to another session", theirs, token},
		{"empty", mine, ""},
		{"tampered", mine, string(tampered)},
		{"session id itself", mine, mine.ID},
		{"no session", session.Session{}, s.CSRFToken(session.Session{})},
	} {
		if err := s.CheckCSRF(tt.sess, tt.token); !errors.Is(err, session.ErrCSRF) {
			t.Errorf("%s: got %v, want ErrCSRF", tt.name, err)
		}
	}
	if err := newStore(t, clk, k2, k1).CheckCSRF(mine, token); err != nil {
		t.Fatalf("token of the previous key refused during rotation: %v", err)
	}
}

func TestBinding(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock(time.Unix(1_900_000_000, 0))
	s := newStore(t, clk, session.NewKey())
	if _, err := s.ReadBinding(request()); !errors.Is(err, session.ErrNoBinding) {
		t.Fatalf("no cookie: %v", err)
	}
	w := httptest.NewRecorder()
	b1, err := s.Binding(w, request())
	if err != nil || len(b1) != 32 {
		t.Fatalf("binding %d bytes, %v", len(b1), err)
	}
	cookie := setCookie(t, w, session.BindingCookieName)
	b2, err := s.Binding(httptest.NewRecorder(), request(cookie))
	if err != nil || !bytes.Equal(b1, b2) {
		t.Fatal("an existing binding was not reused")
	}
	if got, err := s.ReadBinding(request(cookie)); err != nil || !bytes.Equal(got, b1) {
		t.Fatalf("ReadBinding: %v", err)
	}
	v, _ := attrs(cookie)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	tampered := []byte(v)
	tampered[len(tampered)/2] ^= 0x01
	r.AddCookie(&http.Cookie{Name: session.BindingCookieName, Value: string(tampered)})
	if _, err := s.ReadBinding(r); !errors.Is(err, session.ErrNoBinding) {
		t.Fatal("tampered binding cookie accepted")
	}
	if b3, _ := s.Binding(httptest.NewRecorder(), r); bytes.Equal(b3, b1) {
		t.Fatal("a tampered binding cookie was adopted")
	}
	if b4, _ := s.Binding(httptest.NewRecorder(), request()); bytes.Equal(b4, b1) {
		t.Fatal("two browsers share a binding")
	}
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	k := session.NewKey()
	if got, err := session.ParseKey(k.Encode()); err != nil || !bytes.Equal(got.Hash, k.Hash) || !bytes.Equal(got.Block, k.Block) {
		t.Fatalf("round trip: %v", err)
	}
	for _, bad := range []string{"", "short", strings.Repeat("A", 40), strings.Repeat("A", 100), "!!!!"} {
		if _, err := session.ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
	j, _ := json.Marshal([]session.Key{k})
	if enc := k.Encode(); strings.Contains(fmt.Sprint(k), enc[:16]) || strings.Contains(fmt.Sprintf("%+v", []session.Key{k}), enc[:16]) ||
		strings.Contains(string(j), enc[:16]) {
		t.Fatal("a printed Key reveals the key")
	}
	if _, err := session.New(session.Config{}); err == nil {
		t.Fatal("New without keys")
	}
	if _, err := session.New(session.Config{Keys: []session.Key{k}}); err == nil {
		t.Fatal("New without a database: sessions could not end on the server")
	}
}
