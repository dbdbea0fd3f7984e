package clientauth

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestRefused: a held request (a long-poll, a proxied stream) ends only on
// a refusal of the client's credentials, never on a check the database
// could not answer.
func TestRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{ErrMissingClientKey, true},
		{ErrInvalidClientKey, true},
		{fmt.Errorf("wrapped: %w", ErrClientDisabled), true},
		{fmt.Errorf("%w: no keys", ErrInvalidAssertion), true},
		{nil, false},
		{context.DeadlineExceeded, false},
		{fmt.Errorf("clientauth: authenticate client: %w", errors.New("pool: too many waiting")), false},
		{ErrIssuerUnavailable, false},
	} {
		if got := Refused(tc.err); got != tc.want {
			t.Errorf("Refused(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
