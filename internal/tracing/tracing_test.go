package tracing

import (
	"context"
	"testing"
)

// TestOffIsNothing: tracing off builds no provider (callers then install
// nothing); on, it needs an endpoint.
func TestOffIsNothing(t *testing.T) {
	t.Parallel()
	tr, err := New(context.Background(), Config{})
	if err != nil || tr.Provider() != nil {
		t.Fatalf("off: %v, %v", tr.Provider(), err)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), Config{Enabled: true}); err == nil {
		t.Fatal("on without an endpoint")
	}
	var none *Tracing
	if none.Provider() != nil || none.ForceFlush(context.Background()) != nil {
		t.Fatal("a nil Tracing is not off")
	}
}
