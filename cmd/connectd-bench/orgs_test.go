package main

import (
	"strings"
	"testing"
)

// TestOrgPair: one cycle of the orgs load meets every (organization, user)
// pair exactly once, and consecutive requests go to another organization
// (another client key).
func TestOrgPair(t *testing.T) {
	for _, tc := range []struct{ orgs, users int }{{1, 1}, {1, 5}, {3, 1}, {3, 4}, {100, 100}} {
		seen := map[[2]int]bool{}
		prev := -1
		for k := range tc.orgs * tc.users {
			o, u := orgPair(k, tc.orgs)
			if o < 0 || o >= tc.orgs || u < 0 || u >= tc.users {
				t.Fatalf("%d×%d: index %d → (%d, %d), out of range", tc.orgs, tc.users, k, o, u)
			}
			if seen[[2]int{o, u}] {
				t.Fatalf("%d×%d: index %d → (%d, %d) again", tc.orgs, tc.users, k, o, u)
			}
			seen[[2]int{o, u}] = true
			if tc.orgs > 1 && o == prev {
				t.Fatalf("%d×%d: index %d stays in organization %d", tc.orgs, tc.users, k, o)
			}
			prev = o
		}
		if len(seen) != tc.orgs*tc.users {
			t.Fatalf("%d×%d: %d pairs met", tc.orgs, tc.users, len(seen))
		}
	}
	if orgID(7) != "bench-org-007" || orgResource(7) != "https://bench-org-007.mcp.example/" ||
		orgUser(7, 42) != "bench-org-007-user-042" || strings.HasPrefix(orgUser(7, 42), "user-") {
		t.Fatalf("names: %s %s %s (the default organization's seeded users are user-NNNNN)", orgID(7), orgResource(7), orgUser(7, 42))
	}
}

// TestOrgsReport: the orgs row is named by its size, recognised whatever
// its size (and no other row is), related to the token lookup at the same
// level, and shown beside it in its own table.
func TestOrgsReport(t *testing.T) {
	name := orgsScenario(100, 100)
	if name != "token lookup, 100 organizations × 100 users" {
		t.Fatalf("row name %q", name)
	}
	for s, want := range map[string]bool{name: true, orgsScenario(2, 3): true, scenarioToken: false, scenarioNoCache: false,
		scenarioOpen: false, scenarioTraceOff: false} {
		if orgsRow(s) != want {
			t.Errorf("orgsRow(%q) = %v", s, !want)
		}
	}
	r := &results{Orgs: 100, OrgUsers: 100, OrgSeed: "4.2s", Results: []result{
		{Scenario: scenarioToken, Concurrency: 16, RPS: 20000, P99ms: 3, CPUPer1k: 0.04},
		{Scenario: scenarioToken, Concurrency: 64, RPS: 24000, P99ms: 10, CPUPer1k: 0.041},
		{Scenario: name, Concurrency: 16, RPS: 19000, P99ms: 3.5, CPUPer1k: 0.042},
		{Scenario: name, Concurrency: 64, RPS: 23000, P99ms: 11, CPUPer1k: 0.043},
		{Scenario: name, Concurrency: 256, Errors: 7, FirstError: "status 404: {\"code\":\"x|y\"}\n"},
	}}
	r.orgsRatios()
	if x, _ := r.find(name, 16); x.VsToken != 0.95 {
		t.Errorf("orgs at 16: vs token %v", x.VsToken)
	}
	if x, _ := r.find(scenarioToken, 16); x.VsToken != 0 {
		t.Errorf("the token lookup got a ratio to itself: %v", x.VsToken)
	}
	var b strings.Builder
	r.orgsTable(&b)
	for _, want := range []string{
		"seeded in 4.2s",
		"| 16 | 20000 | 19000 | 95.0 % | 3.00 / 3.50 | 0.040 / 0.042 | 0 |",
		"| 64 | 24000 | 23000 | 95.8 % | 10.00 / 11.00 | 0.041 / 0.043 | 0 |",
		"| 256 | — | 0 | — | — / 0.00 | — / 0.000 | 7 (status 404: {\"code\":\"x\\|y\"} ) |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("orgs table lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	(&results{Results: r.Results[:2]}).orgsTable(&b)
	if b.Len() != 0 {
		t.Errorf("orgs table without orgs rows:\n%s", b.String())
	}
}
