package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Errors of an approval that ended without being given (ApprovalOutcome).
var (
	// ErrApprovalDenied: the user denied the request on connectd's approval
	// page (status declined, reason user_denied). The request was not made:
	// do not send it again; tell the user and the model it was denied
	// (DeniedResult).
	ErrApprovalDenied = errors.New("connectd: the user denied this request")
	// ErrApprovalDismissed: the MCP client's user declined or dismissed
	// opening the approval link (reason client_declined). Nothing was
	// decided: the next attempt asks again.
	ErrApprovalDismissed = errors.New("connectd: the approval link was dismissed")
	// ErrApprovalExpired: nobody answered the approval in time. The next
	// attempt asks again.
	ErrApprovalExpired = errors.New("connectd: the approval expired unanswered")
)

// Approval is the approval elicitation of a user_approval_required
// refusal (APIError.Approval): the same document a mint answers — its id
// to wait on, its URL (connectd's approval page) and the MCP shapes that
// carry it, Kind KindApproval — and what the user is asked to approve.
type Approval struct {
	Elicitation
	// Method and Path are the request as connectd received it (the path
	// below the provider's API base, with its query).
	Method string `json:"method"`
	Path   string `json:"path"`
	// Rule is the request rule that asks (METHOD PATTERN), and Message the
	// operator's words for it, shown to the user.
	Rule    string `json:"rule"`
	Message string `json:"message"`
	// Account is the connection id the refused call named (WithAccount),
	// "" for none; ProviderTransport sets it.
	Account string `json:"-"`
}

// ApprovalRequired returns the approval a user_approval_required refusal
// carries, or nil when err is not one. It works through the *url.Error
// http.Client wraps a transport's error in and through SDKs that wrap the
// client's error (errors.As).
func ApprovalRequired(err error) *Approval {
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == "user_approval_required" {
		return ae.Approval
	}
	return nil
}

// ApprovalInputKey is the prefix of a provider's approval inputRequests
// keys (ApprovalKey).
func ApprovalInputKey(provider string) string { return "approve-" + provider }

// ApprovalKey is the inputRequests key RequireApproval gives an approval
// request (2026-07-28): ApprovalInputKey(provider), ":" and the approval's
// elicitation id. The MCP client echoes the key with its answer, so the
// retry knows it answers an approval, and which (KeyApproval): Status (or
// Wait) on that id gives the user's decision without resolving the
// request_state. The id is no secret (it is in the link), and connectd
// answers it only to this client for this user.
func ApprovalKey(provider, elicitationID string) string {
	return ApprovalInputKey(provider) + ":" + elicitationID
}

// KeyApproval reads an ApprovalKey: ok reports that key is an approval
// request for provider, and elicitationID is the approval it was for.
func KeyApproval(provider, key string) (elicitationID string, ok bool) {
	elicitationID, ok = strings.CutPrefix(key, ApprovalInputKey(provider)+":")
	return elicitationID, ok && elicitationID != ""
}

// ApprovalOutcome says what a final status of an approval means: nil when
// the user approved (completed: send exactly the same request again),
// ErrApprovalDenied when the user denied it, ErrApprovalDismissed when the
// link was dismissed in the MCP client, ErrApprovalExpired when nobody
// answered in time; any other state is an error naming it. The errors are
// wrapped with the elicitation id.
func ApprovalOutcome(st *ElicitationStatus) error {
	if st == nil {
		return errors.New("connectd client: no approval status")
	}
	switch {
	case st.Status == StatusCompleted:
		return nil
	case st.Status == StatusDeclined && st.Reason == ReasonUserDenied:
		return fmt.Errorf("%w (approval %s)", ErrApprovalDenied, st.ID)
	case st.Status == StatusDeclined:
		return fmt.Errorf("%w (approval %s, %s)", ErrApprovalDismissed, st.ID, st.Reason)
	case st.Status == StatusExpired:
		return fmt.Errorf("%w (approval %s)", ErrApprovalExpired, st.ID)
	}
	return fmt.Errorf("connectd client: approval %s is %s (%s)", st.ID, st.Status, st.Reason)
}

// DeniedText opens the tool result of a denied request (DeniedResult).
const DeniedText = "The user denied this request"

// DeniedResult is the tool result for a request the user denied: it says
// so, what the request was (a nil a leaves that out), that it was not made,
// and not to try it again unless the user asks. It is an error result; the
// model reads it and relays it.
func DeniedResult(a *Approval) *ToolResult {
	text := DeniedText + "."
	if a != nil {
		what := strings.TrimSpace(a.Method + " " + a.Path)
		if a.Message != "" {
			what += " (" + a.Message + ")"
		}
		text = DeniedText + ": " + what + "."
	}
	text += " It was not made. Do not try it again unless the user asks for it."
	return &ToolResult{IsError: true, Content: []TextContent{{Type: "text", Text: text}}}
}

