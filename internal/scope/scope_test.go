package scope_test

import (
	"slices"
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
