package client

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// MCP protocol versions that matter to connectd.
const (
	// ProtocolVersion20251125 introduced URL-mode elicitation: the server
	// sends elicitation/create (mode "url") or answers with
	// URLElicitationRequiredError, and sends notifications/elicitation/complete
	// when the out-of-band interaction is done.
	ProtocolVersion20251125 = "2025-11-25"
	// ProtocolVersion20260728 replaced server-to-client requests with
	// multi-round-trip requests: the server answers InputRequiredResult
	// (inputRequests + requestState) and the client retries with
	// inputResponses and the echoed requestState.
	ProtocolVersion20260728 = "2026-07-28"
)

// URLElicitationRequiredCode is the JSON-RPC error code of
// URLElicitationRequiredError (2025-11-25).
const URLElicitationRequiredCode = -32042

// ResultTypeInputRequired is InputRequiredResult's resultType.
const ResultTypeInputRequired = "input_required"

// ElicitParams are the params of a URL-mode elicitation/create request,
// with the MCP field names.
type ElicitParams struct {
	Mode string `json:"mode"` // always "url"
	// ElicitationID is required by 2025-11-25 (and echoed by
	// notifications/elicitation/complete); 2026-07-28 input requests leave
	// it out.
	ElicitationID string `json:"elicitationId,omitempty"`
	URL           string `json:"url"`
	Message       string `json:"message"`
}

// InputRequest is one entry of InputRequiredResult.inputRequests.
type InputRequest struct {
	Method string       `json:"method"` // "elicitation/create"
	Params ElicitParams `json:"params"`
}

