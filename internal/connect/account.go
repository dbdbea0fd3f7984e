package connect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/connectd/connectd/internal/elicitation"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/lifecycle"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/notice"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/release"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// accountPath is the user's account page: what they connected, which MCP
// servers may use each account with what, and the actions that take that
// back (DESIGN: the user is in control of every grant).
const accountPath = "/account"

// notices are what the account page says after an action (?done=…): fixed
// sentences, so nothing from the request is echoed.
var notices = map[string]string{
	"withdrawn":    "Access removed. That application receives nothing from this account until you allow it again.",
	"disconnected": "Disconnected. The stored access was deleted and revoked at the provider; no application receives it any more.",
	"disconnected_here": "Disconnected here: the stored access was deleted and no application receives it any more. " +
		"The provider did not confirm the revocation, so you may also remove the access in your account settings there.",
	"gone":      "Nothing to do: that access had already been removed.",
	"labelled":  "Label saved.",
	"dismissed": "Notice dismissed.",
}

// accountPage handles GET /account. Without a session it sends the browser
// to sign in (straight to the one login issuer, or a choice of them) and
// back here.
func (s *Server) accountPage(w http.ResponseWriter, r *http.Request) error {
	noStore(w)
	sess, err := s.sessions.Load(w, r)
	if err != nil {
		issuers := s.login.Issuers()
		if len(issuers) == 1 {
			http.Redirect(w, r, loginPath(issuers[0].ID, accountPath), http.StatusFound)
			return nil
		}
		var v templates.AccountSignInView
		for _, is := range issuers {
			v.Issuers = append(v.Issuers, templates.IssuerLink{ID: is.ID, URL: is.URL, LoginURL: loginPath(is.ID, accountPath)})
		}
		return web.Render(w, r, http.StatusOK, templates.AccountSignIn(v))
	}
	v, err := s.accountView(r.Context(), sess)
	if err != nil {
		return err
	}
	v.Notice = notices[r.URL.Query().Get("done")]
	allowMarks(w, v.Connections)
	return web.Render(w, r, http.StatusOK, templates.AccountPage(v))
}

