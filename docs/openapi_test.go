package docs_test

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/connectd/connectd/docs"
)

// TestOpenAPISecurity (issue 33): every security scheme openapi.yaml
// declares is one an operation accepts, and every /v1 operation accepts what
// /v1 authentication does (internal/mcpauth Authenticate): the client key or
// a private_key_jwt client assertion as the bearer, each with or without a
// DPoP proof, with the user's token. It declared the assertion and DPoP
// schemes and used neither.
func TestOpenAPISecurity(t *testing.T) {
	var spec struct {
		Security   []map[string][]string `yaml:"security"`
		Components struct {
			SecuritySchemes map[string]any `yaml:"securitySchemes"`
		} `yaml:"components"`
		Paths map[string]map[string]struct {
			Security *[]map[string][]string `yaml:"security"`
		} `yaml:"paths"`
	}
	if err := yaml.Unmarshal(docs.OpenAPI, &spec); err != nil {
		t.Fatal(err)
	}
	want := []string{"clientAssertion+dpopProof+userToken", "clientAssertion+userToken",
		"clientKey+dpopProof+userToken", "clientKey+userToken"} // sorted
	used := map[string]bool{}
	alternatives := func(reqs []map[string][]string) []string {
		var out []string
		for _, r := range reqs {
			var names []string
			for n := range r {
				names, used[n] = append(names, n), true
			}
			sort.Strings(names)
			out = append(out, strings.Join(names, "+"))
		}
		sort.Strings(out)
		return out
	}
	for path, item := range spec.Paths {
		for method, op := range item {
			reqs := spec.Security
			if op.Security != nil {
				reqs = *op.Security
			}
			got := alternatives(reqs)
			if (method == "options" || method == "trace") && op.Security != nil && len(*op.Security) == 0 {
				continue // the proxy's refused methods: 405 before any authentication
			}
			if strings.HasPrefix(path, "/v1/") && !slices.Equal(got, want) {
				t.Errorf("%s %s accepts %v, want %v", method, path, got, want)
			}
		}
	}
	for name := range spec.Components.SecuritySchemes {
		if !used[name] {
			t.Errorf("the security scheme %s is declared and no operation accepts it", name)
		}
	}
}
