package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// usage is the top-level help: every command an operator can run.
const usage = `usage: connectd <command> [arguments]

commands:
  serve                          run the HTTP service (public and operators' listeners)
  migrate up|down|status         apply, roll back one, or list database migrations
  migrate create NAME            write a new empty SQL migration into ./migrations
  clients create|list|disable|enable|rotate-key|webhooks
                                 register MCP servers (clients), manage their keys and
                                 webhook endpoints
  orgs create|list|show|update|delete|apps
                                 organizations, their branding and their own OAuth apps
  vault gen-key|status|rewrap    credential encryption keys and key rotation
  admin connections|events|keys|sessions
                                 inspect and revoke linked accounts, read the audit trail, admin API keys,
                                 end a user's browser sessions
  version                        print the version
  help [COMMAND]                 print this help, or a command's

Every command takes -h (or --help). Configuration comes from CONNECTD_*
environment variables; see docs/configuration.md. The dev-mode demo, with
the development identity provider (users alice, bob and admin, no password),
is a program of its own: make demo (cmd/connectd-demo).
`

// usageError is a mistake in the command line; it exits with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// isHelp reports whether a command-line word asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// helpRequested reports whether args ask for help with a -h, -help or --help
// flag before any "--".
func helpRequested(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a != "help" && isHelp(a) {
			return true
		}
	}
	return false
}

// groupArgs splits a command group's subcommand from its arguments. No
// subcommand is a usage error (text on stderr, exit 2); "help", -h or --help
// in its place prints text on stdout and returns flag.ErrHelp, which run turns
// into exit 0.
func groupArgs(args []string, text string, stdout io.Writer) (string, []string, error) {
	if len(args) == 0 {
		return "", nil, &usageError{text}
	}
	if isHelp(args[0]) {
		fmt.Fprintln(stdout, text)
		return "", nil, flag.ErrHelp
	}
	return args[0], args[1:], nil
}

// parseFlags parses a (sub)command's arguments, flags and positional
// arguments interleaved. Asked for help (-h, -help, --help), it prints text
// and the flags on stdout and returns flag.ErrHelp (exit 0); a wrong flag
// prints them on stderr and returns a usageError (exit 2).
func parseFlags(fset *flag.FlagSet, text string, args []string, stdout, stderr io.Writer) ([]string, error) {
	fset.Usage = func() {
		out := fset.Output()
		fmt.Fprintln(out, strings.TrimRight(text, "\n"))
		n := 0
		fset.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(out, "\nflags:")
			fset.PrintDefaults()
		}
	}
	if helpRequested(args) {
		fset.SetOutput(stdout)
		fset.Usage()
		return nil, flag.ErrHelp
	}
	fset.SetOutput(stderr)
	pos, err := parseInterspersed(fset, args)
	if err != nil {
		return nil, &usageError{err.Error()}
	}
	return pos, nil
}

// parseInterspersed parses flags that may follow positional arguments
// ("revoke ID --yes"), which flag.Parse alone stops at.
func parseInterspersed(fset *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fset.Parse(args); err != nil {
			return nil, err
		}
		args = fset.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
