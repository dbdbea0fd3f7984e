package scope_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/scope"
)

func TestUnion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b []string
		want []string
	}{
		{"both nil", nil, nil, []string{}},
		{"dedupes within and across, first occurrence wins", []string{"b", "a", "b"}, []string{"c", "a"}, []string{"b", "a", "c"}},
		{"drops empty strings", []string{"", "read"}, []string{"", "write", ""}, []string{"read", "write"}},
		{"keeps order of a then b", []string{"z"}, []string{"y", "x"}, []string{"z", "y", "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := slices.Clone(tt.a)
			got := scope.Union(a, tt.b)
			if !slices.Equal(got, tt.want) || got == nil {
				t.Fatalf("Union(%q, %q) = %q, want %q", tt.a, tt.b, got, tt.want)
			}
			if !slices.Equal(a, tt.a) {
				t.Fatalf("Union changed its first argument: %q", a)
			}
		})
	}
}

func TestMissingAndIntersect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		a, b            []string
		missing, inBoth []string
	}{
		{"none", nil, nil, nil, nil},
		{"subset", []string{"read"}, []string{"read", "write"}, nil, []string{"read"}},
		{"order of a, each once, no empty", []string{"b", "", "a", "b", "c"}, []string{"c", "b"}, []string{"a"}, []string{"b", "c"}},
		{"disjoint", []string{"x"}, []string{"y"}, []string{"x"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scope.Missing(tt.a, tt.b); !slices.Equal(got, tt.missing) {
				t.Errorf("Missing(%q, %q) = %q, want %q", tt.a, tt.b, got, tt.missing)
			}
			if got := scope.Intersect(tt.a, tt.b); !slices.Equal(got, tt.inBoth) {
				t.Errorf("Intersect(%q, %q) = %q, want %q", tt.a, tt.b, got, tt.inBoth)
			}
		})
	}
}

func TestValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s  string
		ok bool
	}{
		{"repo", true},
		{"https://www.googleapis.com/auth/drive.readonly", true},
		{"files:read", true},
		{"!#$%&'()*+-./:;<=>?@[]^_`{|}~", true},
		{strings.Repeat("a", scope.MaxBytes), true},
		{strings.Repeat("a", scope.MaxBytes+1), false},
		{"", false},
		{"a b", false},
		{"a,b", false},
		{`a"b`, false},
		{`a\b`, false},
		{"a\tb", false},
		{"a\x7f", false},
		{"é", false},
	}
	for _, tt := range tests {
		if got := scope.Valid(tt.s); got != tt.ok {
			t.Errorf("Valid(%q) = %t, want %t", tt.s, got, tt.ok)
		}
	}
}

// FuzzValid: Valid is RFC 6749 §3.3 scope-token, written out here as the
// regular expression connect used to carry, minus the comma and up to
// MaxBytes.
func FuzzValid(f *testing.F) {
	token := regexp.MustCompile(`^[\x21\x23-\x5B\x5D-\x7E]+$`)
	for _, s := range []string{"repo", "", "a,b", "a b", `"`, "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := token.MatchString(s) && !strings.Contains(s, ",") && len(s) <= scope.MaxBytes
		if got := scope.Valid(s); got != want {
			t.Fatalf("Valid(%q) = %t, want %t", s, got, want)
		}
	})
}
