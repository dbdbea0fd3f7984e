// Command connectd-faults is the fault study behind `make faults` (issue 22;
// not part of `make test`): two connectd replicas on the private Postgres of
// scripts/pg, a trusted issuer and fake providers served by this process,
// token-read and mint load, and one fault at a time — a Postgres restart, an
// outage, a frozen Postgres, an exhausted pool, provider answers that come
// late or are garbage, a replica killed in the middle of a refresh. For each
// it counts the answers by status and error code, the longest wait, the 503s
// carrying Retry-After and the credentials lost, and writes the table into
// docs/faults.md.
//
// It listens on loopback addresses only, stops by itself (every fault is
// bounded, the whole study by -timeout) and ends every process it started;
// a Postgres it froze is always thawed.
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
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "connectd-faults:", err)
		stop()
		os.Exit(1)
	}
}
