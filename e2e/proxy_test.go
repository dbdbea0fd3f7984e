package e2e_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connectd/connectd/client"
	mcpserver "github.com/connectd/connectd/examples/mcp-server"
	"github.com/connectd/connectd/internal/flowtest"
)

// The example MCP server's two credential modes against a real connectd
// and the fake provider over HTTP. Every other test of this package runs
// the example in its default mode, through connectd's proxy.

// TestProxyOnlyExample: the example registered proxy-only, as the demo
// registers it. The consent page tells the user the application never
// receives the credential; the 2026-07-28 flow ends with the files, which
// can only have come through the proxy, since the token read is refused
// (token_release_disabled) for this client.
func TestProxyOnlyExample(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, worldOptions{legacy: mcpserver.LegacyElicit, proxyOnly: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	browsed := make(chan error, 4)
	cs, _, err := w.connect(ctx, "alice", client.ProtocolVersion20260728, mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			go func() { browsed <- w.browser().connectProxyOnly(r.Params.URL, "alice") }()
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := callListFiles(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, res)
	if err := wait(t, browsed, "the browser"); err != nil {
		t.Fatal(err)
	}
	// The same key and user token get no token.
	_, err = w.cd.Token(ctx, w.token("alice", w.mcpURL), providerName, scope)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || ae.Code != "token_release_disabled" {
		t.Fatalf("token read of a proxy-only client: %v", err)
	}
	// Connected: the next call answers at once, through the proxy again.
	res, err = callListFiles(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, res)
}

// connectProxyOnly is connect, checking that the consent page says the
// application never receives the credential.
func (b *browser) connectProxyOnly(connectURL, user string) error {
	status, page, err := b.open(connectURL, user)
	if err != nil {
		return err
	}
	form, ok := flowtest.AllowForm(page)
	if status != http.StatusOK || !ok || !strings.Contains(page, "never receives your") {
		return errors.New("the consent page of a proxy-only client does not say it never receives the credential")
	}
	r, err := b.b.Follow(http.MethodPost, connectURL, form)
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK || !strings.Contains(r.Body, "Connected") {
		return errors.New("after Allow: not connected")
	}
	return nil
}

// TestTokenModeExample: the example in token mode (-credential token) reads
// the token and calls the file service itself, on a 2025-11-25 session
// (elicitation/create within the call); once the operator switches its
// client to proxy-only, its next call fails with a tool error that says it
// must go through connectd, and no connect link.
func TestTokenModeExample(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, worldOptions{legacy: mcpserver.LegacyElicit, credential: mcpserver.CredentialToken})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	asked := make(chan struct{}, 4)
	browsed := make(chan error, 4)
	cs, _, err := w.connect(ctx, "alice", client.ProtocolVersion20251125, mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- struct{}{}
			go func() { browsed <- w.browser().connect(r.Params.URL, "alice") }()
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := callListFiles(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, res)
	if err := wait(t, browsed, "the browser"); err != nil {
		t.Fatal(err)
	}
	<-asked

	if err := w.env.Server.Clients().SetProxyOnly(ctx, w.clientID, true); err != nil {
		t.Fatal(err)
	}
	// connectd's client cache hears of the change through Postgres.
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err = callListFiles(ctx, cs)
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the token read still answers after the client became proxy-only")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if txt := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(txt, "never receive a token") {
		t.Fatalf("token mode of a proxy-only client: %q", txt)
	}
	if len(asked) != 0 {
		t.Fatal("a proxy-only refusal asked the user to connect")
	}
}
