package names_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/names"
)

func TestValidProvider(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ok   bool
	}{
		{"github", true},
		{"google-drive", true},
		{"a.b_c-9", true},
		{"0x", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"", false},
		{"GitHub", false},
		{"-x", false},
		{".x", false},
		{"_x", false},
		{"a b", false},
		{"a/b", false},
		{"a%2Fb", false},
		{"é", false},
	}
	for _, tt := range tests {
		if got := names.ValidProvider(tt.name); got != tt.ok {
			t.Errorf("ValidProvider(%q) = %t, want %t", tt.name, got, tt.ok)
		}
	}
}

// FuzzValidProvider: the rule is the regular expression that mcpauth and
// admin used to carry as their own copies, byte for byte.
func FuzzValidProvider(f *testing.F) {
	shape := regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	for _, s := range []string{"github", "", "-a", "a\n", strings.Repeat("z", 65)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := names.ValidProvider(s), shape.MatchString(s); got != want {
			t.Fatalf("ValidProvider(%q) = %t, the old pattern says %t", s, got, want)
		}
	})
}

func TestValidClientID(t *testing.T) {
	t.Parallel()
	for id, ok := range map[string]bool{
		"cli_k3j5abcdefghijkl":           true,
		"cli_" + strings.Repeat("a", 64): true,
		"cli_" + strings.Repeat("a", 65): false,
		"cli_":                           false,
		"":                               false,
		"CLI_abc":                        false,
		"cli_ABC":                        false,
		"cli_a-b":                        false,
		"cli_a\x00":                      false,
		"cli_é":                          false,
		"xcli_abc":                       false,
		"cli_abc\n":                      false,
	} {
		if got := names.ValidClientID(id); got != ok {
			t.Errorf("ValidClientID(%q) = %t, want %t", id, got, ok)
		}
	}
}

func TestValidOrg(t *testing.T) {
	t.Parallel()
	for id, ok := range map[string]bool{
		"default":               true,
		"acme":                  true,
		"a":                     true,
		"0":                     true,
		"team-42":               true,
		"a-b-c":                 true,
		strings.Repeat("a", 40): true,
		strings.Repeat("a", 41): false,
		"":                      false,
		"-acme":                 false,
		"acme-":                 false,
		"-":                     false,
		"Acme":                  false,
		"acme_corp":             false,
		"acme.corp":             false,
		"acme corp":             false,
		"acme/x":                false,
		"acme\n":                false,
		"é":                     false,
		"acme\x00":              false,
	} {
		if got := names.ValidOrg(id); got != ok {
			t.Errorf("ValidOrg(%q) = %t, want %t", id, got, ok)
		}
	}
}

// FuzzValidOrg: the rule is the CHECK constraint on organizations.id, read
// from the migration itself, so the two cannot drift apart.
func FuzzValidOrg(f *testing.F) {
	sql, err := os.ReadFile(filepath.Join("..", "..", "migrations", "00028_organizations.sql"))
	if err != nil {
		f.Fatal(err)
	}
	m := regexp.MustCompile(`id ~ '([^']+)'`).FindSubmatch(sql)
	if m == nil {
		f.Fatal("no CHECK (id ~ '...') in migration 00028")
	}
	shape := regexp.MustCompile(string(m[1]))
	for _, s := range []string{"default", "", "-a", "a-", "a\n", strings.Repeat("z", 41), "a--b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := names.ValidOrg(s), shape.MatchString(s); got != want {
			t.Fatalf("ValidOrg(%q) = %t, the migration's CHECK says %t", s, got, want)
		}
	})
}
