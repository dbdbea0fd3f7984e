// Command try is a tiny MCP client for the demo (`make demo`): it gets an MCP
// access token for a demo user from the demo's identity provider, calls the
// example MCP server's list_files tool (or any server's tool: -tool NAME
// -args JSON) over streamable HTTP with the official Go SDK, and prints the
// connect link when the server asks the user to connect — open it in your
// browser and sign in as the same user.
//
// It plays each kind of MCP client a connectd-backed tool meets:
//
//	go run ./examples/mcp-server/cmd/try -user alice                  # URL mode, protocol 2026-07-28
//	go run ./examples/mcp-server/cmd/try -user alice -protocol 2025-11-25   # URL mode, 2025-11-25
//	go run ./examples/mcp-server/cmd/try -user alice -no-url          # no URL mode: the fallback
//	go run ./examples/mcp-server/cmd/try -user alice -token-only       # just print the access token
//	go run ./examples/mcp-server/cmd/try -mcp http://127.0.0.1:9000/mcp -tool search -args '{"q":"x"}'
//
// The demo's walkthrough prints these with the ports it uses (-idp, -mcp).
//
// With -no-url the client declares no URL-mode elicitation, so the server
// answers with a tool result that gives the link in plain words; try prints
// it and calls the tool again, as a user who asks again would, until the
// files come (each call is held by the server while the link is pending).
//
// A user with several file-service accounts this server may use is asked
// which (a form-mode elicitation: try lists them and reads the number you
// type), or, with -no-url, told them with their ids: pass one with
// -account cn_….
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connectd/connectd/examples/mcp-server/devtoken"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "try:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("try", flag.ContinueOnError)
	fs.SetOutput(stderr)
	user := fs.String("user", "alice", "demo user: alice or bob")
	idp := fs.String("idp", "http://127.0.0.1:8081", "the demo's identity provider (issuer URL)")
	endpoint := fs.String("mcp", "http://127.0.0.1:8083/mcp", "the example MCP server")
	protocol := fs.String("protocol", "2026-07-28", "MCP protocol version to ask for: 2026-07-28 or 2025-11-25")
	noURL := fs.Bool("no-url", false, "declare no URL-mode elicitation (a client that gets the fallback tool result)")
	tokenOnly := fs.Bool("token-only", false, "print the access token and exit")
	account := fs.String("account", "", "which of the user's file-service accounts: its id (cn_…) when there are several, or new to connect another")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	tool := fs.String("tool", "list_files", "the tool to call (any tool of the server at -mcp)")
	toolArgs := fs.String("args", "", `the tool's arguments, a JSON object such as '{"path":"/"}' (-account adds "account")`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	arguments := map[string]any{}
	if *toolArgs != "" {
		if err := json.Unmarshal([]byte(*toolArgs), &arguments); err != nil || arguments == nil {
			return fmt.Errorf("-args must be a JSON object, such as '{\"path\":\"/\"}': %v", err)
		}
	}
	if *account != "" {
		arguments["account"] = *account
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	token, err := devtoken.Get(ctx, devtoken.Request{Issuer: *idp, User: *user, Resource: *endpoint})
	if err != nil {
		return notRunning(err, "-idp", *idp)
	}
	if *tokenOnly {
		fmt.Fprintln(stdout, token)
		return nil
	}
	fmt.Fprintf(stderr, "signed in at %s as %s; MCP access token issued for %s\n", *idp, *user, *endpoint)

	completed := make(chan string, 4)
	in := bufio.NewScanner(stdin)
	opts := &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{
			URL: &mcp.URLElicitationCapabilities{}, Form: &mcp.FormElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if r.Params.Mode == "form" {
				return chooseAccount(stdout, in, r.Params)
			}
			showLink(stdout, *user, r.Params.Message, r.Params.URL)
			// accept = the user agrees to open the link; the interaction
			// itself happens in the browser.
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
		ElicitationCompleteHandler: func(_ context.Context, r *mcp.ElicitationCompleteNotificationRequest) {
			completed <- r.Params.ElicitationID
		},
	}
	if *noURL {
		// A client with no elicitation support at all.
		opts = &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "connectd-demo-try", Version: "1.0.0"}, opts)
	hc := &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: *endpoint, HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: *protocol})
	if err != nil {
		return notRunning(fmt.Errorf("connect to %s: %w", *endpoint, err), "-mcp", *endpoint)
	}
	defer cs.Close()
	fmt.Fprintf(stderr, "MCP session: protocol %s; calling %s (waits while you connect in the browser)\n",
		cs.InitializeResult().ProtocolVersion, *tool)
	if *noURL {
		return fallback(ctx, cs, *tool, arguments, stdout, stderr)
	}

	for attempt := 0; ; attempt++ {
		stop := waiting(ctx, stderr, *tool, "an answer, or the connect link (open it in the browser when it comes)")
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: *tool, Arguments: arguments})
		stop()
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) && rpcErr.Code == mcp.CodeURLElicitationRequired && attempt == 0 {
			// 2025-11-25 with URLElicitationRequiredError: open the link,
			// wait for notifications/elicitation/complete, retry.
			var data struct {
				Elicitations []mcp.ElicitParams `json:"elicitations"`
			}
			if err := json.Unmarshal(rpcErr.Data, &data); err != nil {
				return fmt.Errorf("URLElicitationRequiredError data: %w", err)
			}
			for _, e := range data.Elicitations {
				showLink(stdout, *user, e.Message, e.URL)
			}
			select {
			case id := <-completed:
				fmt.Fprintf(stderr, "server says elicitation %s is complete; retrying\n", id)
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", *tool, err)
		}
		printResult(stdout, res)
		if res.IsError {
			return errors.New("the tool reported an error")
		}
		return nil
	}
}

