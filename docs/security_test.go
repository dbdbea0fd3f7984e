// Package docs_test checks docs/security.md, the attack catalog: every row of
// its tables names the tests that prove it, and every named test exists.
package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// ref is `package/path.TestName` or `package/path.TestName/subtest`.
var ref = regexp.MustCompile("`((?:[a-z0-9_-]+/)*[a-z0-9_-]+)\\.((?:Test|Fuzz)[A-Za-z0-9_]*)(?:/([^`]+))?`")

var goString = regexp.MustCompile(`"(?:[^"\\\n]|\\.)*"`)

// TestSecurityCatalog: docs/security.md has no requirement (MUST, SHOULD) or
// attack without a test reference, and no reference to a test that does not
// exist.
func TestSecurityCatalog(t *testing.T) {
	raw, err := os.ReadFile("security.md")
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]string{} // package dir → its _test.go files, concatenated
	testFiles := func(pkg string) string {
		if s, ok := sources[pkg]; ok {
			return s
		}
		files, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(pkg), "*_test.go"))
		var b strings.Builder
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(src)
		}
		sources[pkg] = b.String()
		return sources[pkg]
	}
	// subtestNames are the Go string literals of a package's tests as
	// t.Run names them (spaces become underscores).
	subtests := map[string]map[string]bool{}
	subtestNames := func(pkg string) map[string]bool {
		if names, ok := subtests[pkg]; ok {
			return names
		}
		names := map[string]bool{}
		subtests[pkg] = names
		for _, lit := range goString.FindAllString(testFiles(pkg), -1) {
			if s, err := strconv.Unquote(lit); err == nil {
				names[strings.ReplaceAll(s, " ", "_")] = true
			}
		}
		return names
	}

	var rows, refs int
	inTable, proofCol := false, -1
	for n, line := range strings.Split(string(raw), "\n") {
		where := "docs/security.md:" + strconv.Itoa(n+1)
		trimmed := strings.TrimSpace(line)
		if !strings.HasPrefix(trimmed, "|") {
			inTable, proofCol = false, -1
			if strings.Contains(line, "MUST") || strings.Contains(line, "SHOULD") {
				if !ref.MatchString(line) && !strings.Contains(line, "A requirement of the form MUST or SHOULD") {
					t.Errorf("%s: a MUST/SHOULD outside the catalog's tables, without a test: %s", where, trimmed)
				}
			}
			continue
		}
		cells := strings.Split(strings.Trim(trimmed, "|"), "|")
		if !inTable { // the header row
			inTable = true
			for i, c := range cells {
				if h := strings.TrimSpace(c); h == "Proof" || h == "target" {
					proofCol = i
				}
			}
			continue
		}
		if strings.Trim(trimmed, "|-: ") == "" { // the separator row
			continue
		}
		if proofCol < 0 {
			if strings.Contains(line, "MUST") || strings.Contains(line, "SHOULD") {
				t.Errorf("%s: a MUST/SHOULD in a table without a Proof column", where)
			}
			continue
		}
		rows++
		proof := ""
		if proofCol < len(cells) {
			proof = cells[proofCol]
		}
		found := ref.FindAllStringSubmatch(proof, -1)
		if len(found) == 0 {
			t.Errorf("%s: no test reference in the proof of: %.80s", where, trimmed)
		}
		for _, m := range found {
			refs++
			pkg, name, sub := m[1], m[2], m[3]
			src := testFiles(pkg)
			if src == "" {
				t.Errorf("%s: %s has no test files", where, pkg)
				continue
			}
			if !strings.Contains(src, "\nfunc "+name+"(t *testing.T)") && !strings.Contains(src, "\nfunc "+name+"(f *testing.F)") {
				t.Errorf("%s: no func %s in %s", where, name, pkg)
				continue
			}
			if sub != "" && !subtestNames(pkg)[sub] {
				t.Errorf("%s: no subtest %q of %s in %s", where, sub, name, pkg)
			}
		}
	}
	if rows < 50 || refs < 100 {
		t.Fatalf("the catalog looks truncated: %d rows, %d test references", rows, refs)
	}
}
