package client_test

import (
	"context"
	"errors"
	"fmt"
	"go/build"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/client"
)

// An MCP tool handler that needs the user's GitHub token. userToken is the
// caller's verified MCP access token; peer what its MCP client declared
// (protocol version, URL-mode elicitation).
func Example() {
	cd, err := client.New(client.Config{BaseURL: "https://connect.example.com", Key: "cks_…"})
	if err != nil {
		panic(err)
	}
	handle := func(ctx context.Context, userToken string, peer client.Peer, requestState string) (any, error) {
		if requestState != "" { // 2026-07-28: the client retried with the echoed requestState
			st, err := cd.Resume(ctx, userToken, requestState, "", 30*time.Second)
			switch {
			case errors.Is(err, client.ErrRequestState): // stale: start over below
			case err != nil:
				return nil, err
			case st.Status == client.StatusPending:
				return cd.Reissue(st, "Still waiting for you to connect GitHub.", "")
			case st.Status != client.StatusCompleted:
				return nil, fmt.Errorf("GitHub was not connected (%s)", st.Status)
			}
		}
		tok, err := cd.Token(ctx, userToken, "github", "repo")
		if client.NeedsConnection(err) {
			ans, err := cd.RequireConnection(ctx, userToken, peer,
				client.MintRequest{Provider: "github", Scopes: []string{"repo"}})
			switch {
			case err != nil:
				return nil, err
			case ans.Fallback != nil: // no URL mode: a tool result with the link, in plain words
				return ans.Fallback, nil
			case ans.Generation == client.GenerationInputRequired && !ans.Ready:
				return ans.Result, nil // InputRequiredResult
			case !ans.Ready:
				return nil, ans.Error // URLElicitationRequiredError (or send ans.ElicitRequest, then Wait)
			}
			// Ready: a retry, and the user finished while it waited.
			tok, err = cd.Token(ctx, userToken, "github", "repo")
		}
		if err != nil {
			return nil, err
		}
		return callGitHub(ctx, tok.AccessToken)
	}
	_ = handle
}

func callGitHub(context.Context, string) (any, error) { return nil, nil }

// TestImportsOnlyStdlib keeps the package importable from anywhere: no
// connectd internals, no third-party modules.
func TestImportsOnlyStdlib(t *testing.T) {
	p, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range p.Imports {
		if first, _, _ := strings.Cut(imp, "/"); strings.Contains(first, ".") || strings.Contains(imp, "internal") {
			t.Errorf("client imports %s", imp)
		}
	}
}
