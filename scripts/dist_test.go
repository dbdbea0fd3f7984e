package scripts

import (
	"archive/zip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
)

// TestReleaseWorkflowLints (issue 38): the release workflow passes
// actionlint, the GitHub Actions linter (its expressions, the actions'
// inputs, permissions, the shell it runs), as a test of make test.
func TestReleaseWorkflowLints(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	l, err := actionlint.NewLinter(&out, &actionlint.LinterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	errs, err := l.LintFile(filepath.Join("..", ".github", "workflows", "release.yml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Errorf("%s", e)
	}
}

// TestDist (issue 38): make dist's artifacts install as the READMEs say,
// offline: the binary runs, the wheel installs with pip from the file
// alone (no index) into a fresh virtual environment and imports, the npm tarball installs with npm from the
// file alone and loads, and SHA256SUMS verifies.
func TestDist(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("../ts/client/dist/index.js"); err != nil {
		t.Fatal("ts/client is not built: make test builds it (make ts) before the tests")
	}
	out := t.TempDir()
	cmd := exec.Command("./dist")
	cmd.Env = append(os.Environ(), "DIST_OUT="+out, "DIST_ARCHES=amd64", "VERSION=9.9.9-test")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/dist: %v\n%s", err, b)
	}
	run := func(dir, name string, args ...string) string {
		t.Helper()
		c := exec.Command(name, args...)
		c.Dir = dir
		c.Env = append(os.Environ(), "PIP_NO_INDEX=1", "npm_config_offline=true", "npm_config_audit=false", "npm_config_fund=false")
		b, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, b)
		}
		return string(b)
	}
	if v := run(out, filepath.Join(out, "connectd_9.9.9-test_linux_amd64"), "version"); !strings.Contains(v, "9.9.9-test") {
		t.Fatalf("the binary's version: %s", v)
	}
	run(out, "sha256sum", "-c", "SHA256SUMS")

	wheel := filepath.Join(out, "connectd-0.1.0-py3-none-any.whl")
	z, err := zip.OpenReader(wheel)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range z.File {
		files = append(files, f.Name)
	}
	z.Close()
	for _, want := range []string{"connectd/__init__.py", "connectd/py.typed", "connectd-0.1.0.dist-info/METADATA",
		"connectd-0.1.0.dist-info/RECORD", "connectd-0.1.0.dist-info/WHEEL"} {
		if !strings.Contains(strings.Join(files, "\n")+"\n", want+"\n") {
			t.Errorf("the wheel lacks %s: %v", want, files)
		}
	}
	// Into a fresh virtual environment (its pip from ensurepip, offline),
	// from the file alone.
	venv := filepath.Join(t.TempDir(), "venv")
	run(out, "python3", "-m", "venv", venv)
	run(out, filepath.Join(venv, "bin", "pip"), "install", "--quiet", "--no-index", "--disable-pip-version-check", wheel)
	if b := run(out, filepath.Join(venv, "bin", "python"), "-c",
		"import connectd, importlib.metadata as m; print(m.version('connectd'), connectd.Client.__name__)"); !strings.Contains(b, "0.1.0 Client") {
		t.Fatalf("the installed wheel: %s", b)
	}

	app := t.TempDir()
	if err := os.WriteFile(filepath.Join(app, "package.json"), []byte(`{"name":"app","version":"1.0.0","type":"module"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	run(app, "npm", "install", "--silent", filepath.Join(out, "connectd-client-0.1.0.tgz"))
	if b := run(app, "node", "-e", `import("@connectd/client").then(m => console.log(typeof m.ConnectdClient))`); !strings.Contains(b, "function") {
		t.Fatalf("the installed npm package: %s", b)
	}
}
