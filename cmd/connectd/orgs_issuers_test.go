package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/pgtest"
)

// TestOrgsIssuersCommand: an organization's own issuers through the CLI:
// add, list, remove, --deployment-issuers; the deployment's issuers' ids and
// URLs refused; the client secret (from a file or a variable, never a flag
// value) never printed, whatever is run.
func TestOrgsIssuersCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	const secret = "acme-idp-secret-5a4b3c"
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := envOf(map[string]string{"CONNECTD_DATABASE_URL": pgtest.URL(t), "CONNECTD_VAULT_KEYS": genKey(t, 1),
		"CONNECTD_PUBLIC_URL": "https://connect.example.test", "USER": "ops", "ACME_IDP_SECRET": secret,
		"CONNECTD_ISSUERS": `[{"id":"main","issuer":"https://idp.deployment.test"}]`})
	var all strings.Builder
	cli := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, args, env, &out, &errOut)
		all.WriteString(out.String() + errOut.String())
		if err != nil {
			all.WriteString(err.Error())
		}
		return out.String(), err
	}
	ok := func(want string, args ...string) string {
		t.Helper()
		out, err := cli(args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !strings.Contains(out, want) {
			t.Fatalf("%v printed %q, want %q in it", args, out, want)
		}
		return out
	}
	refused := func(want string, args ...string) {
		t.Helper()
		_, err := cli(args...)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v (exit %d), want exit 2 saying %q", args, err, exitCode(err), want)
		}
	}

	ok("id: acme", "orgs", "create", "acme", "--name", "Acme")
	ok("id: beta", "orgs", "create", "beta", "--name", "Beta")
	out := ok("redirect URI: https://connect.example.test/login/callback", "orgs", "issuers", "add", "acme-idp", "--org", "acme",
		"--issuer", "https://idp.acme.test", "--login", "--client-id", "connectd", "--client-secret-file", secretFile,
		"--scopes", "profile, email")
	if !strings.Contains(out, "org: acme") {
		t.Fatalf("add printed %s", out)
	}
	ok("issuer: beta-idp", "orgs", "issuers", "add", "beta-idp", "--org", "beta", "--issuer", "https://idp.beta.test",
		"--login", "--client-id", "connectd", "--client-secret-env", "ACME_IDP_SECRET")
	ok("issuer: beta-api", "orgs", "issuers", "add", "beta-api", "--org", "beta", "--issuer", "https://api.beta.test",
		"--jwks-url", "https://api.beta.test/jwks", "--allow-plain-jwt")
	list := ok("deployment issuers: true", "orgs", "issuers", "list", "--org", "acme")
	if !regexp.MustCompile(`acme-idp\s+https://idp.acme.test\s+true\s+connectd\s+set`).MatchString(list) ||
		strings.Contains(list, "beta") {
		t.Fatalf("list: %s", list)
	}
	if show := ok("acme-idp", "orgs", "show", "acme"); !strings.Contains(show, "deployment issuers: true") {
		t.Fatalf("show: %s", show)
	}
	ok("deployment issuers: false", "orgs", "update", "acme", "--deployment-issuers=false")
	ok("deployment issuers: false", "orgs", "issuers", "list", "--org", "acme")
	ok("deployment issuers: true", "orgs", "update", "acme", "--deployment-issuers", "true")
	refused("deployment-issuers: must be true or false", "orgs", "update", "acme", "--deployment-issuers", "maybe")
	refused("always accepts the deployment's issuers", "orgs", "update", "default", "--deployment-issuers=false")

	refused("is a deployment issuer's", "orgs", "issuers", "add", "main", "--org", "beta", "--issuer", "https://x.test")
	refused("is a deployment issuer's", "orgs", "issuers", "add", "x", "--org", "beta", "--issuer", "https://idp.deployment.test")
	refused("exists already", "orgs", "issuers", "add", "y", "--org", "beta", "--issuer", "https://idp.acme.test")
	refused("exists already", "orgs", "issuers", "add", "acme-idp", "--org", "beta", "--issuer", "https://y.test")
	refused("--client-secret: a client secret is never given as a flag value", "orgs", "issuers", "add", "z", "--org", "beta",
		"--issuer", "https://z.test", "--login", "--client-id", "c", "--client-secret="+secret)
	refused("--client-secret: a client secret is never given as a flag value", "orgs", "issuers", "add", "z", "--org", "beta",
		"--issuer", "https://z.test", "--login", "--client-id", "c", "-client-secret", secret)
	refused("--org is required", "orgs", "issuers", "list")
	refused("--org: an organization id", "orgs", "issuers", "list", "--org", "Acme")
	refused("no organization nope", "orgs", "issuers", "list", "--org", "nope")
	refused("--issuer is required", "orgs", "issuers", "add", "z", "--org", "beta")
	refused("--login needs --client-id", "orgs", "issuers", "add", "z", "--org", "beta", "--issuer", "https://z.test", "--login")
	refused("add --login", "orgs", "issuers", "add", "z", "--org", "beta", "--issuer", "https://z.test", "--client-id", "c")
	refused("url", "orgs", "issuers", "add", "z", "--org", "beta", "--issuer", "http://z.test")
	refused("--client-secret-env names NOPE", "orgs", "issuers", "add", "z", "--org", "beta", "--issuer", "https://z.test",
		"--login", "--client-id", "c", "--client-secret-env", "NOPE")
	refused("has no issuer acme-idp", "orgs", "issuers", "remove", "acme-idp", "--org", "beta")

	ok("2 issuer client secrets; 2 under the primary key", "vault", "status")
	ok("rewrapped 0 connections", "vault", "rewrap")
	ok("removed issuer acme-idp (https://idp.acme.test) of acme", "orgs", "issuers", "remove", "acme-idp", "--org", "acme")
	ok("issuers: none of its own", "orgs", "issuers", "list", "--org", "acme")
	if strings.Contains(all.String(), secret) {
		t.Fatalf("the client secret was printed:\n%s", all.String())
	}
}

