package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/pgtest"
)

// TestClientsProxyRulesThatAsk (issue 36): proxy-rules with a rule that
// asks says so — each such rule with its words and bound — and that the
// client is therefore proxy-only; proxy-only --off on it is refused,
// changing nothing, with the rules that ask and the command that clears
// them; once they are cleared, the client stays proxy-only until --off,
// which then works.
func TestClientsProxyRulesThatAsk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	env := envOf(map[string]string{"CONNECTD_DATABASE_URL": dbURL, "USER": "ops"})
	cli := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, append([]string{"clients"}, args...), env, &out, &errOut)
		return out.String(), err
	}
	out, err := cli("create", "--name", "Issues", "--resource", "https://issues.mcp.example/mcp", "--provider", "github")
	if err != nil {
		t.Fatal(err)
	}
	id := regexp.MustCompile(`id: (cli_[a-z0-9]+)`).FindStringSubmatch(out)[1]
	store := clientauth.NewClients(clientauth.ClientsConfig{Pool: pgtest.NewPool(t, dbURL)})

	out, err = cli("proxy-rules", id, "--provider", "github", "--rule", "GET /repos/*/issues*",
		"--rule", `POST /repos/*/issues ask:1h "Open issues in your repositories"`, "--rule", `DELETE /repos/* ask "Delete a repository"`)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		id + " may make 3 kind(s) of call at github through the proxy",
		"  GET /repos/*/issues*\n",
		`  POST /repos/*/issues  asks the user first: "Open issues in your repositories" (they may allow such calls for up to 1h)`,
		`  DELETE /repos/*  asks the user first: "Delete a repository" (each call)`,
		id + " is proxy-only: its rules ask the user, so it never receives a credential",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("proxy-rules output lacks %q:\n%s", want, out)
		}
	}
	if c, err := store.Get(ctx, id); err != nil || !c.ProxyOnly {
		t.Fatalf("after rules that ask: %+v %v", c, err)
	}

	_, err = cli("proxy-only", id, "--off")
	if exitCode(err) != 2 {
		t.Fatalf("proxy-only --off on a client that asks: %v (exit %d), want a refusal", err, exitCode(err))
	}
	for _, want := range []string{id + " must stay proxy-only", "without asking", "Nothing changed",
		`github: POST /repos/*/issues ask:1h "Open issues in your repositories"`, `github: DELETE /repos/* ask "Delete a repository"`,
		"connectd clients proxy-rules " + id + " --provider github --clear"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal lacks %q:\n%s", want, err)
		}
	}
	if c, _ := store.Get(ctx, id); !c.ProxyOnly {
		t.Fatal("a refused proxy-only --off changed the client")
	}

	// A malformed ask rule: a usage error saying the form, nothing set.
	if _, err := cli("proxy-rules", id, "--provider", "gitlab", "--rule", `POST /x ask:48h "Too long"`); exitCode(err) != 2 ||
		!strings.Contains(err.Error(), "1m to 24h") {
		t.Errorf("ask:48h: %v", err)
	}

	out, err = cli("proxy-rules", id, "--provider", "github", "--clear")
	if err != nil || !strings.Contains(out, "stays proxy-only") || !strings.Contains(out, "proxy-only "+id+" --off") {
		t.Fatalf("clearing the rules: %v\n%s", err, out)
	}
	if out, err = cli("proxy-only", id, "--off"); err != nil || !strings.Contains(out, "may read tokens again") {
		t.Fatalf("proxy-only --off without rules that ask: %v\n%s", err, out)
	}
	if c, _ := store.Get(ctx, id); c.ProxyOnly {
		t.Fatal("proxy-only --off did not take")
	}
}
