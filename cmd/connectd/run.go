package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func exitCode(err error) int {
	var u *usageError
	var c *ConfigError
	switch {
	case errors.As(err, &u), errors.As(err, &c):
		return 2
	default:
		return 1
	}
}

// run is the whole program: main only supplies the process's context, arguments,
// environment and output streams, so tests can call it directly.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	err := dispatch(ctx, args, getenv, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // the help went to stdout
	}
	return err
}

func dispatch(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
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
		// The demo links fakes and the MCP SDK, which connectd must not.
		return &usageError{"the demo is a program of its own: make demo, or go run ./cmd/connectd-demo -h"}
	case "clients":
		return clientsCmd(ctx, rest, getenv, stdout, stderr)
	case "orgs":
		return orgsCmd(ctx, rest, getenv, os.Stdin, stdout, stderr)
	case "vault":
		return vaultCmd(ctx, rest, getenv, stdout, stderr)
	case "admin":
		return adminCmd(ctx, rest, getenv, stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "connectd", buildVersion())
		return nil
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 && rest[0] != "help" && !isHelp(rest[0]) {
			// connectd help CMD [SUB] is connectd CMD [SUB] --help.
			return dispatch(ctx, append(append([]string{}, rest...), "--help"), getenv, stdout, stderr)
		}
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
