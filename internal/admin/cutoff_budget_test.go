package admin_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/admin"
)

// TestCutOffRevocationBudget (issue 25, a provider that answers late): a
// cut-off's revocations run a few at a time and none starts after the
// budget, so the admin's answer comes within the budget and one revocation,
// not one slow provider call per exposed connection; what was not revoked is
// listed failed and kept, and "Revoke what is left" revokes it.
func TestCutOffRevocationBudget(t *testing.T) {
	t.Parallel()
	const delay = 1500 * time.Millisecond
	e := newEnv(t, envOptions{revokeDelay: delay})
	e.runJobs() // the sampled token.read rows are written by the running server
	bad := e.newMCPServer("shady", "fake")
	users := []string{"alice", "bob", "admin"}
	for _, user := range users {
		conn := e.connectFully(bad, user)
		if st, out := bad.call(http.MethodGet, "/v1/connections/fake/token", user, nil); st != http.StatusOK {
			t.Fatalf("token of %s: %d %v", user, st, out)
		}
		eventually(t, "the token.read row of "+user, func() bool {
			return e.count(`SELECT count(*) FROM audit_events WHERE kind = 'token.read' AND target = $1`, conn) > 0
		})
	}
	st, err := admin.NewStore(admin.StoreConfig{Pool: e.pool, Vault: e.vault, RevokeParallel: 1, RevokeBudget: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	out, err := st.CutOffClient(ctx, e.clients, bad.client.ID, time.Now().Add(-time.Hour), true, admin.Actor{Name: "cli:test"})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Exposed) != 3 || len(out.Revoked) != 1 || len(out.Failed) != 2 {
		t.Fatalf("exposed %d, revoked %v, failed %v; want 3, 1, 2", len(out.Exposed), out.Revoked, out.Failed)
	}
	// One at a time they would take 3 × 1.5 s; the budget stops at one.
	if took > 2*delay+time.Second {
		t.Fatalf("the cut-off answered after %s, past its budget and one revocation", took)
	}
	if n := e.count(`SELECT count(*) FROM connections`); n != 2 {
		t.Fatalf("%d connections left, want the 2 not revoked", n)
	}
	more, err := admin.NewStore(admin.StoreConfig{Pool: e.pool, Vault: e.vault, RevokeBudget: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rest, err := more.RevokeExposure(ctx, e.clients, bad.client.ID, time.Now().Add(-time.Hour), admin.Actor{Name: "cli:test"})
	if err != nil || len(rest.Revoked) != 2 || len(rest.Failed) != 0 {
		t.Fatalf("revoke what is left: %+v %v", rest, err)
	}
	if n := e.count(`SELECT count(*) FROM connections`); n != 0 {
		t.Fatalf("%d connections left after revoking what was left", n)
	}
}
