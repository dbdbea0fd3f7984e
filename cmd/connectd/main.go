// Command connectd is the hosted third-party OAuth connect broker for MCP
// URL-mode elicitation. See README.md and docs/.
//
// This package reads and validates the configuration (CONNECTD_*), opens the
// database, listens, and runs the subcommands; `serve` builds the app with
// internal/server, the one wiring every test harness uses too.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	warnUnknownVars(os.Environ(), os.Getenv, os.Stderr)
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "connectd:", err)
		stop()
		os.Exit(exitCode(err))
	}
}
