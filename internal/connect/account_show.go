package connect

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/notice"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/receipt"
	"github.com/connectd/connectd/internal/release"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// notices are what the account page says after an action (?done=…): the
// catalog ids of fixed sentences, so nothing from the request is echoed.
var notices = map[string]string{
	"withdrawn":         "account.done.withdrawn",
	"disconnected":      "account.done.disconnected",
	"disconnected_here": "account.done.disconnected_here",
	"gone":              "account.done.gone",
	"labelled":          "account.done.labelled",
	"dismissed":         "account.done.dismissed",
}

// accountPage handles GET /account[?issuer=ID]. Without a session it sends
// the browser to sign in — at the issuer ?issuer= names (an organization's
// own, which the choice does not list, included), else straight to the one
// login issuer, or a choice of them — and back here.
func (s *Server) accountPage(w http.ResponseWriter, r *http.Request) error {
	noStore(w)
	sess, err := s.sessions.Load(w, r)
	if err != nil {
		if issuer := r.URL.Query().Get("issuer"); issuer != "" {
			http.Redirect(w, r, loginPath(issuer, accountPath), http.StatusFound) // /login refuses an unknown one
			return nil
		}
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
	if id, ok := notices[r.URL.Query().Get("done")]; ok {
		v.Notice = templates.T(r.Context(), id)
	}
	allowMarks(w, v.Connections)
	return web.Render(w, r, http.StatusOK, templates.AccountPage(v))
}

// accountView gathers the page: the user's connections, each with the
// approvals given for it, when each client last used it and its newest
// receipts.
func (s *Server) accountView(ctx context.Context, sess session.Session) (templates.AccountView, error) {
	u := identity.User{Issuer: sess.Issuer, Subject: sess.Subject}
	v := templates.AccountView{UserLabel: sess.Subject, Issuer: sess.Issuer, CSRF: s.sessions.CSRFToken(sess)}
	// The user's connections in every organization: the page groups them
	// under each organization's name when there is more than one.
	conns, err := s.vault.ListAll(ctx, u)
	if err != nil {
		return v, err
	}
	orgNames, err := s.orgNames(ctx, conns)
	if err != nil {
		return v, err
	}
	approvals, err := s.consents.OfUser(ctx, u)
	if err != nil {
		return v, err
	}
	// The receipts are the source of "Last used": proxied calls (package
	// receipt) and token reads (the sampled audit trail: account_reads.go).
	lastUses, err := receipt.LastUses(ctx, s.pool, u)
	if err != nil {
		return v, err
	}
	var ids []string
	for _, c := range conns {
		if c.Status != vault.StatusRevoked {
			ids = append(ids, c.ID)
		}
	}
	recent, err := receipt.Recent(ctx, s.pool, u, ids, receiptsShown)
	if err != nil {
		return v, err
	}
	if recent, lastUses, err = s.withReads(ctx, u, recent, lastUses, receiptsShown); err != nil {
		return v, err
	}
	names := clientNames{s: s, names: map[string]string{}}
	if v.Notices, err = s.noticesOf(ctx, u); err != nil {
		return v, err
	}
	for _, c := range conns {
		if c.Status == vault.StatusRevoked {
			continue
		}
		ac := templates.AccountConnection{ID: c.ID, Org: orgNames[c.Org], Label: c.Label, Provider: c.Provider, ProviderName: c.Provider, Kind: templates.T(ctx, "account.kind.oauth"),
			Healthy: c.Status == vault.StatusActive, Health: templates.T(ctx, "account.health.working"), Scopes: c.Scopes,
			ConnectedAt: whenIn(ctx, c.CreatedAt)}
		switch {
		case !ac.Healthy:
			ac.Health = templates.T(ctx, "account.health.reconnect")
		case c.LastError != "":
			ac.Healthy = false
			ac.Health = templates.T(ctx, "account.health.refresh_failed", "Error", c.LastError,
				"When", whenIn(ctx, c.HealthCheckedAt))
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
				ac.Kind = templates.T(ctx, "account.kind.api_key")
			}
		}
		// The sealed credential names the account; an approval covers the
		// connection only for that account and every scope it grants.
		in := s.vault.In(c.Org)
		_, cred, err := in.Get(ctx, u, c.Provider, c.ID)
		var held vault.Held
		switch {
		case err == nil:
			ac.Account = cred.DisplayName()
			if held, err = in.HeldOf(ctx, u, c); err != nil {
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
		approved := map[string]bool{}
		for _, a := range approvals {
			if a.Provider != c.Provider || a.ConnectionID != c.ID {
				continue
			}
			// What it receives now: the one release decision.
			sv := templates.AccountServer{ClientID: a.ClientID, Name: a.ClientID, Scopes: a.Scopes,
				ApprovedAt: whenIn(ctx, a.UpdatedAt), AccountChanged: true}
			if cred != nil {
				d := release.Client{Org: c.Org}.Decide(held, &a.Approval, narrows)
				sv.Current, sv.AccountChanged = d.Release != release.Nothing, d.AccountChanged
				if d.Release == release.Narrowed {
					sv.NarrowedTo = d.Scopes
				}
			}
			sv.Name = names.of(ctx, a.ClientID)
			approved[a.ClientID] = true
			if at, ok := lastUses[receipt.Pair{ConnectionID: c.ID, ClientID: a.ClientID}]; ok {
				sv.LastUsed = whenIn(ctx, at)
			}
			ac.Servers = append(ac.Servers, sv)
		}
		// Any client's use counts, including one whose access was withdrawn.
		for use, at := range lastUses {
			if use.ConnectionID == c.ID && at.After(last) && !at.Before(c.CreatedAt) {
				last = at
			}
		}
		if !last.IsZero() {
			ac.LastUsed = whenIn(ctx, last)
		}
		for _, rc := range recent[c.ID] {
			ac.Receipts = append(ac.Receipts, receiptLine(ctx, rc, names, approved[rc.ClientID]))
		}
		v.Connections = append(v.Connections, ac)
	}
	slices.SortFunc(v.Connections, func(a, b templates.AccountConnection) int {
		return cmp.Or(cmp.Compare(strings.ToLower(a.Org), strings.ToLower(b.Org)),
			cmp.Compare(strings.ToLower(a.ProviderName), strings.ToLower(b.ProviderName)))
	})
	return v, nil
}

// allowMarks names in the page's CSP the origins of the providers' logos
// it shows.
func allowMarks(w http.ResponseWriter, conns []templates.AccountConnection) {
	for _, c := range conns {
		web.AllowImages(w.Header(), c.Mark.LogoURL)
	}
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
		switch n.Kind {
		case notice.KindClientCutOff, notice.KindAdminRevoked, notice.KindClientUnlinked:
		default:
			continue // a kind this version cannot word
		}
		an := templates.AccountNotice{ID: strconv.FormatInt(n.ID, 10), Kind: n.Kind, Date: whenIn(ctx, n.At),
			ProviderName: n.Provider, Account: n.Account, ClientName: n.ClientName}
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