// accountView gathers the page: the user's connections, each with the
// approvals given for it and when each client last read it.
func (s *Server) accountView(ctx context.Context, sess session.Session) (templates.AccountView, error) {
	u := identity.User{Issuer: sess.Issuer, Subject: sess.Subject}
	v := templates.AccountView{UserLabel: sess.Subject, Issuer: sess.Issuer, CSRF: s.sessions.CSRFToken(sess)}
	conns, err := s.vault.List(ctx, u)
	if err != nil {
		return v, err
	}
	approvals, err := s.consents.OfUser(ctx, u)
	if err != nil {
		return v, err
	}
	reads, err := audit.LastReads(ctx, s.pool, u.Issuer, u.Subject)
	if err != nil {
		return v, err
	}
	if v.Notices, err = s.noticesOf(ctx, u); err != nil {
		return v, err
	}
	for _, c := range conns {
		if c.Status == vault.StatusRevoked {
			continue
		}
		ac := templates.AccountConnection{ID: c.ID, Label: c.Label, Provider: c.Provider, ProviderName: c.Provider, Kind: "OAuth",
			Healthy: c.Status == vault.StatusActive, Health: "Working", Scopes: c.Scopes, ConnectedAt: when(c.CreatedAt)}
		switch {
		case !ac.Healthy:
			ac.Health = "Needs reconnecting: the provider no longer accepts this access"
		case c.LastError != "":
			ac.Healthy = false
			ac.Health = "Working, but the last refresh failed (" + c.LastError + ", " + when(c.HealthCheckedAt) +
				"); it is tried again"
		}
		ac.Mark = templates.Mark{Name: ac.ProviderName}
		narrows := false // whether the provider narrows tokens on refresh
		if p, err := s.catalog.Get(c.Provider); err == nil {
			info := p.Info()
			narrows = info.NarrowOnRefresh
			ac.ProviderName = info.DisplayName
			ac.ScopeText = info.ScopeDescriptions
			ac.Mark = templates.ProviderMark(info.DisplayName, info.LogoURL, info.Template)
			if info.Kind == provider.KindAPIKey {
				ac.Kind = "API key"
			}
		}
		// The sealed credential names the account; an approval covers the
		// connection only for that account and every scope it grants.
		_, cred, err := s.vault.Get(ctx, u, c.Provider, c.ID)
		var held vault.Held
		switch {
		case err == nil:
			ac.Account = cred.DisplayName()
			if held, err = s.vault.HeldOf(ctx, u, c); err != nil {
				return v, err
			}
		case errors.Is(err, vault.ErrNotConnected):
			continue // deleted meanwhile
		case errors.Is(err, keyring.ErrDecrypt):
			cred = nil // shown, but no approval covers it
		default:
			return v, err
		}
		var last time.Time
		for _, a := range approvals {
			if a.Provider != c.Provider || a.ConnectionID != c.ID {
				continue
			}
			// What it receives now: the one release decision.
			sv := templates.AccountServer{ClientID: a.ClientID, Name: a.ClientID, Scopes: a.Scopes,
				ApprovedAt: when(a.UpdatedAt), AccountChanged: true}
			if cred != nil {
				d := release.Decide(held, &a.Approval, narrows)
				sv.Current, sv.AccountChanged = d.Release != release.Nothing, d.AccountChanged
				if d.Release == release.Narrowed {
					sv.NarrowedTo = d.Scopes
				}
			}
			if cl, err := s.clients.Get(ctx, a.ClientID); err == nil {
				sv.Name = cl.Name
			}
			if at, ok := reads[audit.Use{ClientID: a.ClientID, Provider: c.Provider, Connection: c.ID}]; ok {
				sv.LastUsed = when(at)
			}
			ac.Servers = append(ac.Servers, sv)
		}
		// Any client's read counts, including one whose access was withdrawn.
		for use, at := range reads {
			if use.Provider == c.Provider && use.Connection == c.ID && at.After(last) && !at.Before(c.CreatedAt) {
				last = at
			}
		}
		if !last.IsZero() {
			ac.LastUsed = when(last)
		}
		v.Connections = append(v.Connections, ac)
	}
	slices.SortFunc(v.Connections, func(a, b templates.AccountConnection) int {
		return cmp.Compare(strings.ToLower(a.ProviderName), strings.ToLower(b.ProviderName))
	})
	return v, nil
}

// accountForm is the start of the account actions: a signed-in session,
// the form's CSRF token, a well-formed provider and connection id. Without
// a session the browser goes back to the page, which signs in again.
func (s *Server) accountForm(w http.ResponseWriter, r *http.Request) (identity.User, string, string, bool, error) {
	sess, err := s.sessions.Load(w, r)
	if err != nil {
		http.Redirect(w, r, accountPath, http.StatusSeeOther)
		return identity.User{}, "", "", false, nil
	}
	if err := r.ParseForm(); err != nil {
		return identity.User{}, "", "", false, web.Refuse(http.StatusBadRequest, "bad_form", "The form could not be read.", nil)
	}
	if err := s.sessions.CheckCSRF(sess, r.PostForm.Get(session.CSRFField)); err != nil {
		return identity.User{}, "", "", false, &web.Error{Status: http.StatusForbidden, Code: "csrf_failed", Err: err,
			Description: "The form has expired. Open your account page again and retry."}
	}
	p := r.PostForm.Get("provider")
	if !names.ValidProvider(p) {
		return identity.User{}, "", "", false, web.Refuse(http.StatusBadRequest, "bad_form", "The form names no account.", nil)
	}
	id := r.PostForm.Get("connection")
	if !vault.ValidID(id) {
		return identity.User{}, "", "", false, web.Refuse(http.StatusBadRequest, "bad_form", "The form names no account.", nil)
	}
	return identity.User{Issuer: sess.Issuer, Subject: sess.Subject}, p, id, true, nil
}