// TestOrgsUsageNamesEachFlag: connectd orgs -h names, for each subcommand
// of orgs, orgs apps and orgs issuers, exactly the flags it defines — and so
// does the subcommand's own -h line.
func TestOrgsUsageNamesEachFlag(t *testing.T) {
	t.Parallel()
	defined := regexp.MustCompile(`(?m)^  -([a-z][a-z-]*)`)
	named := regexp.MustCompile(`--([a-z][a-z-]*)`)
	flagsIn := func(re *regexp.Regexp, s string) []string {
		var out []string
		for _, m := range re.FindAllStringSubmatch(s, -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
		slices.Sort(out)
		return out
	}
	// The group's text, one section per subcommand ("apps set", "update"...).
	sections := map[string]string{}
	var sub string
	for _, line := range strings.Split(orgsUsage, "\n") {
		if rest, ok := strings.CutPrefix(line, "  connectd orgs "); ok {
			f := strings.Fields(rest)
			sub = f[0]
			if (sub == "apps" || sub == "issuers") && len(f) > 1 {
				sub += " " + f[1]
			}
		}
		sections[sub] += line + "\n"
	}
	for group, subs := range map[string]map[string]string{"": orgsSubUsage, "apps ": orgsAppsSubUsage, "issuers ": orgsIssuersSubUsage} {
		for sub, args := range subs {
			t.Run(group+sub, func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				argv := append(append([]string{"orgs"}, strings.Fields(group)...), sub, "-h")
				if err := run(context.Background(), argv, envOf(nil), &stdout, &stderr); err != nil {
					t.Fatalf("%v: %v", argv, err)
				}
				want := flagsIn(defined, stdout.String())
				if got := flagsIn(named, args); !slices.Equal(got, want) {
					t.Errorf("%v names %v; it defines %v", argv, got, want)
				}
				if got := flagsIn(named, sections[group+sub]); !slices.Equal(got, want) {
					t.Errorf("orgs -h names %v under %s; it defines %v:\n%s", got, group+sub, want, sections[group+sub])
				}
			})
		}
	}
}
