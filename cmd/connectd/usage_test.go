package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestHelp: every way of asking for help prints the usage on stdout, nothing
// on stderr, and exits 0; a wrong flag still exits 2 with the usage on stderr.
// No database is configured: help must not need one.
func TestHelp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string // in stdout
	}{
		{[]string{"help"}, "commands:"},
		{[]string{"help"}, "the development identity provider (users alice, bob and admin, no password),\nis a program of its own: make demo (cmd/connectd-demo)"},
		{[]string{"--help"}, "commands:"},
		{[]string{"-h"}, "commands:"},
		{[]string{"help", "admin"}, "connectd admin connections list"},
		{[]string{"help", "admin", "connections", "list"}, "-status"},
		{[]string{"serve", "--help"}, "-internal-addr"},
		{[]string{"serve", "--help"}, "the admin pages and admin API (/admin, /admin/api)"}, // on the public listener
		{[]string{"serve", "--help"}, "/metrics"},
		{[]string{"migrate", "--help"}, "migrate up|down|status"},
		{[]string{"migrate", "up", "--help"}, "migrate up|down|status"},
		{[]string{"clients", "--help"}, "clients rotate-key"},
		{[]string{"clients", "create", "--help"}, "-resource"},
		{[]string{"clients", "rotate-key", "-h"}, "-overlap"},
		{[]string{"clients", "update", "-h"}, "-no-providers"},
		{[]string{"clients", "delete", "--help"}, "-yes"},
		{[]string{"clients", "--help"}, "connectd clients delete ID --yes"},
		{[]string{"vault", "status", "-h"}, "webhook endpoint secrets"},
		{[]string{"clients", "--help"}, "clients webhooks add|list"},
		{[]string{"clients", "webhooks", "--help"}, "clients webhooks redeliver --id"},
		{[]string{"help", "clients", "webhooks"}, "clients webhooks deliveries --endpoint"},
		{[]string{"clients", "webhooks", "add", "--help"}, "-events"},
		{[]string{"clients", "webhooks", "list", "-h"}, "-client"},
		{[]string{"clients", "webhooks", "remove", "-h"}, "-id"},
		{[]string{"clients", "webhooks", "deliveries", "--help"}, "-limit"},
		{[]string{"clients", "webhooks", "delivery", "--help"}, "-id"},
		{[]string{"clients", "webhooks", "redeliver", "--help"}, "-id"},
		{[]string{"vault", "help"}, "vault rewrap"},
		{[]string{"vault", "gen-key", "--help"}, "-version"},
		{[]string{"vault", "status", "--help"}, "vault status"},
		{[]string{"vault", "rewrap", "-help"}, "-batch"},
		{[]string{"admin", "--help"}, "admin keys revoke"},
		{[]string{"admin", "connections", "--help"}, "admin connections show"},
		{[]string{"admin", "connections", "list", "--help"}, "-status"},
		{[]string{"admin", "connections", "revoke", "ID", "--help"}, "-yes"},
		{[]string{"admin", "events", "--help"}, "-window"},
		{[]string{"admin", "keys", "create", "--help"}, "-expires"},
		{[]string{"orgs", "--help"}, "connectd orgs apps set ORG PROVIDER --client-id ID"},
		{[]string{"help", "orgs"}, "connectd orgs update ID"},
		{[]string{"orgs", "update", "-h"}, "-brand-color"},
		{[]string{"orgs", "apps", "set", "--help"}, "-client-secret-file"},
		{[]string{"clients", "create", "--help"}, "-org"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, envOf(nil), &stdout, &stderr)
			if err != nil {
				t.Fatalf("err %v, want nil (exit 0)", err)
			}
			if !strings.Contains(stdout.String(), tt.want) {
				t.Errorf("stdout %q lacks %q", stdout.String(), tt.want)
			}
			if stderr.Len() != 0 {
				t.Errorf("stderr %q, want nothing", stderr.String())
			}
		})
	}
}

func TestWrongFlagIsUsageError(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"admin", "connections", "list", "--bogus"},
		{"serve", "-bogus"},
		{"clients", "create", "--nope"},
		{"clients", "webhooks", "add", "--nope"},
		{"vault", "rewrap", "-x"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, envOf(nil), &stdout, &stderr)
		if exitCode(err) != 2 || !strings.Contains(err.Error(), "not defined") {
			t.Errorf("%v: %v (exit %d), want a usage error (exit 2)", args, err, exitCode(err))
		}
		if stdout.Len() != 0 || !strings.Contains(stderr.String(), "usage") {
			t.Errorf("%v: stdout %q, stderr %q; want the usage on stderr only", args, stdout.String(), stderr.String())
		}
	}
}

// TestUsageListsEveryCommand: the top-level help names each command run
// dispatches, so an operator finds clients and vault from connectd -h.
func TestUsageListsEveryCommand(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"serve", "migrate", "clients", "vault", "admin", "version", "help"} {
		if !strings.Contains(usage, "\n  "+cmd+" ") {
			t.Errorf("usage does not list %q", cmd)
		}
		// and the command exists
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), []string{"help", cmd}, envOf(nil), &stdout, &stderr); err != nil {
			t.Errorf("help %s: %v", cmd, err)
		}
	}
}

// TestDemoIsItsOwnProgram: connectd demo says where the demo went (the
// demo's own help and flags are tested in cmd/connectd-demo).
func TestDemoIsItsOwnProgram(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"demo"}, envOf(nil), &stdout, &stderr)
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "make demo") {
		t.Fatalf("connectd demo: %v (exit %d), want a usage error naming make demo", err, exitCode(err))
	}
}
