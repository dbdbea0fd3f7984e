package main

import (
	"context"
	"io"
)

// clientsCmd manages MCP-server clients: connectd clients create|list|disable|rotate-key.
func clientsCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return &usageError{"connectd clients: not available yet"}
}
