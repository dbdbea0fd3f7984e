package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connectd/connectd/client"
)

// listFilesArgs is list_files' input: nothing, or which of the user's
// accounts at the file service, when they have several and the MCP client
// cannot ask them in a form (client.AccountChoice.Fallback names it). An
// empty Account marshals as {}, so a call without it has the request digest
// it always had.
type listFilesArgs struct {
	Account string `json:"account,omitempty" jsonschema:"which of your file-service accounts to use: its id (cn_…), or new to connect another one; leave it out unless list_files asked for it"`
}

// FileList is list_files' structured output.
type FileList struct {
	Owner string `json:"owner" jsonschema:"the account at the file service"`
	Files []File `json:"files"`
}

// File is one file of the list.
type File struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// errStop ends a tool call with a message for the user. Like every error a
// handler returns that is not a *jsonrpc.Error, the SDK turns it into a tool
// result with isError set, which the model sees.
type errStop struct{ msg string }

func (e *errStop) Error() string { return e.msg }

func stop(format string, args ...any) error { return &errStop{msg: fmt.Sprintf(format, args...)} }

// peerOf is what the MCP client declared for this request: its protocol
// version and whether it can open URL-mode elicitations. The SDK reads the
// capabilities from the request's _meta on 2026-07-28 and from initialize
// before that.
func peerOf(req *mcp.CallToolRequest) client.Peer {
	var p client.Peer
	if ip := req.Session.InitializeParams(); ip != nil {
		p.ProtocolVersion = ip.ProtocolVersion
	}
	if c := req.ClientCapabilities(); c != nil && c.Elicitation != nil {
		p.URLElicitation = c.Elicitation.URL != nil
		// An elicitation object with neither mode declares form mode.
		p.FormElicitation = c.Elicitation.Form != nil || c.Elicitation.URL == nil
	}
	return p
}

