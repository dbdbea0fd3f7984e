package connect

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/connectd/connectd/internal/approval"
	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/receipt"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// The per-request approval page (issue 36): GET /c/{id} and POST /c/{id}
// for an elicitation of kind approval, behind the same begin as a connect
// link — a session of the very user the call is for, any other refused with
// identity_mismatch before anything about the call is shown.

// approvalPage shows what approval fs.e asks.
func (s *Server) approvalPage(w http.ResponseWriter, r *http.Request, fs *flowState) error {
	e := fs.e
	if e.Effective(s.now()) != elicitation.StatusPending {
		return s.approvalFinished(w, r, e)
	}
	v, err := s.approvalView(w, r, fs)
	if err != nil {
		return err
	}
	return web.Render(w, r, http.StatusOK, templates.Approval(v))
}

// approvalDecide records the user's answer to approval fs.e (the form's
// CSRF token checked by beginForm). The body hash posted must be the one
// the call is bound to: the user decides on what the page showed.
func (s *Server) approvalDecide(w http.ResponseWriter, r *http.Request, fs *flowState) error {
	e := fs.e
	q, err := s.approvals.Request(r.Context(), e)
	if errors.Is(err, approval.ErrNotFound) {
		return errLinkInvalid
	}
	if err != nil {
		return err
	}
	var d approval.Decision
	switch r.PostForm.Get("decision") {
	case "once":
		d = approval.Once
	case "standing":
		if q.Standing <= 0 {
			return web.Refuse(http.StatusBadRequest, "bad_form", "This request can be allowed only once.", nil)
		}
		d = approval.Standing
	case "deny":
		d = approval.Denied
	default:
		return web.Refuse(http.StatusBadRequest, "bad_form", "Choose Allow or Deny.", nil)
	}
	if d != approval.Denied && subtle.ConstantTimeCompare([]byte(r.PostForm.Get("body_sha256")),
		[]byte(hex.EncodeToString(q.BodySHA256[:]))) != 1 {
		return web.Refuse(http.StatusBadRequest, "bad_form", "This form is not for this request. Open the link again.", nil)
	}
	o, err := s.orgOf(r.Context(), e)
	if err != nil {
		return err
	}
	ok, err := s.approvals.Decide(r, e, o, d)
	if err != nil {
		return err
	}
	if !ok {
		again, err := s.elicitations.Get(r.Context(), e.ID)
		if err != nil {
			return err
		}
		return s.approvalFinished(w, r, again)
	}
	kind := receipt.KindApprovalGranted
	if d == approval.Denied {
		kind = receipt.KindApprovalDenied
	}
	_, pattern, _ := strings.Cut(q.Rule, " ")
	s.receipts.Record(receipt.Use{Org: o, Issuer: e.Issuer, Subject: e.Subject, Provider: e.Provider,
		ConnectionID: q.ConnectionID, ClientID: e.ClientID, Kind: kind, Method: q.Method, Template: pattern, At: s.now()})
	ctx := r.Context()
	name := s.clientName(r, e.ClientID)
	switch d {
	case approval.Denied:
		return s.outcome(w, r, e, http.StatusOK, templates.OutcomeView{Kind: "declined", Title: templates.T(ctx, "approval.denied.title"),
			Message: templates.T(ctx, "approval.denied.message", "Client", name), Account: true})
	case approval.Standing:
		return s.outcome(w, r, e, http.StatusOK, templates.OutcomeView{Kind: "success", Title: templates.T(ctx, "approval.allowed.title"),
			Message: templates.T(ctx, "approval.allowed_standing.message", "Client", name, "Words", q.Words,
				"Duration", duration(ctx, q.Standing)), Account: true})
	}
	return s.outcome(w, r, e, http.StatusOK, templates.OutcomeView{Kind: "success", Title: templates.T(ctx, "approval.allowed.title"),
		Message: templates.T(ctx, "approval.allowed_once.message", "Client", name), Account: true})
}

