package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/connectd/connectd/client"
)

// LegacyStyle chooses how a 2025-11-25 session is sent to connectd.
type LegacyStyle int

const (
	// LegacyElicit sends an elicitation/create request (mode "url") within
	// the tool call, waits for connectd to report completion, sends
	// notifications/elicitation/complete and finishes the call.
	LegacyElicit LegacyStyle = iota
	// LegacyError answers the tool call with URLElicitationRequiredError
	// (-32042), sends notifications/elicitation/complete when connectd
	// reports completion, and serves the client's retry.
	LegacyError
)

// Config configures the example server. Every field without a default is
// required.
type Config struct {
	// Resource is this MCP server's URL (its RFC 8707 resource URI), e.g.
	// https://files.mcp.example/mcp: callers' access tokens must name it in
	// aud, it is the resource registered for this server at connectd, and
	// its path is where Handler serves MCP.
	Resource string
	// Issuer is the MCP authorization server whose access tokens are
	// accepted.
	Issuer string
	// JWKSURL is the issuer's key set; empty: taken from its discovery
	// document.
	JWKSURL string
	// Connectd is the connectd API client (this server's client key).
	Connectd *client.Client
	// Provider is connectd's id of the file service, and Scopes what the
	// tool needs of it.
	Provider string
	Scopes   []string
	// Credential chooses how the tool uses the user's credential: through
	// connectd's proxy (CredentialProxy, the default), or read and sent by
	// this server (CredentialToken).
	Credential Credential
	// FilesPath is the file service's list endpoint below the provider's API
	// base URL at connectd (its api_base_url), called through the proxy
	// (default /files).
	FilesPath string
	// IssuesPath is where open_issue POSTs below the provider's API base
	// URL at connectd, through the proxy in either credential mode;
	// "{repo}" stands for the tool's owner/name (default
	// DefaultIssuesPath).
	IssuesPath string
	// FilesAPI is the file service's list endpoint URL, called with the
	// user's provider token (CredentialToken only, and required then).
	FilesAPI string
	// Legacy chooses the 2025-11-25 shape (default LegacyElicit).
	Legacy LegacyStyle
	// WaitTimeout bounds how long a 2025-11-25 tool call waits, after the
	// client accepted the elicitation/create, for the user to finish in the
	// browser (default 5m). After it, the call ends with a message asking to
	// try again. That call stays open meanwhile: set it below the request
	// timeout of the clients you serve (the TypeScript SDK's default is 60 s).
	WaitTimeout time.Duration
	// RetryHold bounds how long a 2026-07-28 retry that carries a still
	// pending requestState is held on connectd's long-poll before it is
	// answered a fresh InputRequiredResult with the same link (default
	// DefaultRetryHold). It must stay well inside the time the MCP client
	// waits for an answer: a retry held longer is abandoned by the client,
	// and the answer is lost.
	RetryHold time.Duration
	// HTTPClient is used for the issuer's keys and, with CredentialToken,
	// the file service (default: 15 s timeout); its Timeout also bounds a
	// call through the proxy, made with Connectd's own transport.
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// DefaultRetryHold is Config.RetryHold's default: half the 60 s the
// official TypeScript SDK's clients (v1 and v2, DEFAULT_REQUEST_TIMEOUT_MSEC)
// wait for a request's answer by default — the Go SDK's client has no
// timeout of its own — which leaves the other half for the token read and
// the provider call that follow a completed connection, and for the network.
const DefaultRetryHold = 30 * time.Second

// Server is the example MCP server: list_files, which needs the user's
// file-service account through connectd, and open_issue, a proxied POST
// the operator may make the user approve first.
type Server struct {
	cfg       Config
	logger    *slog.Logger
	mcp       *mcp.Server
	verifier  *verifier
	legacy    http.Handler // stateful streamable HTTP: protocol ≤ 2025-11-25
	stateless http.Handler // stateless streamable HTTP: protocol ≥ 2026-07-28
	path      string       // path of Resource

	// denials are approvals denied after their call was answered -32042,
	// by caller and request digest (followApproval), for the retry.
	denials sync.Map

	ctx    context.Context // ends background notifiers and JWKS refreshes
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New builds the server. It fetches the issuer's discovery document (unless
// JWKSURL is set), so the issuer must be reachable.
func New(ctx context.Context, cfg Config) (*Server, error) {
	ru, err := url.Parse(cfg.Resource)
	switch {
	case err != nil || (ru.Scheme != "https" && ru.Scheme != "http") || ru.Host == "" || ru.Fragment != "":
		return nil, errors.New("mcpserver: Resource must be an absolute http(s) URL")
	case cfg.Issuer == "" || cfg.Connectd == nil || cfg.Provider == "":
		return nil, errors.New("mcpserver: Issuer, Connectd and Provider are required")
	case cfg.Credential == CredentialToken && cfg.FilesAPI == "":
		return nil, errors.New("mcpserver: FilesAPI is required with CredentialToken")
	case cfg.Credential != CredentialProxy && cfg.Credential != CredentialToken:
		return nil, errors.New("mcpserver: Credential must be CredentialProxy or CredentialToken")
	}
	if cfg.FilesPath == "" {
		cfg.FilesPath = "/files"
	}
	if cfg.IssuesPath == "" {
		cfg.IssuesPath = DefaultIssuesPath
	}
	if cfg.WaitTimeout <= 0 {
		cfg.WaitTimeout = 5 * time.Minute
	}
	if cfg.RetryHold <= 0 {
		cfg.RetryHold = DefaultRetryHold
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 15 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, logger: cfg.Logger, path: ru.EscapedPath()}
	if s.path == "" {
		s.path = "/"
	}
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if s.verifier, err = newVerifier(s.ctx, cfg, cfg.Logger); err != nil {
		s.cancel()
		return nil, fmt.Errorf("mcpserver: %w", err)
	}

	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "connectd-example-files", Version: "1.0.0"},
		&mcp.ServerOptions{Logger: cfg.Logger,
			Instructions: "list_files lists the user's files at the file service; the first call asks the user to connect it. " +
				"open_issue opens an issue; the user may be asked to approve it first."})
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "list_files",
		Title:       "List my files",
		Description: "Lists the files in the user's file-service account. The first time, the user is asked to connect that account in the browser.",
	}, s.listFiles)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:  "open_issue",
		Title: "Open an issue",
		Description: "Opens an issue in one of the user's repositories at the service. connectd may ask the user to approve " +
			"the request first; a denied request is not made.",
	}, s.openIssue)
	s.mcp.AddReceivingMiddleware(withoutContent)

	get := func(*http.Request) *mcp.Server { return s.mcp }
	// Two transports over one mcp.Server: 2025-11-25 needs a session (the
	// server sends elicitation/create and notifications on it), while the
	// SDK serves 2026-07-28 only statelessly.
	s.legacy = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Logger: cfg.Logger, SessionTimeout: 30 * time.Minute})
	s.stateless = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Logger: cfg.Logger, Stateless: true,
		PropagateRequestCancellation: true})
	return s, nil
}