// listFiles is the tool. It lists the files through connectd's proxy (or
// with the token it reads: Config.Credential); when connectd has no
// credential it may use, it sends the user to connectd in the shape the
// session's protocol calls for, then lists the files.
func (s *Server) listFiles(ctx context.Context, req *mcp.CallToolRequest, in listFilesArgs) (*mcp.CallToolResult, FileList, error) {
	if req.Extra == nil {
		return nil, FileList{}, errNoCaller
	}
	u, err := callerOf(req.Extra.TokenInfo)
	if err != nil {
		return nil, FileList{}, err
	}
	peer := peerOf(req)
	digest, err := client.RequestDigest(req.Params.Name, in)
	if err != nil {
		return nil, FileList{}, err
	}
	gen := client.GenerationOf(peer.ProtocolVersion)
	log := s.logger.With(slog.String("tool", req.Params.Name), slog.String("protocol", peer.ProtocolVersion))

	// Which of the user's accounts at the file service: named by the
	// caller, or chosen by the user in the account form asked below (on
	// 2026-07-28 the client retries with the answer; on older protocols the
	// SDK asks within the call and calls this handler again with it). The
	// id is no secret and connectd checks it is the user's. Empty: the one
	// this server is approved for.
	account := in.Account
	if r, ok := req.Params.InputResponses[client.ChoiceKey(s.cfg.Provider)].(*mcp.ElicitResult); ok {
		id, chosen := client.ChosenAccount(r.Content)
		if r.Action != "accept" || !chosen {
			return nil, FileList{}, stop("No file-service account was chosen, so the files cannot be listed. Call list_files again to choose one.")
		}
		account = id
	}

	// 2026-07-28 retry: the client echoes the requestState with its answer.
	if gen == client.GenerationInputRequired && req.Params.RequestState != "" {
		res, keyed, done, err := s.resume(ctx, log, req, u, digest)
		if done || err != nil {
			return res, FileList{}, err
		}
		if keyed != "" {
			account = keyed // the link was for that account (client.ConnectKey)
		}
		if account == client.AccountNew {
			account = "" // the new account is connected: read as any call does (and ask which, if need be)
		}
		// Completed, or the request_state led nowhere (replayed, expired,
		// …): look again, and start over if need be.
	}

	// "new": connect another account, whatever is connected already; the
	// token read after it names none (the user is asked which, if need be).
	mintFor := account
	if account == client.AccountNew {
		account = ""
	} else {
		res, out, err := s.list(ctx, log, u, account)
		if answered(err) {
			return res, out, err
		}
		// connectd's refusal: the same in both credential modes, since the
		// proxy decides exactly as the token read does.
		if choice := client.ChooseAccount(err, s.cfg.Provider); choice != nil {
			// Approved for several of the user's accounts: ask which.
			return s.askAccount(ctx, log, peer, choice)
		}
		if account != "" && (errors.Is(err, client.ErrNotFound) || errors.Is(err, client.ErrInvalidRequest)) {
			return nil, FileList{}, stop("%q is not one of your file-service accounts. Call list_files without account to choose one.", account)
		}
		if !client.NeedsConnection(err) {
			log.WarnContext(ctx, "connectd token lookup failed", slog.Any("error", err))
			return nil, FileList{}, stop("The file service cannot be reached through connectd right now (%s). Try again later.", errCode(err))
		}
	}
	// For a named account (reauthorization, a step-up, or an account this
	// server is not approved for yet) the link is for that one.
	ans, err := s.cfg.Connectd.RequireConnection(ctx, u.token, peer, client.MintRequest{
		Provider: s.cfg.Provider, Scopes: s.cfg.Scopes, RequestDigest: digest, Account: mintFor,
		Message: "list_files needs access to your files. Open the link to connect your file-service account.",
	})
	if errors.Is(err, client.ErrURLElicitationUnsupported) { // the fallback is off (client.Config.NoFallback)
		return nil, FileList{}, stop("This tool needs your file-service account, but this MCP client cannot open a " +
			"connect link (it needs protocol 2025-11-25 or later with URL-mode elicitation).")
	}
	if err != nil {
		log.WarnContext(ctx, "connectd mint failed", slog.Any("error", err))
		return nil, FileList{}, stop("Could not start connecting your file-service account (%s).", errCode(err))
	}
	if ans.Ready {
		// A retry while the link was pending, and the user finished while
		// RequireConnection waited: the token lookup now succeeds.
		log.InfoContext(ctx, "connected while the retried request waited", slog.String("elicitation", ans.Elicitation.ID))
		res, out, err := s.list(ctx, log, u, account)
		if !answered(err) {
			return nil, FileList{}, stop("The file service cannot be reached through connectd right now (%s). Try again later.", errCode(err))
		}
		return res, out, err
	}
	log.InfoContext(ctx, "connection needed: elicitation minted", slog.String("elicitation", ans.Elicitation.ID),
		slog.String("answer", s.answerKind(ans)), slog.Bool("same_link_again", ans.Elicitation.Again))

	switch {
	case ans.Fallback != nil:
		// No URL mode: the link in plain words; the next call finds the
		// connection (or waits, as a retry does).
		// (The SDK turns this error into a tool result with isError set and
		// the text as its content: the same result as ans.Fallback.)
		return nil, FileList{}, stop("%s", ans.Fallback.Text())
	case ans.Generation == client.GenerationInputRequired:
		return &mcp.CallToolResult{InputRequests: toSDK(ans.Result), RequestState: ans.Result.RequestState}, FileList{}, nil
	case s.cfg.Legacy == LegacyError:
		s.notifyWhenDone(req.Session, u, ans.Elicitation)
		return nil, FileList{}, rpcError(ans.Error)
	default:
		return s.elicitAndWait(ctx, log, req, peer, u, ans, account)
	}
}

// answerKind names, for the log, what the client is answered: a fallback
// is no answer of the protocol generation, whatever the version.
func (s *Server) answerKind(ans *client.Answer) string {
	switch {
	case ans.Fallback != nil:
		return "fallback"
	case ans.Generation == client.GenerationInputRequired:
		return "input_required"
	case s.cfg.Legacy == LegacyError:
		return "url_elicitation_required_error"
	default:
		return "elicitation/create"
	}
}