// RPCError is a JSON-RPC error object; connectd fills it as
// URLElicitationRequiredError.
type RPCError struct {
	Code    int                `json:"code"`
	Message string             `json:"message"`
	Data    URLElicitationData `json:"data"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// URLElicitationData is URLElicitationRequiredError's data.
type URLElicitationData struct {
	Elicitations []ElicitParams `json:"elicitations"`
}

// InputRequiredResult is the 2026-07-28 answer to a request that needs the
// user first.
type InputRequiredResult struct {
	ResultType    string                  `json:"resultType"` // "input_required"
	InputRequests map[string]InputRequest `json:"inputRequests"`
	RequestState  string                  `json:"requestState"`
}

// Generation is how an MCP protocol version lets a server send the user to a
// URL.
type Generation int

// Protocol generations.
const (
	// GenerationNone: before 2025-11-25 there is no URL-mode elicitation.
	GenerationNone Generation = iota
	// GenerationURLElicitation: 2025-11-25 (elicitation/create or
	// URLElicitationRequiredError, then notifications/elicitation/complete).
	GenerationURLElicitation
	// GenerationInputRequired: 2026-07-28 and later (InputRequiredResult).
	GenerationInputRequired
)

func (g Generation) String() string {
	switch g {
	case GenerationURLElicitation:
		return "url-elicitation (2025-11-25)"
	case GenerationInputRequired:
		return "input-required (2026-07-28)"
	}
	return "none"
}

// GenerationOf returns the generation of a negotiated protocol version.
// Versions are dates (YYYY-MM-DD), so they compare as strings.
func GenerationOf(protocolVersion string) Generation {
	if _, err := time.Parse(time.DateOnly, protocolVersion); err != nil {
		return GenerationNone
	}
	switch {
	case protocolVersion >= ProtocolVersion20260728:
		return GenerationInputRequired
	case protocolVersion >= ProtocolVersion20251125:
		return GenerationURLElicitation
	}
	return GenerationNone
}

// Peer is what the MCP client declared for the request being answered.
type Peer struct {
	// ProtocolVersion is the negotiated MCP protocol version (2026-07-28
	// and later: the request's own).
	ProtocolVersion string
	// URLElicitation reports that the client declared elicitation mode
	// "url": capabilities.elicitation.url in initialize (2025-11-25), or in
	// the request's _meta "io.modelcontextprotocol/clientCapabilities"
	// (2026-07-28). An empty elicitation object declares form mode only.
	URLElicitation bool
	// FormElicitation reports that the client declared form-mode
	// elicitation: capabilities.elicitation.form, or an elicitation object
	// with neither form nor url (which declares form mode). It lets the
	// server ask the user which account (AccountChoice.Form).
	FormElicitation bool
}

// CanOpenURL reports whether connectd's link may be sent to the peer as a
// URL-mode elicitation: the spec forbids a mode the client did not declare.
func (p Peer) CanOpenURL() bool {
	return p.URLElicitation && GenerationOf(p.ProtocolVersion) != GenerationNone
}

// Answer is what an MCP server sends back for a request that needs the user
// to connect a provider, in the shape its negotiated protocol version calls
// for. Exactly the fields of Generation are set, or Fallback alone.
type Answer struct {
	Generation Generation
	// Elicitation is the minted elicitation (its ID to wait on, its URL).
	Elicitation *Elicitation
	// Approval is set by RequireApproval: the approval Elicitation is of
	// (what the user is asked to approve).
	Approval *Approval
	// Ready reports that the user finished connecting (or approved) while
	// RequireConnection (RequireApproval) waited on a retry: look the token
	// up again (send the same request again) and answer the request; no
	// other shape is set.
	Ready bool

	// Fallback is set, and no other shape, when the MCP client did not
	// declare URL-mode elicitation: answer the tool call with this result.
	// It asks the user, in plain words, to open the connect link in a
	// browser and then try again; the next call finds the connection (or,
	// while the link is pending, waits as a retry does).
	Fallback *ToolResult

	// GenerationURLElicitation: either send an elicitation/create request
	// with ElicitRequest as params and, once Wait reports completed,
	// notifications/elicitation/complete with its elicitationId; or answer
	// the original request with Error as the JSON-RPC error and send the
	// notification when Wait reports completion.
	ElicitRequest *ElicitParams
	Error         *RPCError

	// GenerationInputRequired: answer the request with Result. The client
	// retries with inputResponses[InputKey] and the requestState; pass that
	// to Resume.
	Result   *InputRequiredResult
	InputKey string
}

// ToolResult is an MCP CallToolResult of text content, in MCP's JSON
// shape.
type ToolResult struct {
	Content []TextContent `json:"content"`
	IsError bool          `json:"isError"`
}

// TextContent is MCP text content.
type TextContent struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

// Text joins the result's text.
func (r *ToolResult) Text() string {
	var b strings.Builder
	for i, c := range r.Content {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(c.Text)
	}
	return b.String()
}

// FallbackResult is the tool result that hands the connect link to a user
// whose MCP client cannot open URL-mode elicitations: the elicitation's
// message, the link as plain text (the user copies or clicks it; the MCP
// client renders text as it does any tool output), and what to do after.
// It is an error result, since the tool did not do its job yet; the model
// reads it and relays it. The link is safe in the model's hands because it
// is bound to this user and authenticates nothing (docs/security.md).
func FallbackResult(e *Elicitation) *ToolResult {
	msg := strings.TrimSpace(e.Params.Message)
	if msg == "" {
		msg = fmt.Sprintf("This needs your %s account, which is not connected yet.", e.Provider)
	}
	text := fmt.Sprintf("%s\n\nThis app cannot open the connect link for you. Open it in your browser:\n%s\n\n"+
		"Sign in, approve, then try again. The link works only for you, grants nothing by itself, and expires at %s.",
		msg, e.URL, e.ExpiresAt.UTC().Format("15:04 MST on 2 Jan"))
	return &ToolResult{IsError: true, Content: []TextContent{{Type: "text", Text: text}}}
}

// InputKey is the default inputRequests key for a provider's connect
// request.
func InputKey(provider string) string { return "connect-" + provider }

// ConnectKey is the inputRequests key RequireConnection gives a connect
// request for one of the user's accounts: InputKey(provider) and, for a
// connection id, ":" and the id. The MCP client echoes the key with its
// answer, so the retry knows which account the link was for (KeyAccount)
// and reads that account's token. The id is no secret, and connectd checks
// it is the user's.
func ConnectKey(provider, account string) string {
	if account == "" || account == AccountNew {
		return InputKey(provider)
	}
	return InputKey(provider) + ":" + account
}

// KeyAccount reads a ConnectKey: ok reports that key is a connect request
// for provider, and account is the connection id it was for ("" for none).
func KeyAccount(provider, key string) (account string, ok bool) {
	if key == InputKey(provider) {
		return "", true
	}
	account, ok = strings.CutPrefix(key, InputKey(provider)+":")
	return account, ok && account != ""
}

// AnswerFor shapes a minted elicitation as the answer for protocolVersion.
// inputKey names its inputRequests entry (2026-07-28); empty means
// InputKey(provider). It fails with ErrURLElicitationUnsupported before
// 2025-11-25.
func (e *Elicitation) AnswerFor(protocolVersion, inputKey string) (*Answer, error) {
	a := &Answer{Generation: GenerationOf(protocolVersion), Elicitation: e}
	switch a.Generation {
	case GenerationURLElicitation:
		p := e.Params
		rpcErr := e.URLElicitationRequiredError
		rpcErr.Data.Elicitations = append([]ElicitParams(nil), rpcErr.Data.Elicitations...)
		a.ElicitRequest, a.Error = &p, &rpcErr
	case GenerationInputRequired:
		if inputKey == "" {
			inputKey = InputKey(e.Provider)
		}
		a.InputKey = inputKey
		a.Result = &InputRequiredResult{ResultType: ResultTypeInputRequired,
			InputRequests: map[string]InputRequest{inputKey: e.InputRequest}, RequestState: e.RequestState}
	default:
		return nil, fmt.Errorf("%w: protocol version %q", ErrURLElicitationUnsupported, protocolVersion)
	}
	return a, nil
}

// RequireConnection turns "this request needs provider X" into the MCP answer
// for what the MCP client declared: it mints an elicitation for the user and
// shapes it with AnswerFor (its 2026-07-28 input key is ConnectKey of the
// request's provider and account), or as the Fallback tool result when the client
// did not declare URL-mode elicitation (or speaks a protocol before
// 2025-11-25). Call it when NeedsConnection(err) is true for a Token call.
// With Config.NoFallback set, such a client gets
// ErrURLElicitationUnsupported instead, and nothing is minted.
//
// A retry of a request whose link is still pending (connectd answers the
// mint with the same elicitation; give the request a RequestDigest so a
// retry is recognised) does not answer at once: it waits on the long-poll
// for up to Config.RetryWait. If the user finishes meanwhile the Answer is
// Ready (look the token up again); if the link ended otherwise (declined,
// expired) a new one is minted; if it is still pending, the answer carries
// the same link again. So a client that retries at once neither loops nor
// shows the user a new link.
func (c *Client) RequireConnection(ctx context.Context, userToken string, peer Peer, req MintRequest) (*Answer, error) {
	if !peer.CanOpenURL() && !c.fallback {
		return nil, fmt.Errorf("%w: protocol version %q, URL mode declared: %t", ErrURLElicitationUnsupported,
			peer.ProtocolVersion, peer.URLElicitation)
	}
	e, err := c.Mint(ctx, userToken, req)
	if err != nil {
		return nil, err
	}
	if e.Again && c.retryWait > 0 {
		wctx, cancel := context.WithTimeout(ctx, c.retryWait)
		st, err := c.Wait(wctx, userToken, e.ID)
		cancel()
		switch {
		case err == nil && st.Status == StatusCompleted:
			return &Answer{Generation: GenerationOf(peer.ProtocolVersion), Elicitation: e, Ready: true}, nil
		case err == nil: // declined, expired or failed while we waited: a new link
			if e, err = c.Mint(ctx, userToken, req); err != nil {
				return nil, err
			}
		case ctx.Err() != nil:
			return nil, fmt.Errorf("connectd client: waiting on a retried connect request: %w", ctx.Err())
		case !errors.Is(err, context.DeadlineExceeded):
			return nil, err
		}
		// Still pending after RetryWait: the same link again.
	}
	if !peer.CanOpenURL() {
		return &Answer{Generation: GenerationOf(peer.ProtocolVersion), Elicitation: e, Fallback: FallbackResult(e)}, nil
	}
	return e.AnswerFor(peer.ProtocolVersion, ConnectKey(req.Provider, req.Account))
}

// RequestDigest returns a value for MintRequest.RequestDigest and Resolve
// that binds a request_state to the MCP request it was minted for: the
// base64url SHA-256 of the method or tool name and the JSON of its
// arguments. The retried request must produce the same digest, so pass the
// arguments in a form that marshals deterministically (a struct, or a map,
// whose keys encoding/json sorts).
func RequestDigest(name string, args any) (string, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return "", fmt.Errorf("connectd client: request digest: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s\n", len(name), name)
	h.Write(b)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)), nil
}

// Reissue builds the InputRequiredResult that hands a still-pending
// elicitation back to the MCP client (2026-07-28): when Resume answers
// pending, the client must be asked again, with the fresh request_state.
// message is shown to the user; inputKey names the entry (empty:
// InputKey(provider)).
func (c *Client) Reissue(st *ElicitationStatus, message, inputKey string) (*InputRequiredResult, error) {
	if st == nil || st.Status != StatusPending || st.RequestState == "" || st.ID == "" {
		return nil, errors.New("connectd client: Reissue needs a pending status with a fresh request_state (from Resolve or Resume)")
	}
	if inputKey == "" {
		inputKey = InputKey(st.Provider)
	}
	// The connect URL is connectd's origin and the opaque id (docs/api.md).
	u := c.base + "/c/" + url.PathEscape(st.ID)
	return &InputRequiredResult{ResultType: ResultTypeInputRequired, RequestState: st.RequestState,
		InputRequests: map[string]InputRequest{inputKey: {Method: "elicitation/create",
			Params: ElicitParams{Mode: "url", URL: u, Message: message}}}}, nil
}

// AccountField is the field of the account form (AccountChoice.Form) and
// the tool argument AccountChoice.Fallback asks the model to pass: a
// connection id.
const AccountField = "account"

// ChoiceKey is the inputRequests key of the account form for provider.
func ChoiceKey(provider string) string { return "account-" + provider }

// FormParams are the params of a form-mode elicitation/create request, with
// the MCP field names.
type FormParams struct {
	Mode            string     `json:"mode"` // always "form"
	Message         string     `json:"message"`
	RequestedSchema FormSchema `json:"requestedSchema"`
}

// FormSchema is a form's requestedSchema: a flat object of primitive
// fields.
type FormSchema struct {
	Type       string                  `json:"type"` // "object"
	Properties map[string]FormProperty `json:"properties"`
	Required   []string                `json:"required,omitempty"`
}

// FormProperty is one field of a form; here a single-select enum with a
// title for each value (MCP 2025-11-25's TitledSingleSelectEnumSchema).
type FormProperty struct {
	Type        string       `json:"type"` // "string"
	Title       string       `json:"title,omitempty"`
	Description string       `json:"description,omitempty"`
	OneOf       []FormOption `json:"oneOf,omitempty"`
}

// FormOption is one value of a titled enum: Const is sent back, Title shown.
type FormOption struct {
	Const string `json:"const"`
	Title string `json:"title"`
}

// AccountChoice is an account_required refusal put to the user: which of
// their accounts at Provider the request is for. Which accounts a user has
// is not a secret from them, so the choice goes through the MCP client: a
// form-mode elicitation when the client declared one (Form), else a tool
// result that lists the accounts and asks for the tool's account argument
// (Fallback). The answer is a connection id: read the token with
// AccountToken(…, id, …), which connectd checks is the user's.
type AccountChoice struct {
	Provider string
	Accounts []Account
}

// ChooseAccount returns the choice an account_required refusal of provider
// asks for, or nil when err is not one (or lists no account).
func ChooseAccount(err error, provider string) *AccountChoice {
	accounts := Accounts(err)
	if len(accounts) == 0 {
		return nil
	}
	return &AccountChoice{Provider: provider, Accounts: accounts}
}

// titles are the accounts' Titles, made unique with the id where two agree.
func (c *AccountChoice) titles() []string {
	out := make([]string, len(c.Accounts))
	seen := map[string]int{}
	for i, a := range c.Accounts {
		out[i] = a.Title()
		seen[out[i]]++
	}
	for i, a := range c.Accounts {
		if seen[out[i]] > 1 && out[i] != a.ID {
			out[i] += " [" + a.ID + "]"
		}
	}
	return out
}

// Form returns the params of the form-mode elicitation/create that asks
// the user: one required field, AccountField, whose options are the
// accounts (the value an id, the title Account.Title). message is shown
// above it; empty asks which of the user's provider accounts to use. Send it
// with the request (2025-11-25) or as inputRequests[ChoiceKey(provider)]
// (2026-07-28), and read the answer with ChosenAccount.
func (c *AccountChoice) Form(message string) *FormParams {
	if message == "" {
		message = fmt.Sprintf("You have several %s accounts this app may use. Which one should it use?", c.Provider)
	}
	opts := make([]FormOption, len(c.Accounts))
	for i, t := range c.titles() {
		opts[i] = FormOption{Const: c.Accounts[i].ID, Title: t}
	}
	return &FormParams{Mode: "form", Message: message, RequestedSchema: FormSchema{Type: "object",
		Properties: map[string]FormProperty{AccountField: {Type: "string", Title: c.Provider + " account", OneOf: opts}},
		Required:   []string{AccountField}}}
}

// Fallback returns the tool result for an MCP client without form-mode
// elicitation: the accounts, each with its id, and to call tool again with
// the argument AccountField set to one. It is an error result, since the
// tool did not do its job yet; the model reads it and asks the user.
func (c *AccountChoice) Fallback(tool string) *ToolResult {
	var b strings.Builder
	fmt.Fprintf(&b, "You have several %s accounts this app may use, and it needs to know which one. "+
		"Ask which, then call %s again with %s set to its id:", c.Provider, tool, AccountField)
	for i, t := range c.titles() {
		fmt.Fprintf(&b, "\n- %s: %s", t, c.Accounts[i].ID)
	}
	return &ToolResult{IsError: true, Content: []TextContent{{Type: "text", Text: b.String()}}}
}

// ChosenAccount returns the connection id an accepted account form answered
// (the elicitation result's content), and whether it holds one.
func ChosenAccount(content map[string]any) (string, bool) {
	id, ok := content[AccountField].(string)
	return id, ok && id != ""
}
