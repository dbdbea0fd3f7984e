// Command connectd-bench is the benchmark harness behind `make bench`: it
// starts connectd replicas on the private Postgres, seeds users with
// connections, drives load at fixed concurrency levels and measures, in the
// same run, the baselines the results are judged against (pgbench -S on the
// same cluster, a trivial Go HTTP handler, and for the provider API proxy
// the same GET made straight to the fake provider API it serves). See
// docs/performance.md.
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
		fmt.Fprintln(os.Stderr, "connectd-bench:", err)
		stop()
		os.Exit(1)
	}
}