// askAccount puts an account_required answer to the user: a form-mode
// elicitation of their accounts when the client declared form mode, else a
// tool error that lists them and asks for list_files' account argument.
// The form goes out as an input request: on 2026-07-28 the client answers
// with its retry, and before that the SDK sends it as elicitation/create and
// calls the tool again with the answer in InputResponses.
func (s *Server) askAccount(ctx context.Context, log *slog.Logger, peer client.Peer, choice *client.AccountChoice) (*mcp.CallToolResult, FileList, error) {
	log.InfoContext(ctx, "several accounts: asking the user which", slog.Int("accounts", len(choice.Accounts)),
		slog.Bool("form", peer.FormElicitation))
	if !peer.FormElicitation {
		return nil, FileList{}, stop("%s", choice.Fallback("list_files").Text())
	}
	f := choice.Form("list_files can use any of these file-service accounts of yours. Which one should it list?")
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
		client.ChoiceKey(s.cfg.Provider): &mcp.ElicitParams{Mode: f.Mode, Message: f.Message, RequestedSchema: f.RequestedSchema},
	}}, FileList{}, nil
}

// resume handles a 2026-07-28 retry. done reports that res (or err) is the
// answer; otherwise the caller looks the token up, of account when the link
// was for one (its input key says so: client.ConnectKey), and starts over if
// need be.
func (s *Server) resume(ctx context.Context, log *slog.Logger, req *mcp.CallToolRequest, u caller, digest string) (res *mcp.CallToolResult, account string, done bool, err error) {
	key := client.InputKey(s.cfg.Provider)
	for k := range req.Params.InputResponses {
		if a, ok := client.KeyAccount(s.cfg.Provider, k); ok {
			key, account = k, a
		}
	}
	if r, ok := req.Params.InputResponses[key].(*mcp.ElicitResult); ok && r.Action != "accept" {
		// The user refused to open the link: do not ask again in this call,
		// and end the link, so that a later call gets a new one at once.
		if st, err := s.cfg.Connectd.Resolve(ctx, u.token, req.Params.RequestState, digest); err == nil {
			s.endDeclined(ctx, log, u, st.ID)
		}
		return nil, "", true, refused(r.Action)
	}
	// Resolving consumes the request_state; the answer carries the fresh
	// one. Held longer than the client waits, that answer would be lost, and
	// the client's next retry would echo a spent state (which starts over,
	// below, rather than leave the user stuck).
	st, err := s.cfg.Connectd.Resume(ctx, u.token, req.Params.RequestState, digest, s.cfg.RetryHold)
	switch {
	case errors.Is(err, client.ErrRequestState):
		log.InfoContext(ctx, "request_state refused; starting over", slog.String("code", errCode(err)))
		return nil, account, false, nil
	case err != nil:
		return nil, "", true, stop("Could not check the connection with connectd (%s).", errCode(err))
	}
	log.InfoContext(ctx, "request_state resolved", slog.String("elicitation", st.ID), slog.String("status", string(st.Status)))
	switch st.Status {
	case client.StatusCompleted:
		return nil, account, false, nil // the token lookup now succeeds
	case client.StatusPending:
		again, err := s.cfg.Connectd.Reissue(st, "Still waiting: open the link to connect your file-service account.", key)
		if err != nil {
			return nil, "", true, err
		}
		return &mcp.CallToolResult{InputRequests: toSDK(again), RequestState: again.RequestState}, "", true, nil
	default:
		return nil, "", true, finalError(st)
	}
}

// elicitAndWait is the 2025-11-25 path within one tool call: ask the client
// to open the URL, wait for connectd, notify completion, then list (of
// account, when the call named or chose one).
func (s *Server) elicitAndWait(ctx context.Context, log *slog.Logger, req *mcp.CallToolRequest, peer client.Peer, u caller, ans *client.Answer, account string) (*mcp.CallToolResult, FileList, error) {
	p := ans.ElicitRequest
	r, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: p.Mode, Message: p.Message, URL: p.URL, ElicitationID: p.ElicitationID})
	if err != nil {
		log.WarnContext(ctx, "elicitation/create failed", slog.Any("error", err))
		return nil, FileList{}, stop("Could not ask you to connect your file-service account: %v", err)
	}
	if r.Action != "accept" {
		s.endDeclined(ctx, log, u, p.ElicitationID)
		return nil, FileList{}, refused(r.Action)
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.WaitTimeout)
	defer cancel()
	st, err := s.cfg.Connectd.Wait(wctx, u.token, p.ElicitationID)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, FileList{}, stop("Still waiting for you to finish connecting in the browser. Call list_files again when you are done.")
		}
		return nil, FileList{}, stop("Could not follow the connection with connectd (%s).", errCode(err))
	}
	// The out-of-band interaction is over, whatever its outcome.
	if err := req.Session.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: p.ElicitationID}); err != nil {
		log.WarnContext(ctx, "notifications/elicitation/complete failed", slog.Any("error", err))
	}
	if st.Status != client.StatusCompleted {
		return nil, FileList{}, finalError(st)
	}
	res, out, err := s.list(ctx, log, u, account)
	if answered(err) {
		return res, out, err
	}
	if choice := client.ChooseAccount(err, s.cfg.Provider); choice != nil {
		// Another account connected: the user says which to list.
		return s.askAccount(ctx, log, peer, choice)
	}
	return nil, FileList{}, stop("Connected, but connectd refused the file-service call (%s).", errCode(err))
}

