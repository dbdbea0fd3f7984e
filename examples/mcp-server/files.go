package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connectd/connectd/client"
)

// Credential chooses how list_files uses the user's file-service
// credential. Both modes are decided by connectd alike (the same consent,
// account choice and refusals), so the tool answers connectd's refusals the
// same way in either; docs/integration.md says when to pick which.
type Credential int

const (
	// CredentialProxy (the default) sends the file-service call through
	// connectd's provider API proxy (client.ProviderClient): connectd
	// attaches the user's credential and forwards the call to the
	// provider's API base URL, so this server never holds the credential.
	// It is the only mode a client registered proxy-only can use.
	CredentialProxy Credential = iota
	// CredentialToken reads the user's token (client.AccountToken) and calls
	// the file service with it: for a provider SDK that cannot take a custom
	// transport, a protocol other than HTTP, or one hop less.
	CredentialToken
)

// ParseCredential reads a Credential by its name: proxy or token.
func ParseCredential(s string) (Credential, error) {
	switch s {
	case "proxy":
		return CredentialProxy, nil
	case "token":
		return CredentialToken, nil
	}
	return 0, fmt.Errorf("mcpserver: credential %q: want proxy or token", s)
}

// String is the Credential's name, as ParseCredential reads it.
func (c Credential) String() string {
	if c == CredentialToken {
		return "token"
	}
	return "proxy"
}

// list lists account's files (""; the one account this server is approved
// for) in the configured credential mode. A refusal by connectd (not
// connected, no consent, several accounts, unreachable, …) is returned as
// it is, for the caller to answer; every other outcome is the tool's answer:
// the files, or a stop (answered reports which).
func (s *Server) list(ctx context.Context, log *slog.Logger, u caller, account string) (*mcp.CallToolResult, FileList, error) {
	if s.cfg.Credential == CredentialToken {
		return s.listWithToken(ctx, log, u, account)
	}
	return s.listThroughProxy(ctx, log, u, account)
}

// answered reports whether list's err is the tool's answer (none, or a
// stop) rather than connectd's refusal.
func answered(err error) bool {
	var st *errStop
	return err == nil || errors.As(err, &st)
}

// listThroughProxy calls the file service through connectd's proxy: the
// *http.Client ProviderClient returns is what a provider's own Go SDK would
// be given. connectd's refusals come back as its *client.APIError (within
// the *url.Error http.Client wraps every error in), the file service's
// answers as they are.
func (s *Server) listThroughProxy(ctx context.Context, log *slog.Logger, u caller, account string) (*mcp.CallToolResult, FileList, error) {
	// The scopes the tool needs go with the call (Connectd-Scopes): an account
	// without them is connectd's insufficient_scope, answered with a link to
	// add them, not the provider's 403.
	hc := s.cfg.Connectd.ProviderClient(u.token, s.cfg.Provider, client.WithAccount(account), client.WithScopes(s.cfg.Scopes...))
	hc.Timeout = s.cfg.HTTPClient.Timeout
	// Only the path (below the provider's API base URL at connectd) and the
	// query count: the transport sends every request to connectd's proxy
	// for the provider, whatever scheme and host it names.
	target := (&url.URL{Scheme: "https", Host: s.cfg.Provider, Path: s.cfg.FilesPath}).String()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, FileList{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	var ae *client.APIError
	switch {
	case errors.As(err, &ae) && ae.Code == "provider_unauthorized":
		// The file service refused the credential even after connectd
		// refreshed it: the grant is dead there. As in token mode, unlink
		// that account so the next call reconnects.
		s.unlink(ctx, log, u, account)
		return nil, FileList{}, stop("The file service refused the stored authorization, so it was removed. Call list_files again to reconnect.")
	case errors.As(err, &ae) && ae.Code == "proxy_not_supported":
		log.WarnContext(ctx, "connectd has no API base URL for the provider: run this server with -credential token",
			slog.String("provider", s.cfg.Provider))
		return nil, FileList{}, stop("This server cannot reach the file service through connectd (it knows no API for it).")
	case err != nil:
		return nil, FileList{}, err // connectd's refusal, or connectd unreachable
	}
	defer resp.Body.Close()
	return s.decode(resp)
}

// listWithToken reads the user's token and calls the file service with it.
// The token goes only there: never into the result, an error or a log line.
func (s *Server) listWithToken(ctx context.Context, log *slog.Logger, u caller, account string) (*mcp.CallToolResult, FileList, error) {
	tok, err := s.cfg.Connectd.AccountToken(ctx, u.token, s.cfg.Provider, account, s.cfg.Scopes...)
	if errCode(err) == "token_release_disabled" {
		log.WarnContext(ctx, "this client is registered proxy-only at connectd: run this server with -credential proxy")
		return nil, FileList{}, stop("This server is registered at connectd to never receive a token; it must call the file service through connectd.")
	}
	if err != nil {
		return nil, FileList{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.FilesAPI, nil)
	if err != nil {
		return nil, FileList{}, err
	}
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	req.Header.Set("Accept", "application/json")
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		log.WarnContext(ctx, "file service unreachable", slog.Any("error", err))
		return nil, FileList{}, stop("The file service cannot be reached right now.")
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		// The provider no longer honours the stored grant (revoked there,
		// or the service lost it). Unlink that account, so the next call
		// reconnects.
		s.unlink(ctx, log, u, tok.Account.ID)
		return nil, FileList{}, stop("The file service refused the stored authorization, so it was removed. Call list_files again to reconnect.")
	}
	return s.decode(resp)
}

// unlink removes the user's connection to account ("": the one this
// server is approved for) after the file service refused it. A failure is
// only logged: the next call finds out again.
func (s *Server) unlink(ctx context.Context, log *slog.Logger, u caller, account string) {
	var err error
	if account == "" {
		_, err = s.cfg.Connectd.Unlink(ctx, u.token, s.cfg.Provider)
	} else {
		_, err = s.cfg.Connectd.UnlinkAccount(ctx, u.token, s.cfg.Provider, account)
	}
	if err != nil {
		log.WarnContext(ctx, "unlink after a refused credential failed", slog.String("code", errCode(err)))
	}
}

// decode turns the file service's answer into the tool's.
func (s *Server) decode(resp *http.Response) (*mcp.CallToolResult, FileList, error) {
	if resp.StatusCode != http.StatusOK {
		return nil, FileList{}, stop("The file service answered %d.", resp.StatusCode)
	}
	var out FileList
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return nil, FileList{}, stop("The file service's answer could not be read.")
	}
	if out.Files == nil {
		out.Files = []File{}
	}
	names := make([]string, len(out.Files))
	for i, f := range out.Files {
		names[i] = fmt.Sprintf("%s (%d bytes)", f.Name, f.Size)
	}
	text := fmt.Sprintf("%d files for %s: %s", len(out.Files), out.Owner, strings.Join(names, ", "))
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}
