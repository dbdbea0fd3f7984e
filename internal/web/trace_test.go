package web

import "testing"

func TestSpanName(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ method, pattern, name, route string }{
		{"GET", "GET /c/{id}", "GET /c/{id}", "/c/{id}"},
		{"POST", "/v1/proxy/{provider}/{path...}", "POST /v1/proxy/{provider}/{path...}", "/v1/proxy/{provider}/{path...}"},
		{"_OTHER", "/", "_OTHER /", "/"},
		{"GET", "", "GET", ""},
	} {
		if name, route := spanName(c.method, c.pattern); name != c.name || route != c.route {
			t.Errorf("spanName(%q, %q) = %q, %q", c.method, c.pattern, name, route)
		}
	}
	if spanMethod("BREW") != "_OTHER" || spanMethod("DELETE") != "DELETE" {
		t.Error("spanMethod")
	}
}