// endDeclined ends an elicitation the user declined or cancelled in the MCP
// client, so that the next call mints a new link instead of waiting on this
// one. A failure only costs that wait: it is logged.
func (s *Server) endDeclined(ctx context.Context, log *slog.Logger, u caller, id string) {
	if _, err := s.cfg.Connectd.Cancel(ctx, u.token, id); err != nil {
		log.WarnContext(ctx, "could not end the declined elicitation at connectd", slog.String("elicitation", id),
			slog.String("code", errCode(err)))
	}
}

// notifyWhenDone follows an elicitation answered with
// URLElicitationRequiredError and sends notifications/elicitation/complete
// on the session when connectd reports it over, so the client knows it can
// retry.
func (s *Server) notifyWhenDone(ss *mcp.ServerSession, u caller, e *client.Elicitation) {
	if s.ctx.Err() != nil {
		return // closing
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithDeadline(s.ctx, e.ExpiresAt.Add(time.Minute))
		defer cancel()
		st, err := s.cfg.Connectd.Wait(ctx, u.token, e.ID)
		if err != nil {
			s.logger.InfoContext(ctx, "stopped following elicitation", slog.String("elicitation", e.ID), slog.Any("error", err))
			return
		}
		if err := ss.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: e.ID}); err != nil {
			s.logger.InfoContext(ctx, "notifications/elicitation/complete not delivered", slog.String("elicitation", e.ID),
				slog.Any("error", err))
			return
		}
		s.logger.InfoContext(ctx, "elicitation over; client notified", slog.String("elicitation", e.ID),
			slog.String("status", string(st.Status)))
	}()
}

// refused answers a user who did not accept to open the connect link
// (action decline or cancel).
func refused(action string) error {
	if action == "cancel" {
		return stop("Connecting your file-service account was cancelled, so the files cannot be listed. Call list_files again to retry.")
	}
	return stop("You declined connecting your file-service account, so the files cannot be listed.")
}

// finalError explains an elicitation that ended without a connection.
func finalError(st *client.ElicitationStatus) error {
	switch st.Status {
	case client.StatusDeclined:
		return stop("You declined connecting your file-service account, so the files cannot be listed.")
	case client.StatusExpired:
		return stop("The connect link expired. Call list_files again for a new one.")
	default:
		return stop("Connecting your file-service account failed (%s). Call list_files again to retry.", st.Reason)
	}
}

// rpcError is connectd's URLElicitationRequiredError as the SDK's JSON-RPC
// error, which the SDK sends unchanged as the tool call's error.
func rpcError(e *client.RPCError) error {
	data, _ := json.Marshal(e.Data)
	return &jsonrpc.Error{Code: int64(e.Code), Message: e.Message, Data: data}
}

// toSDK converts connectd's input requests to the SDK's types, which write
// exactly the same JSON.
func toSDK(r *client.InputRequiredResult) mcp.InputRequestMap {
	m := make(mcp.InputRequestMap, len(r.InputRequests))
	for k, ir := range r.InputRequests {
		m[k] = &mcp.ElicitParams{Mode: ir.Params.Mode, Message: ir.Params.Message, URL: ir.Params.URL,
			ElicitationID: ir.Params.ElicitationID}
	}
	return m
}

// errCode is a short, secret-free description of a connectd error.
func errCode(err error) string {
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Code != "" {
		return ae.Code
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return "unreachable"
}