func (s *Server) clientName(r *http.Request, id string) string {
	if cl, err := s.clients.Get(r.Context(), id); err == nil {
		return cl.Name
	}
	return templates.T(r.Context(), "approval.the_application")
}

// approvalFinished is the page of an approval that is no longer pending.
func (s *Server) approvalFinished(w http.ResponseWriter, r *http.Request, e *elicitation.Elicitation) error {
	ctx := r.Context()
	switch e.Effective(s.now()) {
	case elicitation.StatusCompleted:
		return s.outcome(w, r, e, http.StatusOK, templates.OutcomeView{Kind: "success", Title: templates.T(ctx, "approval.already.title"),
			Message: templates.T(ctx, "approval.already.message"), Account: true})
	case elicitation.StatusDeclined:
		return s.outcome(w, r, e, http.StatusOK, templates.OutcomeView{Kind: "declined", Title: templates.T(ctx, "approval.denied.title"),
			Message: templates.T(ctx, "approval.withdrawn.message"), Account: true})
	case elicitation.StatusExpired:
		return s.outcome(w, r, e, http.StatusGone, templates.OutcomeView{Kind: "expired", Title: templates.T(ctx, "approval.expired.title"),
			Message: templates.T(ctx, "approval.expired.message")})
	}
	return s.finished(w, r, e)
}

func (s *Server) approvalView(w http.ResponseWriter, r *http.Request, fs *flowState) (templates.ApprovalView, error) {
	e := fs.e
	ctx := r.Context()
	q, err := s.approvals.Request(ctx, e)
	if errors.Is(err, approval.ErrNotFound) {
		return templates.ApprovalView{}, errLinkInvalid
	}
	if err != nil {
		return templates.ApprovalView{}, err
	}
	client, err := s.clients.Get(ctx, e.ClientID)
	if err != nil {
		return templates.ApprovalView{}, fmt.Errorf("connect: load client: %w", err)
	}
	p, err := s.catalog.Get(e.Provider)
	if err != nil {
		return templates.ApprovalView{}, web.Refuse(http.StatusBadRequest, "unknown_provider", "This provider is no longer available.", nil)
	}
	info := p.Info()
	v := templates.ApprovalView{ClientName: client.Name, ClientHomepage: client.Homepage, Client: clientMark(w, client),
		ProviderName: info.DisplayName, Provider: providerMark(w, info), Words: q.Words, Method: q.Method,
		URL: strings.TrimRight(info.APIBaseURL, "/") + q.Path, BodyHash: hex.EncodeToString(q.BodySHA256[:]),
		Expires: whenIn(ctx, e.ExpiresAt), Action: "/c/" + e.ID, CSRFToken: s.sessions.CSRFToken(fs.sess),
		UserLabel: fs.sess.Subject, SwitchAction: switchPath(e.ID)}
	if q.Standing > 0 {
		v.Standing = duration(ctx, q.Standing)
	}
	if vs, err := s.vaultOf(ctx, e); err == nil {
		if conn, cred, err := vs.Get(ctx, identity.User{Issuer: e.Issuer, Subject: e.Subject}, e.Provider, q.ConnectionID); err == nil {
			v.AccountName, v.AccountLabel = cred.DisplayName(), conn.Label
		}
	}
	switch {
	case q.BodyUnreadable:
		v.BodyNote = templates.T(ctx, "approval.body_unreadable", "Size", q.BodySize)
	case len(q.Body) > 0:
		v.Body, v.Full, v.BodyNote = showBody(ctx, q.Body, q.BodyType)
	}
	return v, nil
}

// Folding of bodies on the approval page.
const (
	foldValueAt = 300      // a JSON string longer than this is folded
	foldKeep    = 200      // characters of it shown
	maxShown    = 64 << 10 // text bodies beyond this are shown only in part
)

