package problem_test

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/connectd/connectd/internal/problem"
)

func TestDetail(t *testing.T) {
	t.Parallel()
	own := fmt.Errorf("webhook: %w", problem.ErrInvalid)
	err := fmt.Errorf("create endpoint: %w", problem.Detail(own, "url %v", fs.ErrNotExist))
	if !errors.Is(err, own) || !errors.Is(err, problem.ErrInvalid) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%v is not what it wraps", err)
	}
	if errors.Is(err, problem.ErrNotFound) {
		t.Fatalf("%v is another kind", err)
	}
	if d, ok := problem.Description(err); !ok || d != "url file does not exist" {
		t.Fatalf("Description = %q, %v", d, ok)
	}
	if _, ok := problem.Description(own); ok {
		t.Fatal("a bare kind has a description")
	}
	a := problem.About("github", err)
	if n, ok := problem.Subject(a); !ok || n != "github" || !errors.Is(a, problem.ErrInvalid) || a.Error() != err.Error() {
		t.Fatalf("About: %q %v %v", n, ok, a)
	}
	if problem.About("x", nil) != nil {
		t.Fatal("About(nil) is not nil")
	}
}
