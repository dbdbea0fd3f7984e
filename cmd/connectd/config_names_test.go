package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestUnknownVars(t *testing.T) {
	t.Parallel()
	environ := []string{
		"PATH=/usr/bin",
		"CONNECTD_ADDR=:8080",               // known
		"CONNECTD_ADRR=127.0.0.1:8080",      // a misspelling: the listen address silently left at its default
		"CONNECTD_DATABSE_URL=postgres://x", // another
		"CONNECTD_public_url=https://x",     // the wrong case
		"CONNECTD_TEST_DATABASE_URL=x",      // the test suite's
		"CONNECTD_DEMO_IDP_SECRET=x",        // the demo's
		"CONNECTD_PG_DIR=/tmp/pg",           // scripts/pg's
		"CONNECTD_MAIN_CLIENT_SECRET=s",     // near nothing: maybe a providers file's client_secret_env
		"connectd_addr=:1",                  // not CONNECTD_
	}
	got := unknownVars(environ, nil)
	want := []unknownVar{{"CONNECTD_ADRR", "CONNECTD_ADDR"}, {"CONNECTD_DATABSE_URL", "CONNECTD_DATABASE_URL"},
		{"CONNECTD_public_url", "CONNECTD_PUBLIC_URL"}, {"CONNECTD_MAIN_CLIENT_SECRET", ""}}
	if !slices.Equal(got, want) {
		t.Fatalf("unknownVars = %v, want %v", got, want)
	}
	var out bytes.Buffer
	warnUnknownVars(environ, envOf(nil), &out)
	for _, line := range []string{
		"connectd: warning: CONNECTD_ADRR is not a connectd setting and is ignored; did you mean CONNECTD_ADDR?",
		"connectd: warning: CONNECTD_MAIN_CLIENT_SECRET is not a connectd setting (docs/configuration.md lists them), and no *_env field",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("the warnings lack %q:\n%s", line, out.String())
		}
	}
	if strings.Contains(out.String(), "=") {
		t.Errorf("a warning shows a value:\n%s", out.String()) // values may be secrets
	}
}

// TestKnownVarsAreTheDocumentedOnes: knownVars holds every CONNECTD_* name
// the code reads (a string literal in a non-test file of connectd's
// packages) and every name of docs/configuration.md's tables, and nothing
// else: a new variable that is not added here would be warned about as
// unknown, and one that is not documented fails here.
func TestKnownVarsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "| `CONNECTD_") {
			continue
		}
		cell := strings.SplitN(line, "|", 3)[1]
		for _, m := range regexp.MustCompile("`(CONNECTD_[A-Z0-9_]+)`").FindAllStringSubmatch(cell, -1) {
			if !slices.ContainsFunc(toolPrefixes, func(p string) bool { return strings.HasPrefix(m[1], p) }) {
				documented[m[1]] = true
			}
		}
	}
	read := map[string]bool{}
	literal := regexp.MustCompile(`"(CONNECTD_[A-Z0-9_]+)"`)
	for _, dir := range []string{".", "../../internal"} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range literal.FindAllStringSubmatch(string(src), -1) {
				if !slices.ContainsFunc(toolPrefixes, func(p string) bool { return strings.HasPrefix(m[1], p) }) {
					read[m[1]] = true
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(read) < 50 || len(documented) < 50 {
		t.Fatalf("found %d names in the code and %d in the documentation: the patterns no longer match", len(read), len(documented))
	}
	for name := range read {
		if !slices.Contains(knownVars, name) {
			t.Errorf("%s is read by the code but not in knownVars (config_names.go)", name)
		}
		if !documented[name] {
			t.Errorf("%s is read by the code but not in docs/configuration.md's tables", name)
		}
	}
	for _, name := range knownVars {
		if !documented[name] {
			t.Errorf("knownVars has %s, which docs/configuration.md's tables do not", name)
		}
	}
	for name := range documented {
		if !slices.Contains(knownVars, name) {
			t.Errorf("docs/configuration.md documents %s, which knownVars lacks", name)
		}
	}
}

// TestMainWarnsAboutUnknownVars: the connectd binary itself (this test
// binary, run as main) warns about a misspelled variable and still runs.
func TestMainWarnsAboutUnknownVars(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "version") // TestMain runs main in it
	cmd.Env = append(os.Environ(), "CONNECTD_TEST_RUN_MAIN=1", "CONNECTD_ADRR=127.0.0.1:1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("connectd version: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "CONNECTD_ADRR is not a connectd setting and is ignored; did you mean CONNECTD_ADDR?") ||
		!strings.HasPrefix(stdout.String(), "connectd ") {
		t.Fatalf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

func TestMain(m *testing.M) {
	if os.Getenv("CONNECTD_TEST_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestReferencedVarsAreNotWarnedAbout (issue 38 item 6): a CONNECTD_* name
// the providers file or CONNECTD_ISSUERS names in a *_env field is the
// operator's own variable, not a misspelling: no warning. Others still get
// theirs.
func TestReferencedVarsAreNotWarnedAbout(t *testing.T) {
	t.Parallel()
	providers := writeFile(t, "providers.json", `{"providers":[{"name":"github","template":"github",
		"client_id_env":"CONNECTD_GH_ID","client_secret_env":"CONNECTD_GH_SECRET"}]}`)
	env := envOf(map[string]string{"CONNECTD_PROVIDERS_FILE": providers,
		"CONNECTD_ISSUERS": `[{"id":"main","issuer":"https://idp.example","login":true,"client_id":"c","client_secret_env":"CONNECTD_IDP_SECRET"}]`})
	environ := []string{"CONNECTD_GH_ID=x", "CONNECTD_GH_SECRET=y", "CONNECTD_IDP_SECRET=z", "CONNECTD_OTHER_SECRET=w"}
	var out bytes.Buffer
	warnUnknownVars(environ, env, &out)
	for _, name := range []string{"CONNECTD_GH_ID", "CONNECTD_GH_SECRET", "CONNECTD_IDP_SECRET"} {
		if strings.Contains(out.String(), name) {
			t.Errorf("%s, named in the configuration, is warned about:\n%s", name, out.String())
		}
	}
	if !strings.Contains(out.String(), "CONNECTD_OTHER_SECRET is not a connectd setting") {
		t.Errorf("an unreferenced name is not warned about:\n%s", out.String())
	}
}