// showBody renders a body for the approval page as text: JSON
// pretty-printed in its own order with long strings folded (full then holds
// the whole, indented), other UTF-8 text as it is (cut at maxShown, full
// whole), and anything else only named by its size and type, in ctx's
// language. The page escapes it: nothing in a body can run.
func showBody(ctx context.Context, body []byte, contentType string) (shown, full, note string) {
	if folded, ok := prettyJSON(ctx, body, true); ok {
		whole, _ := prettyJSON(ctx, body, false)
		if folded == whole {
			return folded, "", ""
		}
		return folded, whole, ""
	}
	if utf8.Valid(body) && !bytes.ContainsFunc(body, func(r rune) bool { return r < 0x20 && r != '\n' && r != '\r' && r != '\t' }) {
		if len(body) > maxShown {
			cut := body[:maxShown]
			for !utf8.Valid(cut) {
				cut = cut[:len(cut)-1]
			}
			return string(cut) + "\n…", string(body), ""
		}
		return string(body), "", ""
	}
	if contentType == "" {
		contentType = templates.T(ctx, "approval.body_unknown_type")
	}
	return "", "", templates.T(ctx, "approval.body_binary", "Size", len(body), "Type", contentType)
}

// prettyJSON indents body, one JSON value, keeping its members' order,
// each string longer than foldValueAt cut to foldKeep characters and a note
// of what was cut (in ctx's language) when fold is set; ok is false for
// anything but one JSON value.
func prettyJSON(ctx context.Context, body []byte, fold bool) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		obj bool
		n   int // tokens seen in it
	}
	var stack []frame
	var b strings.Builder
	line := func() {
		b.WriteByte('\n')
		b.WriteString(strings.Repeat("  ", len(stack)))
	}
	values := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil || len(stack) == 0 && values == 1 {
			return "", false
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if f.n > 0 {
				line()
			}
			b.WriteRune(rune(d))
			if len(stack) == 0 {
				values++
			}
			continue
		}
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			key := top.obj && top.n%2 == 0
			if key || !top.obj {
				if top.n > 0 {
					b.WriteByte(',')
				}
				line()
			}
			top.n++
			if key {
				b.WriteString(quoteJSON(tok.(string)))
				b.WriteString(": ")
				continue
			}
		}
		switch v := tok.(type) {
		case json.Delim:
			b.WriteRune(rune(v))
			stack = append(stack, frame{obj: v == '{'})
			continue
		case string:
			if n := utf8.RuneCountInString(v); fold && n > foldValueAt {
				v = string([]rune(v)[:foldKeep]) + templates.T(ctx, "approval.folded", "More", n-foldKeep)
			}
			b.WriteString(quoteJSON(v))
		case json.Number:
			b.WriteString(v.String())
		case bool:
			b.WriteString(strconv.FormatBool(v))
		case nil:
			b.WriteString("null")
		}
		if len(stack) == 0 {
			values++
		}
	}
	return b.String(), values == 1
}

// quoteJSON is s as a JSON string, "<", ">" and "&" as they are: the page
// escapes them, and the user reads what is sent.
func quoteJSON(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// duration says d in words in ctx's language: "1 hour", "30 minutes",
// "2 hours 30 minutes" ("1시간", "2시간 30분").
func duration(ctx context.Context, d time.Duration) string {
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	hours, minutes := plural(ctx, h, "approval.hours"), plural(ctx, m, "approval.minutes")
	switch {
	case h > 0 && m > 0:
		return templates.T(ctx, "approval.duration_join", "Hours", hours, "Minutes", minutes)
	case h > 0:
		return hours
	}
	return minutes
}

// plural is n of the unit whose messages are id.one and id.other (the
// catalogs are flat: the form is picked here, English's way).
func plural(ctx context.Context, n int, id string) string {
	if n == 1 {
		return templates.T(ctx, id+".one", "N", n)
	}
	return templates.T(ctx, id+".other", "N", n)
}
