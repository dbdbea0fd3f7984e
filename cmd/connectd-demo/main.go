// Command connectd-demo runs the whole product on one machine for a try-out:
// connectd (the real binary, in dev mode), an identity provider with the demo
// users alice, bob and admin, the Demo Files OAuth provider and the example MCP
// server, a second organization (globex) with its own Demo Files app, brand
// and instance of the example MCP server, and prints a walkthrough. make demo
// and docker compose up run it.
//
// It is a binary of its own so that connectd links none of its fakes (they
// import testing and net/http/httptest) and not the MCP SDK.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return
	}
	fmt.Fprintln(os.Stderr, "connectd-demo:", err)
	stop()
	var u *usageError
	if errors.As(err, &u) {
		os.Exit(2)
	}
	os.Exit(1)
}
