package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// TestArgs: -args must be a JSON object; a mistake is said before anything
// is fetched.
func TestArgs(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"not json", "[1,2]", "null", `"x"`} {
		err := run(context.Background(), []string{"-tool", "search", "-args", bad, "-idp", "http://127.0.0.1:1"},
			strings.NewReader(""), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "-args must be a JSON object") {
			t.Errorf("-args %s: %v", bad, err)
		}
	}
}

// TestNothingListening (issue 38 item 10): with nothing at the identity
// provider's address (the demo not running, or on other ports), try says
// what to check and which flag names the address, not only "connection
// refused".
func TestNothingListening(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), []string{"-idp", "http://127.0.0.1:1"}, strings.NewReader(""), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "is make demo running?") || !strings.Contains(err.Error(), "-idp") {
		t.Fatalf("try with nothing listening: %v", err)
	}
}
