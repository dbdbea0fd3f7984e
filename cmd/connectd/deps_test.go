package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoTestCodeLinked: the production binary links no test code, no test
// support package and none of the demo's parts (the MCP SDK, the example
// server, the development identity provider, which lets anyone sign in as
// anyone); the demo is cmd/connectd-demo. A new import that drags one in
// fails here rather than shipping.
func TestNoTestCodeLinked(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/connectd: %v\n%s", err, out)
	}
	forbidden := []string{
		"testing", "net/http/httptest",
		"github.com/modelcontextprotocol/",
		"github.com/connectd/connectd/examples/",
		"github.com/connectd/connectd/internal/devidp", // issue 23 §5
		"github.com/connectd/connectd/internal/testkit",
		"github.com/connectd/connectd/internal/flowtest",
		"github.com/connectd/connectd/internal/pgtest",
		"github.com/connectd/connectd/internal/servertest",
		"github.com/connectd/connectd/internal/openapitest",
		"github.com/connectd/connectd/internal/provider/providertest",
		"github.com/connectd/connectd/internal/mcpauth/mcpauthtest",
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed %d packages: %s", len(deps), out)
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if dep == f || strings.HasSuffix(f, "/") && strings.HasPrefix(dep, f) || dep == strings.TrimSuffix(f, "/") {
				t.Errorf("connectd links %s", dep)
			}
		}
	}
}

// TestLeavesStayLeaves (issue 23 §5): the packages below the HTTP layer do
// not import it. The vault, consent, mcpauth, clientauth, org, jose and the request-id context link neither
// internal/web nor the page templates, so a leaf can never pick a status or
// render a page.
func TestLeavesStayLeaves(t *testing.T) {
	t.Parallel()
	for _, leaf := range []string{"internal/vault", "internal/consent", "internal/mcpauth", "internal/clientauth", "internal/org", "internal/jose", "internal/reqid", "internal/db", "internal/audit", "internal/jsontext", "internal/keyring", "internal/identity"} {
		out, err := exec.Command("go", "list", "-deps", "../../"+leaf).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v\n%s", leaf, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == "github.com/connectd/connectd/internal/web" || dep == "github.com/connectd/connectd/web/templates" {
				t.Errorf("%s links %s", leaf, dep)
			}
		}
	}
}

// TestTrueLeaves: the keyring, the user type, the request-id context and the
// one-rule packages import nothing of connectd's, so anything may use them
// without pulling in a store; and the vault links no provider templates.
func TestTrueLeaves(t *testing.T) {
	t.Parallel()
	deps := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", "../../"+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v\n%s", pkg, err, out)
		}
		return strings.Fields(string(out))
	}
	const mod = "github.com/connectd/connectd/"
	for _, leaf := range []string{"internal/keyring", "internal/identity", "internal/problem", "internal/reqid", "internal/jsontext", "internal/names", "internal/scope"} {
		for _, dep := range deps(leaf) {
			if strings.HasPrefix(dep, mod) && dep != mod+leaf {
				t.Errorf("%s imports %s", leaf, dep)
			}
		}
	}
	for _, dep := range deps("internal/vault") {
		if strings.HasPrefix(dep, mod+"internal/provider") {
			t.Errorf("internal/vault links %s", dep)
		}
	}
}