// withdraw handles POST /account/withdraw: one MCP server loses the user's
// approval of one connection (it gets consent_required until the user
// allows it again); the connection and the other approvals stay.
func (s *Server) withdraw(w http.ResponseWriter, r *http.Request) error {
	u, p, id, ok, err := s.accountForm(w, r)
	if !ok {
		return err
	}
	client := r.PostForm.Get("client")
	if !names.ValidClientID(client) {
		return web.Refuse(http.StatusBadRequest, "bad_form", "The form names no application.", nil)
	}
	err = s.lifecycle.Withdraw(r.Context(), consent.Withdrawal{User: u, ClientID: client, Provider: p,
		ConnectionID: id, Actor: "user", RequestID: web.RequestID(r.Context()), IP: web.ClientAddr(r)}, "user")
	done := "withdrawn"
	switch {
	case errors.Is(err, consent.ErrNotGiven):
		done = "gone"
	case err != nil:
		return err
	default:
		s.logger.InfoContext(r.Context(), "approval withdrawn by the user", slog.String("provider", p),
			slog.String("client_id", client))
	}
	http.Redirect(w, r, accountPath+"?done="+done, http.StatusSeeOther)
	return nil
}

// allowMarks names in the page's CSP the origins of the providers' logos
// it shows.
func allowMarks(w http.ResponseWriter, conns []templates.AccountConnection) {
	for _, c := range conns {
		web.AllowImages(w.Header(), c.Mark.LogoURL)
	}
}

// confirmDisconnect handles GET /account/disconnect?provider=&connection=:
// the confirmation step of Disconnect (a page; nothing changes until its
// form is posted), naming the account and every application that loses
// it. A connection that is not the signed-in user's (or no longer exists)
// sends the browser back to the account page with "gone".
func (s *Server) confirmDisconnect(w http.ResponseWriter, r *http.Request) error {
	noStore(w)
	sess, err := s.sessions.Load(w, r)
	if err != nil {
		http.Redirect(w, r, accountPath, http.StatusSeeOther)
		return nil
	}
	q := r.URL.Query()
	p, id := q.Get("provider"), q.Get("connection")
	if !names.ValidProvider(p) || !vault.ValidID(id) {
		return web.Refuse(http.StatusBadRequest, "bad_request", "The link names no account.", nil)
	}
	return s.disconnectPage(w, r, sess, p, id)
}

// disconnectPage renders the confirmation of disconnecting the user's
// connection id at provider p.
func (s *Server) disconnectPage(w http.ResponseWriter, r *http.Request, sess session.Session, p, id string) error {
	v, err := s.accountView(r.Context(), sess)
	if err != nil {
		return err
	}
	for _, c := range v.Connections {
		if c.Provider == p && c.ID == id {
			allowMarks(w, []templates.AccountConnection{c})
			return web.Render(w, r, http.StatusOK, templates.DisconnectConfirm(templates.DisconnectView{Connection: c, CSRF: v.CSRF}))
		}
	}
	http.Redirect(w, r, accountPath+"?done=gone", http.StatusSeeOther)
	return nil
}

// disconnect handles POST /account/disconnect with confirm=yes (the
// confirmation page's form): the connection is deleted with every approval
// of it, then revoked at the provider (RFC 7009) where it can be. Without
// confirm=yes it only shows the confirmation page: a form that skipped it
// disconnects nothing.
func (s *Server) disconnect(w http.ResponseWriter, r *http.Request) error {
	u, p, id, ok, err := s.accountForm(w, r)
	if !ok {
		return err
	}
	if r.PostForm.Get("confirm") != "yes" {
		sess, err := s.sessions.Load(w, r)
		if err != nil {
			return err
		}
		return s.disconnectPage(w, r, sess, p, id)
	}
	d, _, err := s.deleteConnection(r, u, p, id, nil, lifecycle.Actor{Audit: "user", By: "user"})
	if errors.Is(err, vault.ErrNotConnected) {
		http.Redirect(w, r, accountPath+"?done=gone", http.StatusSeeOther)
		return nil
	}
	if err != nil {
		return err
	}
	done := "disconnected"
	if d.Revocation != vault.Revoked {
		done = "disconnected_here"
	}
	http.Redirect(w, r, accountPath+"?done="+done, http.StatusSeeOther)
	return nil
}

