package main

import (
	"context"
	"io"
)

// vaultCmd manages credential encryption keys: connectd vault gen-key|status|rewrap.
func vaultCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return &usageError{"connectd vault: not available yet"}
}
