package main

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestClientsUsageNamesEachFlag (issue 33): connectd clients -h lists, under
// each subcommand, exactly the flags that subcommand defines — and so does
// the subcommand's own -h line. The group's text had create's --jwks-url |
// --public-key under delete, and update without --logo-url and --homepage.
func TestClientsUsageNamesEachFlag(t *testing.T) {
	t.Parallel()
	defined := regexp.MustCompile(`(?m)^  -([a-z][a-z-]*)`)
	named := regexp.MustCompile(`--([a-z][a-z-]*)`)
	flagsIn := func(re *regexp.Regexp, s string) []string {
		var out []string
		for _, m := range re.FindAllStringSubmatch(s, -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
		slices.Sort(out)
		return out
	}
	// The group's text, one section per subcommand.
	sections := map[string]string{}
	var sub string
	for _, line := range strings.Split(clientsUsage, "\n") {
		if rest, ok := strings.CutPrefix(line, "  connectd clients "); ok {
			sub, _, _ = strings.Cut(rest, " ")
		}
		sections[sub] += line + "\n"
	}
	for sub, args := range clientsSubUsage {
		t.Run(sub, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := run(context.Background(), []string{"clients", sub, "-h"}, envOf(nil), &stdout, &stderr); err != nil {
				t.Fatalf("clients %s -h: %v", sub, err)
			}
			want := flagsIn(defined, stdout.String())
			if got := flagsIn(named, args); !slices.Equal(got, want) {
				t.Errorf("clients %s -h names %v; it defines %v", sub, got, want)
			}
			if got := flagsIn(named, sections[sub]); !slices.Equal(got, want) {
				t.Errorf("clients -h names %v under %s; it defines %v:\n%s", got, sub, want, sections[sub])
			}
		})
	}
}