// ApprovalFallbackResult is the tool result that hands the approval link
// to a user whose MCP client cannot open URL-mode elicitations: what is to
// be approved, the link as plain text, and to try again after. It is an
// error result, since the tool did not do its job yet.
func ApprovalFallbackResult(a *Approval) *ToolResult {
	msg := strings.TrimSpace(a.Params.Message)
	if msg == "" {
		msg = "This request needs your approval: " + a.Message
	}
	text := fmt.Sprintf("%s\n\nThis app cannot open the approval link for you. Open this link to approve or deny %s %s:\n%s\n\n"+
		"Then try again. The link works only for you and expires at %s.",
		msg, a.Method, a.Path, a.URL, a.ExpiresAt.UTC().Format("15:04 MST on 2 Jan"))
	return &ToolResult{IsError: true, Content: []TextContent{{Type: "text", Text: text}}}
}

// RequireApproval turns a user_approval_required refusal of a proxied call
// (err, as the transport or an SDK returned it) into the MCP answer for
// what the MCP client declared, as RequireConnection does for a connect
// link: the approval shaped with AnswerFor (its 2026-07-28 input key is
// ApprovalKey of the provider and the approval's id; Answer.Approval is
// set), or the Fallback tool result (ApprovalFallbackResult) when the
// client did not declare URL-mode elicitation. With Config.NoFallback such
// a client gets ErrURLElicitationUnsupported. An err that is no such
// refusal is an error.
//
// Then wait for the user (Wait on Answer.Elicitation.ID; on a 2026-07-28
// retry, on the id KeyApproval reads from the answer's key) and read the final status with
// ApprovalOutcome: completed → send exactly the same request again (same
// method, path, query and body: it passes once); ErrApprovalDenied →
// answer DeniedResult and do not retry.
//
// connectd answers the same request asked again while its approval is
// pending with the same approval. RequireApproval remembers, in this
// Client, each approval it handed out until it expires: when one comes
// back (the MCP client retried at once, say after -32042), it waits on the
// long-poll for up to Config.RetryWait first. If the user approves
// meanwhile the Answer is Ready (send the request again); if the approval
// ended otherwise the error is ApprovalOutcome's; if it is still pending,
// the answer carries the same link again.
func (c *Client) RequireApproval(ctx context.Context, userToken string, peer Peer, err error) (*Answer, error) {
	a := ApprovalRequired(err)
	if a == nil {
		return nil, fmt.Errorf("connectd client: RequireApproval needs a user_approval_required refusal with its approval, not %w", err)
	}
	if !peer.CanOpenURL() && !c.fallback {
		return nil, fmt.Errorf("%w: protocol version %q, URL mode declared: %t", ErrURLElicitationUnsupported,
			peer.ProtocolVersion, peer.URLElicitation)
	}
	gen := GenerationOf(peer.ProtocolVersion)
	if c.retryWait > 0 && c.approvals.handedOut(a.ID) {
		wctx, cancel := context.WithTimeout(ctx, c.retryWait)
		st, err := c.Wait(wctx, userToken, a.ID)
		cancel()
		switch {
		case err == nil && st.Status == StatusCompleted:
			return &Answer{Generation: gen, Elicitation: &a.Elicitation, Approval: a, Ready: true}, nil
		case err == nil:
			return nil, ApprovalOutcome(st)
		case ctx.Err() != nil:
			return nil, fmt.Errorf("connectd client: waiting on a retried approval: %w", ctx.Err())
		case !errors.Is(err, context.DeadlineExceeded):
			return nil, err
		}
		// Still pending after RetryWait: the same link again.
	}
	c.approvals.remember(a.ID, a.ExpiresAt)
	if !peer.CanOpenURL() {
		return &Answer{Generation: gen, Elicitation: &a.Elicitation, Approval: a, Fallback: ApprovalFallbackResult(a)}, nil
	}
	ans, err := a.Elicitation.AnswerFor(peer.ProtocolVersion, ApprovalKey(a.Provider, a.ID))
	if err != nil {
		return nil, err
	}
	ans.Approval = a
	return ans, nil
}

// maxHandedOut bounds how many approval ids a Client remembers.
const maxHandedOut = 4096

// handedOut remembers the approvals RequireApproval handed to MCP clients,
// until each expires, so that a retry is recognised.
type handedOut struct {
	mu  sync.Mutex
	ids map[string]time.Time // id → expiry
}

func (h *handedOut) handedOut(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	exp, ok := h.ids[id]
	return ok && time.Now().Before(exp)
}

func (h *handedOut) remember(id string, expires time.Time) {
	if id == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ids == nil {
		h.ids = map[string]time.Time{}
	}
	if len(h.ids) >= maxHandedOut {
		now := time.Now()
		for k, exp := range h.ids {
			if !now.Before(exp) {
				delete(h.ids, k)
			}
		}
		for k := range h.ids { // still full: forget any (a forgotten retry only waits no longer)
			if len(h.ids) < maxHandedOut {
				break
			}
			delete(h.ids, k)
		}
	}
	if expires.IsZero() {
		expires = time.Now().Add(10 * time.Minute)
	}
	h.ids[id] = expires
}
