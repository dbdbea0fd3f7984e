// Command mcp-server runs the example MCP server (package mcpserver) on its
// own, against a running connectd:
//
//	CONNECTD_CLIENT_KEY=cks_… go run ./examples/mcp-server/cmd/mcp-server \
//	    -connectd https://connect.example.com -issuer https://auth.example.com \
//	    -resource https://files.mcp.example/mcp
//
// By default it calls the file service through connectd's proxy (-credential
// proxy, -files-path below the provider's API base URL at connectd), so it
// never holds a credential and works for a client registered proxy-only.
// -credential token reads the user's token instead and calls -files-api with
// it (the client must not be proxy-only).
//
// `make demo` (cmd/connectd-demo) runs the same server in-process, with everything wired.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/connectd/connectd/client"
	mcpserver "github.com/connectd/connectd/examples/mcp-server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mcp-server:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("mcp-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8083", "listen address")
	resource := fs.String("resource", "http://127.0.0.1:8083/mcp", "this server's URL (the audience of its users' tokens)")
	issuer := fs.String("issuer", "", "the MCP authorization server (required)")
	connectd := fs.String("connectd", "", "connectd's public URL (required); the client key comes from CONNECTD_CLIENT_KEY")
	provider := fs.String("provider", "demo-files", "connectd provider id of the file service")
	scopes := fs.String("scopes", "files.read", "comma-separated scopes the tool needs")
	credential := fs.String("credential", "proxy", "proxy (call the file service through connectd) or token (read the user's token and call it)")
	filesPath := fs.String("files-path", "/files", "with -credential proxy: the list endpoint below the provider's API base URL at connectd")
	issuesPath := fs.String("issues-path", mcpserver.DefaultIssuesPath,
		"open_issue's POST below the provider's API base URL at connectd ({repo} is owner/name); always through connectd's proxy")
	filesAPI := fs.String("files-api", "", "with -credential token: the file service's list endpoint URL (required then)")
	legacy := fs.String("legacy", "elicit", "2025-11-25 shape: elicit (elicitation/create) or error (URLElicitationRequiredError)")
	retryHold := fs.Duration("retry-hold", mcpserver.DefaultRetryHold,
		"how long a 2026-07-28 retry with a pending requestState is held before it gets the link again; keep it well below your clients' request timeout (the TypeScript SDK's: 60s)")
	waitTimeout := fs.Duration("wait-timeout", 5*time.Minute,
		"how long a 2025-11-25 call waits for the user in the browser after elicitation/create")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cred, err := mcpserver.ParseCredential(*credential)
	switch {
	case err != nil:
		return errors.New("-credential must be proxy or token")
	case *issuer == "" || *connectd == "":
		return errors.New("-issuer and -connectd are required")
	case cred == mcpserver.CredentialToken && *filesAPI == "":
		return errors.New("-files-api is required with -credential token")
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	cd, err := client.New(client.Config{BaseURL: *connectd, Key: getenv("CONNECTD_CLIENT_KEY")})
	if err != nil {
		return err
	}
	style := mcpserver.LegacyElicit
	if *legacy == "error" {
		style = mcpserver.LegacyError
	}
	srv, err := mcpserver.New(ctx, mcpserver.Config{Resource: *resource, Issuer: *issuer, Connectd: cd,
		Provider: *provider, Scopes: strings.Split(*scopes, ","), Credential: cred, FilesPath: *filesPath, IssuesPath: *issuesPath, FilesAPI: *filesAPI,
		Legacy: style, RetryHold: *retryHold, WaitTimeout: *waitTimeout, Logger: logger})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	u, _ := url.Parse(*resource)
	logger.InfoContext(ctx, "example MCP server listening", slog.String("addr", ln.Addr().String()), slog.String("resource", u.String()))
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
