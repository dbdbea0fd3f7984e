package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// usageError is a mistake in the command line; it exits with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func exitCode(err error) int {
	var u *usageError
	var c *ConfigError
	switch {
	case errors.As(err, &u), errors.As(err, &c):
		return 2
	case errors.Is(err, flag.ErrHelp):
		return 0
	default:
		return 1
	}
}

const usage = `usage: connectd <command> [arguments]

commands:
  serve                         run the HTTP service
  demo                          dev-mode demo: connectd, IdP, demo provider, example MCP server
  migrate up|down|status        apply, roll back one, or list database migrations
  migrate create NAME           write a new empty SQL migration into ./migrations
  admin connections|events|keys inspect and revoke linked accounts, read the audit trail, admin API keys
  version                       print the version

Configuration comes from CONNECTD_* environment variables; see docs/configuration.md.
`

// run is the whole program: main only supplies the process's context, arguments,
// environment and output streams, so tests can call it directly.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &usageError{"no command given"}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return serve(ctx, rest, getenv, stdout, stderr)
	case "migrate":
		return migrate(ctx, rest, getenv, stdout, stderr)
	case "demo":
		return demo(ctx, rest, getenv, stdout, stderr)
	case "clients":
		return clientsCmd(ctx, rest, getenv, stdout, stderr)
	case "vault":
		return vaultCmd(ctx, rest, getenv, stdout, stderr)
	case "admin":
		return adminCmd(ctx, rest, getenv, stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "connectd", buildVersion())
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return &usageError{fmt.Sprintf("unknown command %q", cmd)}
	}
}

func buildVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return version
}