// Handler serves MCP at the Resource's path, behind bearer-token
// verification, and the RFC 9728 protected-resource metadata that tells MCP
// clients where to get a token.
func (s *Server) Handler() http.Handler {
	metaPath := "/.well-known/oauth-protected-resource" + strings.TrimSuffix(s.path, "/")
	origin := strings.TrimSuffix(s.cfg.Resource, s.path)
	meta := auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               s.cfg.Resource,
		AuthorizationServers:   []string{s.cfg.Issuer},
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "connectd example: files",
	})
	requireToken := auth.RequireBearerToken(s.verifier.verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: origin + metaPath,
		ClockSkew:           s.verifier.skew,
	})
	mux := http.NewServeMux()
	mux.Handle("GET "+metaPath, meta)
	if metaPath != "/.well-known/oauth-protected-resource" {
		mux.Handle("GET /.well-known/oauth-protected-resource", meta)
	}
	mux.Handle(s.path, http.NewCrossOriginProtection().Handler(requireToken(http.HandlerFunc(s.serveMCP))))
	return mux
}

// serveMCP routes by protocol generation. Requests of 2026-07-28 and later
// carry their version in the Mcp-Protocol-Version header (the SDK client sets
// it from the request's _meta, server/discover included); older sessions
// send their negotiated version, or none before initialize.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if v := r.Header.Get("Mcp-Protocol-Version"); v >= client.ProtocolVersion20260728 {
		s.stateless.ServeHTTP(w, r)
		return
	}
	s.legacy.ServeHTTP(w, r)
}

// inputRequired is a CallToolResult of resultType input_required as
// 2026-07-28 writes it. The SDK's CallToolResult always writes "content"
// (null when unset), a field an input_required result does not have; clients
// accept it today only by leniency.
type inputRequired struct {
	mcp.ResultBase
	ResultType    string              `json:"resultType"`
	InputRequests mcp.InputRequestMap `json:"inputRequests,omitempty"`
	RequestState  string              `json:"requestState,omitempty"`
}

// withoutContent sends a tool's InputRequiredResult as inputRequired. It
// wraps the SDK's own middleware, so only a result the SDK marked
// input_required (a 2026-07-28 request's) is rewritten: on older sessions the
// SDK has already turned input requests into elicitation/create.
func withoutContent(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.CallToolResult); ok && err == nil && r.NeedsInput() {
			out := &inputRequired{ResultType: "input_required", InputRequests: r.InputRequests, RequestState: r.RequestState}
			out.Meta = r.Meta
			return out, nil
		}
		return res, err
	}
}

// Close stops background work (completion notifiers, key refreshes).
func (s *Server) Close() {
	s.cancel()
	s.wg.Wait()
}
