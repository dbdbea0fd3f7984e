package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connectd/connectd/client"
)

// DefaultIssuesPath is Config.IssuesPath's default: GitHub's "create an
// issue" below its API base.
const DefaultIssuesPath = "/repos/{repo}/issues"

// openIssueArgs is open_issue's input.
type openIssueArgs struct {
	Repo  string `json:"repo" jsonschema:"the repository, owner/name"`
	Title string `json:"title" jsonschema:"the issue's title"`
	Body  string `json:"body,omitempty" jsonschema:"the issue's text"`
}

// IssueOpened is open_issue's structured output.
type IssueOpened struct {
	Repo   string `json:"repo"`
	Status int    `json:"status" jsonschema:"the service's HTTP status"`
	Number int    `json:"number,omitempty"`
	URL    string `json:"url,omitempty"`
}

// repoName is what open_issue accepts as a repository: owner/name.
var repoName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}/[A-Za-z0-9._-]{1,100}$`)

// openIssue is the tool that makes a proxied POST. The operator may have
// made that call one the user approves first (a request rule that asks:
// POST /repos/*/issues ask "Open issues in your repositories"); connectd
// then answers it 403 user_approval_required with an approval elicitation
// and does not call the service. The tool hands the approval to the MCP
// client exactly as it hands a connect link — in the shape of the session's
// protocol — and, once the user approved, sends exactly the same request
// again (same path and body: it passes once). A denial is answered with
// client.DeniedResult's text, and the request is not sent again.
func (s *Server) openIssue(ctx context.Context, req *mcp.CallToolRequest, in openIssueArgs) (*mcp.CallToolResult, IssueOpened, error) {
	if req.Extra == nil {
		return nil, IssueOpened{}, errNoCaller
	}
	u, err := callerOf(req.Extra.TokenInfo)
	if err != nil {
		return nil, IssueOpened{}, err
	}
	if !repoName.MatchString(in.Repo) || strings.Contains(in.Repo, "..") || strings.TrimSpace(in.Title) == "" {
		return nil, IssueOpened{}, stop("open_issue needs repo as owner/name and a title.")
	}
	peer := peerOf(req)
	log := s.logger.With(slog.String("tool", req.Params.Name), slog.String("protocol", peer.ProtocolVersion))
	digest, err := client.RequestDigest(req.Params.Name, in)
	if err != nil {
		return nil, IssueOpened{}, err
	}
	denialKey := u.subject + " " + digest
	if d, ok := s.denials.LoadAndDelete(denialKey); ok && time.Now().Before(d.(denial).until) {
		// The retry of a call answered -32042 whose approval the user denied
		// meanwhile (followApproval): the client hears the denial.
		return nil, IssueOpened{}, stop("%s", client.DeniedResult(d.(denial).approval).Text())
	}

	// 2026-07-28 retry: the client answered the approval request and echoes
	// the requestState.
	if client.GenerationOf(peer.ProtocolVersion) == client.GenerationInputRequired && req.Params.RequestState != "" {
		if res, done, err := s.resumeApproval(ctx, log, req, u); done {
			return res, IssueOpened{}, err
		}
		// Approved, or still pending (the POST below meets the same
		// approval, and RequireApproval waits on it), or the request_state
		// led nowhere: send the request again.
	}
	res, out, err := s.postIssue(ctx, u, in)
	if answered(err) {
		return res, out, err
	}
	if client.ApprovalRequired(err) == nil {
		if client.NeedsConnection(err) {
			return nil, IssueOpened{}, stop("Your file-service account is not connected yet. Call list_files first, which connects it.")
		}
		log.WarnContext(ctx, "proxied POST refused", slog.String("code", errCode(err)))
		return nil, IssueOpened{}, stop("The service cannot be reached through connectd right now (%s). Try again later.", errCode(err))
	}
	refusal := err
	ans, err := s.cfg.Connectd.RequireApproval(ctx, u.token, peer, refusal)
	switch {
	case errors.Is(err, client.ErrApprovalDenied):
		// Denied while a retry waited on it.
		return nil, IssueOpened{}, stop("%s", client.DeniedResult(client.ApprovalRequired(refusal)).Text())
	case errors.Is(err, client.ErrApprovalDismissed), errors.Is(err, client.ErrApprovalExpired):
		return nil, IssueOpened{}, stop("The issue was not opened: the approval was not given (%v). Call open_issue again to ask again.", err)
	case errors.Is(err, client.ErrURLElicitationUnsupported):
		return nil, IssueOpened{}, stop("Opening an issue needs your approval, but this MCP client cannot open the approval link.")
	case err != nil:
		log.WarnContext(ctx, "approval could not be handed out", slog.Any("error", err))
		return nil, IssueOpened{}, stop("Could not ask for your approval (%s).", errCode(err))
	}
	a := ans.Approval
	log.InfoContext(ctx, "approval needed", slog.String("elicitation", a.ID), slog.String("rule", a.Rule),
		slog.String("answer", s.answerKind(ans)), slog.Bool("ready", ans.Ready))
	switch {
	case ans.Ready:
		// A retry while the approval was pending, and the user approved
		// while RequireApproval waited: the same request passes now.
		return s.postAgain(ctx, u, in)
	case ans.Fallback != nil:
		return nil, IssueOpened{}, stop("%s", ans.Fallback.Text())
	case ans.Generation == client.GenerationInputRequired:
		return &mcp.CallToolResult{InputRequests: toSDK(ans.Result), RequestState: ans.Result.RequestState}, IssueOpened{}, nil
	case s.cfg.Legacy == LegacyError:
		s.followApproval(req.Session, u, a, denialKey)
		return nil, IssueOpened{}, rpcError(ans.Error)
	}
	// 2025-11-25 within the call: ask the client to open the approval
	// page, wait for the user's decision, notify its completion.
	p := ans.ElicitRequest
	r, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: p.Mode, Message: p.Message, URL: p.URL, ElicitationID: p.ElicitationID})
	if err != nil {
		return nil, IssueOpened{}, stop("Could not ask for your approval: %v", err)
	}
	if r.Action != "accept" {
		s.endDeclined(ctx, log, u, a.ID)
		return nil, IssueOpened{}, stop("You did not open the approval link, so the issue was not opened.")
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.WaitTimeout)
	defer cancel()
	st, err := s.cfg.Connectd.Wait(wctx, u.token, a.ID)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, IssueOpened{}, stop("Still waiting for your decision in the browser. Call open_issue again when you are done.")
		}
		return nil, IssueOpened{}, stop("Could not follow the approval with connectd (%s).", errCode(err))
	}
	if err := req.Session.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: a.ID}); err != nil {
		log.WarnContext(ctx, "notifications/elicitation/complete failed", slog.Any("error", err))
	}
	return s.approvalEnded(ctx, u, in, a, st)
}

// denial is an approval the user denied after the call was answered
// -32042: the client's retry of the same call (within until) is answered
// the denial instead of a new approval.
type denial struct {
	approval *client.Approval
	until    time.Time
}

// followApproval follows an approval answered with
// URLElicitationRequiredError: it remembers a denial for the retry of the
// same call (key: the caller and the call's request digest), and sends
// notifications/elicitation/complete when the user decided, so that the
// client retries.
func (s *Server) followApproval(ss *mcp.ServerSession, u caller, a *client.Approval, key string) {
	if s.ctx.Err() != nil {
		return // closing
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithDeadline(s.ctx, a.ExpiresAt.Add(time.Minute))
		defer cancel()
		st, err := s.cfg.Connectd.Wait(ctx, u.token, a.ID)
		if err != nil {
			s.logger.InfoContext(ctx, "stopped following approval", slog.String("elicitation", a.ID), slog.Any("error", err))
			return
		}
		if errors.Is(client.ApprovalOutcome(st), client.ErrApprovalDenied) {
			now := time.Now()
			s.denials.Range(func(k, v any) bool { // forget denials no retry came for
				if !now.Before(v.(denial).until) {
					s.denials.Delete(k)
				}
				return true
			})
			s.denials.Store(key, denial{approval: a, until: now.Add(10 * time.Minute)})
		}
		if err := ss.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: a.ID}); err != nil {
			s.logger.InfoContext(ctx, "notifications/elicitation/complete not delivered", slog.String("elicitation", a.ID),
				slog.Any("error", err))
		}
	}()
}

// resumeApproval handles a 2026-07-28 retry of open_issue: done reports
// that res (or err) is the answer; otherwise the caller sends the request
// again. The answer's key (client.ApprovalKey) names the approval, which is
// waited on up to RetryHold: approved, the request is sent again (it
// passes); denied, expired or dismissed, that is the answer; still pending,
// the same link goes back to the client. The request is not sent while the
// approval is pending: a decision made meanwhile would make it ask anew. (The
// echoed request_state is not resolved: an approval's is bound to
// connectd's own digest of the call; it goes back unspent.)
func (s *Server) resumeApproval(ctx context.Context, log *slog.Logger, req *mcp.CallToolRequest, u caller) (res *mcp.CallToolResult, done bool, err error) {
	var id, key string
	var answer *mcp.ElicitResult
	for k, v := range req.Params.InputResponses {
		if a, ok := client.KeyApproval(s.cfg.Provider, k); ok {
			id, key = a, k
			answer, _ = v.(*mcp.ElicitResult)
		}
	}
	if id == "" {
		return nil, false, nil // no answer to an approval: send the request again
	}
	if answer != nil && answer.Action != "accept" {
		// The user would not open the approval link: end it, and do not
		// ask again in this call.
		s.endDeclined(ctx, log, u, id)
		return nil, true, stop("You did not open the approval link, so the issue was not opened.")
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.RetryHold)
	st, err := s.cfg.Connectd.Wait(wctx, u.token, id)
	cancel()
	switch {
	case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		// Still pending: the same link again, with the same request_state.
		again, err := s.cfg.Connectd.Reissue(&client.ElicitationStatus{ID: id, Status: client.StatusPending, Provider: s.cfg.Provider,
			RequestState: req.Params.RequestState}, "Still waiting: open the link to approve or deny opening the issue.", key)
		if err != nil {
			return nil, true, err
		}
		return &mcp.CallToolResult{InputRequests: toSDK(again), RequestState: again.RequestState}, true, nil
	case err != nil:
		log.InfoContext(ctx, "approval status unavailable; starting over", slog.String("code", errCode(err)))
		return nil, false, nil
	}
	log.InfoContext(ctx, "approval decided", slog.String("elicitation", st.ID), slog.String("status", string(st.Status)))
	if st.Status == client.StatusCompleted {
		return nil, false, nil // the request passes now
	}
	return nil, true, outcomeError(nil, st)
}

// approvalEnded answers a final approval: the same request again when it
// was given, the denial or why not otherwise.
func (s *Server) approvalEnded(ctx context.Context, u caller, in openIssueArgs, a *client.Approval, st *client.ElicitationStatus) (*mcp.CallToolResult, IssueOpened, error) {
	if client.ApprovalOutcome(st) == nil {
		return s.postAgain(ctx, u, in)
	}
	return nil, IssueOpened{}, outcomeError(a, st)
}

// outcomeError is the tool's answer to an approval that ended ungiven.
func outcomeError(a *client.Approval, st *client.ElicitationStatus) error {
	err := client.ApprovalOutcome(st)
	switch {
	case errors.Is(err, client.ErrApprovalDenied):
		return stop("%s", client.DeniedResult(a).Text())
	case errors.Is(err, client.ErrApprovalExpired):
		return stop("Nobody approved opening the issue in time, so it was not opened. Call open_issue again to ask again.")
	default:
		return stop("The issue was not opened: the approval was not given. Call open_issue again to ask again.")
	}
}

// postAgain sends the approved request again; connectd passes it once.
func (s *Server) postAgain(ctx context.Context, u caller, in openIssueArgs) (*mcp.CallToolResult, IssueOpened, error) {
	res, out, err := s.postIssue(ctx, u, in)
	if !answered(err) {
		return nil, IssueOpened{}, stop("Approved, but connectd refused the call (%s).", errCode(err))
	}
	return res, out, err
}

// postIssue makes the POST through connectd's proxy. The body is the same
// bytes for the same arguments (encoding/json of a struct), so the retry
// of an approved request is exactly the request approved. connectd's
// refusal is returned as it is; every other outcome is the tool's answer.
func (s *Server) postIssue(ctx context.Context, u caller, in openIssueArgs) (*mcp.CallToolResult, IssueOpened, error) {
	body, err := json.Marshal(struct {
		Title string `json:"title"`
		Body  string `json:"body,omitempty"`
	}{in.Title, in.Body})
	if err != nil {
		return nil, IssueOpened{}, err
	}
	path := strings.ReplaceAll(s.cfg.IssuesPath, "{repo}", in.Repo)
	hc := s.cfg.Connectd.ProviderClient(u.token, s.cfg.Provider)
	hc.Timeout = s.cfg.HTTPClient.Timeout
	target := (&url.URL{Scheme: "https", Host: s.cfg.Provider, Path: path}).String()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, IssueOpened{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, IssueOpened{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, IssueOpened{}, stop("The service answered %d: the issue was not opened.", resp.StatusCode)
	}
	out := IssueOpened{Repo: in.Repo, Status: resp.StatusCode}
	var got struct {
		Number  int    `json:"number"`
		HTMLURL string `json:"html_url"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&got) == nil {
		out.Number, out.URL = got.Number, got.HTMLURL
	}
	text := "Opened the issue in " + in.Repo + "."
	if out.URL != "" {
		text = "Opened " + out.URL + "."
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}