// relabel handles POST /account/label: the user's own name for one of their
// connections ("work"), shown to them and to the clients that may use it;
// an empty label removes it.
func (s *Server) relabel(w http.ResponseWriter, r *http.Request) error {
	u, p, id, ok, err := s.accountForm(w, r)
	if !ok {
		return err
	}
	label := strings.TrimSpace(r.PostForm.Get("label"))
	if !vault.ValidLabel(label) {
		return web.Refuse(http.StatusBadRequest, "bad_form",
			fmt.Sprintf("A label is at most %d characters of text.", vault.MaxLabel), nil)
	}
	done := "labelled"
	if err := s.vault.SetLabel(r.Context(), u, p, id, label); errors.Is(err, vault.ErrNotConnected) {
		done = "gone"
	} else if err != nil {
		return err
	}
	http.Redirect(w, r, accountPath+"?done="+done, http.StatusSeeOther)
	return nil
}

// deleteConnection ends the user's connection to provider through the one
// owner of a connection's end (package lifecycle: approvals withdrawn,
// audit rows and the clients' events in the deleting transaction, then the
// revocation at the provider, audited) and returns the clients that lost
// their approval. Unlinking (/v1) and disconnecting (the account page) both
// go through it, as an admin's revocation does.
//
// account, when not nil, is the provider account the caller decided on: a
// connection holding another's credential since is not deleted on that
// decision (lifecycle.ErrReplaced).
func (s *Server) deleteConnection(r *http.Request, u identity.User, p, id string, account []byte, by lifecycle.Actor) (*vault.Deletion, []string, error) {
	by.RequestID, by.IP = web.RequestID(r.Context()), web.ClientAddr(r)
	ended, err := s.lifecycle.Delete(context.WithoutCancel(r.Context()), u, p, id, account, by)
	if err != nil {
		return nil, nil, err
	}
	return ended.Deletion, elicitation.NonNil(ended.Withdrawn), nil
}

// noticesOf are the user's notices (package notice), for the page: only
// the signed-in user's own.
func (s *Server) noticesOf(ctx context.Context, u identity.User) ([]templates.AccountNotice, error) {
	ns, err := notice.List(ctx, s.pool, u)
	if err != nil {
		return nil, err
	}
	out := make([]templates.AccountNotice, 0, len(ns))
	for _, n := range ns {
		if n.Kind != notice.KindClientCutOff {
			continue // a kind this version cannot word
		}
		an := templates.AccountNotice{ID: strconv.FormatInt(n.ID, 10), Date: when(n.At), ProviderName: n.Provider,
			Account: n.Account, ClientName: n.ClientName}
		if an.ClientName == "" {
			an.ClientName = n.ClientID
		}
		if p, err := s.catalog.Get(n.Provider); err == nil {
			an.ProviderName = p.Info().DisplayName
		}
		out = append(out, an)
	}
	return out, nil
}

// dismissNotice handles POST /account/notices/dismiss: the signed-in user's
// notice goes; an id that is not theirs changes nothing ("gone").
func (s *Server) dismissNotice(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.sessions.Load(w, r)
	if err != nil {
		http.Redirect(w, r, accountPath, http.StatusSeeOther)
		return nil
	}
	if err := r.ParseForm(); err != nil {
		return web.Refuse(http.StatusBadRequest, "bad_form", "The form could not be read.", nil)
	}
	if err := s.sessions.CheckCSRF(sess, r.PostForm.Get(session.CSRFField)); err != nil {
		return &web.Error{Status: http.StatusForbidden, Code: "csrf_failed", Err: err,
			Description: "The form has expired. Open your account page again and retry."}
	}
	id, ok := notice.ParseID(r.PostForm.Get("notice"))
	if !ok {
		return web.Refuse(http.StatusBadRequest, "bad_form", "The form names no notice.", nil)
	}
	done := "dismissed"
	if found, err := notice.Dismiss(r.Context(), s.pool, identity.User{Issuer: sess.Issuer, Subject: sess.Subject}, id); err != nil {
		return err
	} else if !found {
		done = "gone"
	}
	http.Redirect(w, r, accountPath+"?done="+done, http.StatusSeeOther)
	return nil
}

// when formats a time for the account page.
func when(t time.Time) string { return t.UTC().Format("2 Jan 2006, 15:04 UTC") }