// fallback calls the tool as a client without URL mode: the first answer
// is the fallback result with the link; each later call is held by the
// server while the link is pending and answers the same text again, until
// the user has connected and the files come. A re-run while a link from an
// earlier run is still pending is held too, before any link is printed: try
// says so while it waits.
func fallback(ctx context.Context, cs *mcp.ClientSession, tool string, arguments map[string]any, stdout, stderr io.Writer) error {
	var last string
	for {
		what := "the answer; if a connect link from an earlier call is still pending, the server holds this call " +
			"until it is used or its wait ends (about a minute): open that link, or wait for a new one"
		if last != "" {
			what = "you to open the link above (the server holds the call while it is pending)"
		}
		stop := waiting(ctx, stderr, tool, what)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: arguments})
		stop()
		if err != nil {
			return fmt.Errorf("%s: %w", tool, err)
		}
		text := ""
		for _, ct := range res.Content {
			if t, ok := ct.(*mcp.TextContent); ok {
				text += t.Text
			}
		}
		if !res.IsError {
			fmt.Fprintln(stdout, text)
			return nil
		}
		if !strings.Contains(text, "/c/") {
			fmt.Fprintln(stdout, text)
			if strings.Contains(text, "cn_") {
				return errors.New("the tool asks which account: run try again with -account and one of the ids above")
			}
			return errors.New("the tool reported an error")
		}
		if text != last {
			fmt.Fprintf(stdout, "\n  The tool answered (this is what the model sees):\n\n%s\n\n", indent(text))
			last = text
		}
		fmt.Fprintf(stderr, "calling %s again, as a user who asks again would (the server holds the call while the link is pending)\n", tool)
	}
}

// waiting tells stderr, after a few seconds without an answer and then every
// 15 s, what the call to tool is waiting for, so a held call is not silence;
// stop ends it.
func waiting(ctx context.Context, stderr io.Writer, tool, what string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	start := time.Now()
	go func() {
		delay := 3 * time.Second
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			fmt.Fprintf(stderr, "%s: still waiting (%s) for %s\n", tool, time.Since(start).Round(time.Second), what)
			delay = 15 * time.Second
		}
	}()
	return cancel
}

// printResult prints a tool result's text, and any structured content as
// JSON (another server's tool may answer only that).
func printResult(w io.Writer, res *mcp.CallToolResult) {
	for _, ct := range res.Content {
		if t, ok := ct.(*mcp.TextContent); ok {
			fmt.Fprintln(w, t.Text)
		}
	}
	if res.StructuredContent != nil && len(res.Content) == 0 {
		if b, err := json.MarshalIndent(res.StructuredContent, "", "  "); err == nil {
			fmt.Fprintln(w, string(b))
		}
	}
}

// chooseAccount answers the server's form asking which account: it lists
// the options of the form's one titled enum and reads the number typed.
func chooseAccount(stdout io.Writer, in *bufio.Scanner, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	var schema struct {
		Properties map[string]struct {
			OneOf []struct {
				Const string `json:"const"`
				Title string `json:"title"`
			} `json:"oneOf"`
		} `json:"properties"`
	}
	b, err := json.Marshal(p.RequestedSchema)
	if err == nil {
		err = json.Unmarshal(b, &schema)
	}
	if err != nil || len(schema.Properties) != 1 {
		return nil, fmt.Errorf("a form try cannot fill in: %v", err)
	}
	var field string
	for f := range schema.Properties {
		field = f
	}
	options := schema.Properties[field].OneOf
	fmt.Fprintf(stdout, "\n  %s\n\n", strings.TrimSpace(p.Message))
	for i, o := range options {
		fmt.Fprintf(stdout, "    %d. %s\n", i+1, o.Title)
	}
	fmt.Fprintf(stdout, "\n  Type its number (anything else declines): ")
	if !in.Scan() {
		return &mcp.ElicitResult{Action: "cancel"}, nil
	}
	var n int
	if _, err := fmt.Sscan(in.Text(), &n); err != nil || n < 1 || n > len(options) {
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{field: options[n-1].Const}}, nil
}

func indent(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }

func showLink(w io.Writer, user, message, url string) {
	fmt.Fprintf(w, "\n  %s\n\n  Open this link in your browser and sign in as %s:\n\n    %s\n\n", strings.TrimSpace(message), user, url)
}

// bearer adds the MCP access token to every request, as an MCP client does
// after its own OAuth flow.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// notRunning adds to err, when nothing listened at the address (connection
// refused), what to check: the demo running, and its ports (issue 38 item
// 10: the README's line failed on moved ports with "connection refused").
func notRunning(err error, flag, url string) error {
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return err
	}
	return fmt.Errorf("%w\nnothing answers at %s: is make demo running? If it runs on other ports, "+
		"use the try line its walkthrough printed (it names %s)", err, url, flag)
}
