package session_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/testkit"
)

// TestSeparateCookieNames: a Store with its own cookie names keeps a session
// of its own — even under the same keys, a cookie never opens under the other
// name, because the name is part of its MAC.
func TestSeparateCookieNames(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock(time.Unix(1_700_000_000, 0))
	key := session.NewKey()
	users := newStore(t, clk, key)
	admins, err := session.New(session.Config{Pool: poolOf(t), Keys: []session.Key{key}, Now: clk.Now,
		Name: "__Host-test_admin", BindingName: "__Host-test_admin_binding"})
	if err != nil {
		t.Fatal(err)
	}

	w := httptest.NewRecorder()
	if _, err := admins.Start(t.Context(), w, "https://idp.example", "alice"); err != nil {
		t.Fatal(err)
	}
	sc := setCookie(t, w, "__Host-test_admin")
	if _, got := attrs(sc); !strings.Contains(strings.Join(got, ";"), "HttpOnly") {
		t.Fatalf("attributes: %s", sc)
	}
	if sess, err := admins.Get(request(sc)); err != nil || sess.Subject != "alice" {
		t.Fatalf("own cookie: %+v %v", sess, err)
	}
	if _, err := users.Get(request(sc)); err != session.ErrNoSession {
		t.Fatalf("the end-user store read the admin cookie: %v", err)
	}
	// The same value under the other name does not open.
	value, _ := attrs(sc)
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Cookie", session.CookieName+"="+value)
	if _, err := users.Get(r); err != session.ErrNoSession {
		t.Fatalf("renamed cookie opened: %v", err)
	}
	w = httptest.NewRecorder()
	if _, err := admins.Binding(w, request()); err != nil {
		t.Fatal(err)
	}
	if b := setCookie(t, w, "__Host-test_admin_binding"); b == "" {
		t.Fatal("no binding cookie under the configured name")
	}
	w = httptest.NewRecorder()
	admins.Clear(w)
	if c := setCookie(t, w, "__Host-test_admin"); !strings.Contains(c, "Max-Age=0") {
		t.Fatalf("clear: %s", c)
	}

	for _, cfg := range []session.Config{
		{Pool: poolOf(t), Keys: []session.Key{key}, Name: "admin"},
		{Pool: poolOf(t), Keys: []session.Key{key}, BindingName: "__Secure-x"},
		{Pool: poolOf(t), Keys: []session.Key{key}, Name: "__Host-same", BindingName: "__Host-same"},
	} {
		if _, err := session.New(cfg); err == nil {
			t.Errorf("names %q %q accepted", cfg.Name, cfg.BindingName)
		}
	}
}
