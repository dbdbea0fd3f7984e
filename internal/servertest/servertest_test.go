package servertest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/servertest"
	"github.com/connectd/connectd/internal/session"
)

// TestEnv: the harness's connectd answers on both listeners, signs a browser
// in at each dev IdP, logs the error code of a refused request, and a
// replica on the same database sees what the first server wrote.
func TestEnv(t *testing.T) {
	t.Parallel()
	edited := false
	e := servertest.New(t, servertest.Options{Issuers: 2, Config: func(*server.Config) { edited = true }})
	if !edited || len(e.IdPs) != 2 || e.IdPs[1].ID != "idp1" {
		t.Fatalf("options not applied: edited %v, %d IdPs", edited, len(e.IdPs))
	}
	e.Run(e.Server)

	for _, u := range []string{e.URL + "/healthz", e.Internal.URL + "/metrics"} {
		resp, err := e.Public.Client().Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", u, resp.StatusCode)
		}
	}

	for _, idp := range e.IdPs {
		b := e.Browser()
		authz := e.StartLogin(b, "/login?issuer="+idp.ID)
		if !strings.HasPrefix(authz, idp.Server.URL+"/authorize?") {
			t.Fatalf("login at %s went to %s", idp.ID, authz)
		}
		cb := e.Pick(b, authz, "alice", "/login/callback")
		if r := b.Request(http.MethodGet, cb, nil); r.Status != http.StatusSeeOther || b.Cookies[session.CookieName] == "" {
			t.Fatalf("callback at %s: %d %s", idp.ID, r.Status, r.Body)
		}
		// The state is spent: the same callback again is refused, and the
		// log line says why.
		delete(b.Cookies, session.CookieName)
		if r := b.Request(http.MethodGet, cb, nil); r.Status != http.StatusBadRequest || e.Code(r.Header) != "invalid_state" {
			t.Fatalf("replayed callback: %d %q", r.Status, e.Code(r.Header))
		}
	}

	c, _ := e.NewClient("alpha", []string{"https://alpha.mcp.example/"}, []string{"fake"})
	replica, base := e.Replica(e.Config)
	if got, err := replica.Clients().Get(context.Background(), c.ID); err != nil || got.Name != "alpha" {
		t.Fatalf("the replica reads client %s: %+v %v", c.ID, got, err)
	}
	resp, err := e.Public.Client().Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("replica /healthz: %d", resp.StatusCode)
	}
}
