package vault_test

import (
	"testing"

	"github.com/connectd/connectd/internal/vault"
)

// TestAccountName: the one phrase the admin's pages and a cut-off's notice
// name an account by (issue 33: admin's accountText and lifecycle's
// accountName disagreed on a label alone).
func TestAccountName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, display, label, want string
	}{
		{"display name and label", "octocat", "work", "octocat (work)"},
		{"display name alone", "octocat", "", "octocat"},
		{"an id for a name (an ID token's sub)", "248289761001", "home", "248289761001 (home)"},
		{"label alone (an API key)", "", "work", "(work)"},
		{"neither", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := vault.AccountName(tc.display, tc.label); got != tc.want {
				t.Errorf("AccountName(%q, %q) = %q, want %q", tc.display, tc.label, got, tc.want)
			}
		})
	}
}
