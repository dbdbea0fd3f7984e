package connect

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/release"
	"github.com/connectd/connectd/internal/scope"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// stateTTL bounds a provider authorization round trip.
const stateTTL = 10 * time.Minute

// callbackPath is the one redirect URI registered at every provider.
const callbackPath = "/oauth/callback"

func (s *Server) redirectURI() string { return s.publicURL + callbackPath }

var errLinkInvalid = web.Refuse(http.StatusNotFound, "unknown_link",
	"This connect link is not valid. Ask your application for a new one.", nil)

// flowState is what every step of the browser flow establishes first: the
// elicitation, and a session of the very user it was minted for.
type flowState struct {
	e    *elicitation.Elicitation
	sess session.Session
}

// begin loads the elicitation and the session. With no session it sends the
// browser to log in at the elicitation's issuer (redirect set, ok false). A
// session of any other user is refused before anything else happens.
func (s *Server) begin(w http.ResponseWriter, r *http.Request, loginIfNeeded bool) (*flowState, bool, error) {
	id := r.PathValue("id")
	if !elicitation.ValidID(id) {
		return nil, false, errLinkInvalid
	}
	e, err := s.elicitations.Get(r.Context(), id)
	if errors.Is(err, elicitation.ErrNotFound) {
		return nil, false, errLinkInvalid
	}
	if err != nil {
		return nil, false, err
	}
	s.branded(w, r, e)
	sess, err := s.sessions.Load(w, r)
	if err != nil && loginIfNeeded && e.Effective(s.now()) != elicitation.StatusPending {
		return nil, false, s.unsignedEnd(w, r, e)
	}
	if err != nil {
		if !loginIfNeeded {
			return nil, false, web.Refuse(http.StatusUnauthorized, "login_required",
				"Your sign-in has expired. Open the link from your application again.", nil)
		}
		noStore(w)
		http.Redirect(w, r, loginPath(e.Issuer, "/c/"+e.ID), http.StatusFound)
		return nil, false, nil
	}
	if sess.Issuer != e.Issuer || sess.Subject != e.Subject {
		// The phishing case: someone else's link. Say nothing about whose.
		s.elicitations.Audit(r, audit.Event{Kind: "security.identity_mismatch", Issuer: sess.Issuer, Subject: sess.Subject,
			ClientID: e.ClientID, Provider: e.Provider, Target: e.ID})
		s.logger.WarnContext(r.Context(), "connect link opened by another user", slog.String("elicitation", e.ID))
		refused := web.Refuse(http.StatusForbidden, "identity_mismatch",
			"This link was created for another account. Sign in with the account you use in your application, "+
				"or ask the application for a new link. Nothing was shared.", nil)
		// The page offers the way out: sign out, come back to this link.
		v := templates.WrongAccountView{SwitchAction: switchPath(e.ID), CSRFToken: s.sessions.CSRFToken(sess),
			SignedInAs: sess.Subject}
		if c, err := s.clients.Get(r.Context(), e.ClientID); err == nil {
			v.ClientName = c.Name // which application sent the link: nothing about whom it is for
		}
		refused.Page = templates.WrongAccount(v)
		return nil, false, refused
	}
	return &flowState{e: e, sess: sess}, true, nil
}

// connectStep refuses an approval's link on a step of the connect flow (the
// API-key form, the account choice): those never settle an approval.
func connectStep(e *elicitation.Elicitation) error {
	if e.Kind == elicitation.KindApproval {
		return errLinkInvalid
	}
	return nil
}

// finished renders the page for an elicitation that is no longer pending.
func (s *Server) finished(w http.ResponseWriter, r *http.Request, e *elicitation.Elicitation) error {
	switch e.Effective(s.now()) {
	case elicitation.StatusCompleted:
		return s.connectedPage(w, r, e)
	case elicitation.StatusDeclined:
		return s.outcome(w, r, e, http.StatusOK, templates.OutcomeView{Kind: "declined", Title: templates.T(r.Context(), "outcome.declined.title"),
			Message: templates.T(r.Context(), "outcome.declined.message")})
	case elicitation.StatusExpired:
		return s.outcome(w, r, e, http.StatusGone, templates.OutcomeView{Kind: "expired", Title: templates.T(r.Context(), "outcome.expired.title"),
			Message: templates.T(r.Context(), "outcome.expired.message")})
	default:
		return s.outcome(w, r, e, http.StatusOK, templates.OutcomeView{Kind: "refused", Title: templates.T(r.Context(), "outcome.failed.title"),
			Message: templates.T(r.Context(), "outcome.failed.message")})
	}
}

// outcome renders a page that ends link e, with the way back to e's
// application (its homepage, when it has one: issue 38 item 10).
func (s *Server) outcome(w http.ResponseWriter, r *http.Request, e *elicitation.Elicitation, status int, v templates.OutcomeView) error {
	if v.Connected == nil { // the success page offers it already
		if c, err := s.clients.Get(r.Context(), e.ClientID); err == nil && c.Homepage != "" {
			v.BackName, v.BackURL = c.Name, c.Homepage
		}
	}
	return web.Render(w, r, status, templates.Outcome(v))
}

// unsignedEnd is the page of a link that is no longer pending, for a
// browser not signed in: that it has expired, or that it was used — never
// how, or by whom — without asking to sign in first (issue 38 item 10: a
// visitor had to sign in to learn a link had expired).
func (s *Server) unsignedEnd(w http.ResponseWriter, r *http.Request, e *elicitation.Elicitation) error {
	noStore(w)
	if e.Effective(s.now()) == elicitation.StatusExpired {
		return s.outcome(w, r, e, http.StatusGone, templates.OutcomeView{Kind: "expired", Title: templates.T(r.Context(), "outcome.expired.title"),
			Message: templates.T(r.Context(), "outcome.expired_unshared.message")})
	}
	return s.outcome(w, r, e, http.StatusOK, templates.OutcomeView{Kind: "declined", Title: templates.T(r.Context(), "outcome.used.title"),
		Message: templates.T(r.Context(), "outcome.used.message"), Account: true})
}

// existing returns the user's connection the elicitation is about, whose
// scopes decide what the consent page offers (and whether it is the
// consent-only path): the one the request names, else the user's only one
// at the provider. None for a request for another account (elicitation.AccountNew), or
// when the user has several and the request named none: the provider then
// says which account the user connects.
func (s *Server) existing(ctx context.Context, e *elicitation.Elicitation) (*vault.Connection, *vault.Credential, error) {
	if e.Account == elicitation.AccountNew {
		return nil, nil, nil
	}
	v, err := s.vaultOf(ctx, e)
	if err != nil {
		return nil, nil, err
	}
	conn, cred, err := v.Get(ctx, identity.User{Issuer: e.Issuer, Subject: e.Subject}, e.Provider, e.Account)
	if errors.Is(err, vault.ErrNotConnected) || errors.Is(err, keyring.ErrDecrypt) || errors.Is(err, vault.ErrAccountRequired) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return conn, cred, nil
}

// offer is what Allow gives the client, as the consent page lists it.
type offer struct {
	// scopes is everything the client will receive, which its approval
	// records. At a provider that cannot narrow tokens: the requested scopes
	// and, when the user already has a connection, every scope it grants,
	// since the credential is handed over whole. At one that narrows: the
	// requested scopes and what the client was already approved for on the
	// connection's account (a step-up does not shrink its approval).
	scopes []string
	// beyond are the listed scopes the client did not ask for.
	beyond []string
	// narrow: the provider narrows tokens; the client receives a token
	// limited to scopes.
	narrow bool
	// authorize is what the provider is asked for when Allow goes there:
	// scopes, plus at a narrowing provider everything the connection already
	// grants (incremental authorization keeps the other clients' scopes).
	authorize []string
	// shared: the active connection already has every requested scope, so
	// Allow shares it as is (no provider round trip) with its account.
	shared       bool
	accountID    string
	accountShown string // vault.Credential.DisplayName of the shared connection
	label        string // the user's label of the shared connection
	connID       string // the shared connection
	// stepUp names the connection the request is for when Allow goes to
	// the provider for it (more scopes, or connecting it again): the
	// provider must sign that account in (release.Completes).
	stepUp                  bool
	stepUpName, stepUpLabel string
}

// offerFor works out what Allow would give e's client now. The consent page
// lists it, and its digest travels in the form, so that Allow approves what
// the page showed and not what the connection became meanwhile.
func (s *Server) offerFor(ctx context.Context, e *elicitation.Elicitation, info provider.Info) (offer, error) {
	o := offer{scopes: scope.Union(nil, e.Scopes)}
	if info.Kind != provider.KindOAuth2 {
		return o, nil
	}
	o.narrow = info.NarrowOnRefresh
	o.authorize = o.scopes
	conn, cred, err := s.existing(ctx, e)
	if err != nil || conn == nil {
		return o, err
	}
	if o.narrow {
		user := identity.User{Issuer: e.Issuer, Subject: e.Subject}
		held, err := s.vault.In(conn.Org).HeldOf(ctx, user, *conn)
		if err != nil {
			return o, err
		}
		a, err := s.consents.Get(ctx, user, e.ClientID, e.Provider, conn.ID)
		switch {
		case err == nil && release.SameAccount(held, &a): // approved for this account
			o.scopes = scope.Union(a.Scopes, e.Scopes)
		case err != nil && !errors.Is(err, consent.ErrNotGiven):
			return o, err
		}
		o.authorize = scope.Union(conn.Scopes, o.scopes)
	} else {
		o.scopes = scope.Union(conn.Scopes, e.Scopes)
		o.beyond = scope.Missing(conn.Scopes, e.Scopes)
		o.authorize = o.scopes
	}
	if conn.Status == vault.StatusActive && len(scope.Missing(e.Scopes, conn.Scopes)) == 0 {
		o.shared, o.accountID, o.accountShown, o.connID, o.label = true, cred.AccountID, cred.DisplayName(), conn.ID, conn.Label
	} else if vault.ValidID(e.Account) {
		o.stepUp, o.stepUpName, o.stepUpLabel = true, cred.DisplayName(), conn.Label
	}
	return o, nil
}

// digest identifies an offer in the consent form.
func (o offer) digest() string {
	h := sha256.New()
	fmt.Fprintf(h, "connectd/offer/v1\x00%t\x00%q\x00", o.shared, o.scopes)
	if o.shared {
		h.Write(consent.AccountHash(o.accountID))
		h.Write([]byte("\x00" + o.connID))
	}
	if o.narrow {
		fmt.Fprintf(h, "\x00narrow\x00%q", o.authorize)
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// clientMark is an MCP server's picture on a page, whose CSP then names its
// logo's origin (call it before the page is written).
func clientMark(w http.ResponseWriter, cl clientauth.Client) templates.Mark {
	web.AllowImages(w.Header(), cl.LogoURL)
	return templates.Mark{Name: cl.Name, LogoURL: cl.LogoURL}
}

// providerMark is a provider's picture on a page: the operator's logo
// (whose origin the page's CSP then names) or the template's monogram.
func providerMark(w http.ResponseWriter, info provider.Info) templates.Mark {
	web.AllowImages(w.Header(), info.LogoURL)
	return templates.ProviderMark(info.DisplayName, info.LogoURL, info.Template)
}

func (s *Server) consentView(w http.ResponseWriter, ctx context.Context, fs *flowState) (templates.ConsentView, error) {
	e := fs.e
	client, err := s.clients.Get(ctx, e.ClientID)
	if err != nil {
		return templates.ConsentView{}, fmt.Errorf("connect: load client: %w", err)
	}
	p, err := s.catalog.Get(e.Provider)
	if err != nil {
		return templates.ConsentView{}, web.Refuse(http.StatusBadRequest, "unknown_provider", "This provider is no longer available.", nil)
	}
	info := p.Info()
	o, err := s.offerFor(ctx, e, info)
	if err != nil {
		return templates.ConsentView{}, err
	}
	v := templates.ConsentView{ClientName: client.Name, ProviderName: info.DisplayName, Scopes: o.scopes, Beyond: o.beyond,
		Action: "/c/" + e.ID, CSRFToken: s.sessions.CSRFToken(fs.sess), Offer: o.digest(), UserLabel: fs.sess.Subject,
		SwitchAction: switchPath(e.ID), APIKey: info.Kind == provider.KindAPIKey, Narrowed: o.narrow, ProxyOnly: client.ProxyOnly,
		Client: clientMark(w, client), ClientHomepage: client.Homepage, Provider: providerMark(w, info),
		ScopeText: info.ScopeDescriptions}
	if rules, ok := client.ProxyRules[e.Provider]; ok {
		v.ProxyRules = rules.Description
		if v.ProxyRules == "" {
			v.ProxyRules = templates.T(ctx, "consent.proxy_rules_default")
		}
		for _, text := range rules.Rules {
			if rule, err := clientauth.ParseRule(text); err == nil && rule.Ask {
				v.AskBefore = append(v.AskBefore, rule.Words)
			}
		}
	}
	if info.Kind == provider.KindOAuth2 {
		v.DestinationHost = info.AuthorizeHost
		v.StepUp, v.AccountName, v.AccountLabel = o.stepUp, o.stepUpName, o.stepUpLabel
		if o.shared {
			// Which account is shared, in the provider's words ("octocat"),
			// with the user's label; none when the provider named it not.
			v.Shared, v.AccountLabel, v.DestinationHost = true, o.label, ""
			v.AccountName = o.accountShown
		}
	}
	return v, nil
}

// checkForm parses a POSTed form and its CSRF token against the session.
func (s *Server) checkForm(w http.ResponseWriter, r *http.Request, sess session.Session) error {
	if err := r.ParseForm(); err != nil {
		return web.Refuse(http.StatusBadRequest, "bad_form", "The form could not be read.", nil)
	}
	if err := s.sessions.CheckCSRF(sess, r.PostForm.Get(session.CSRFField)); err != nil {
		return &web.Error{Status: http.StatusForbidden, Code: "csrf_failed", Err: err,
			Description: "The form has expired. Open the link from your application again."}
	}
	return nil
}

// beginForm is begin for the consent page's forms (POST): the same checks,
// then the form's CSRF token, then that the elicitation is still pending.
// When it is not, the finished page is written and fs is nil. It serves the
// approval page's form too (POST /c/{id}); a connect step's form checks
// the elicitation is a connect link (connectStep).
func (s *Server) beginForm(w http.ResponseWriter, r *http.Request) (*flowState, error) {
	fs, _, err := s.begin(w, r, false)
	if err != nil {
		return nil, err
	}
	if err := s.checkForm(w, r, fs.sess); err != nil {
		return nil, err
	}
	if fs.e.Effective(s.now()) != elicitation.StatusPending {
		if fs.e.Kind == elicitation.KindApproval {
			return nil, s.approvalFinished(w, r, fs.e)
		}
		return nil, s.finished(w, r, fs.e)
	}
	return fs, nil
}

// store stores cred as the user's connection to e's provider and, in the
// same transaction, completes e with the user's approval of scopes on the
// stored account, and enqueues the webhook events of both; then shows the
// success page. The connection is e's organization's, obtained through its
// provider app appID ("" for the deployment's shared app, and for API keys).
func (s *Server) store(w http.ResponseWriter, r *http.Request, e *elicitation.Elicitation, how, appID string, cred vault.Credential, scopes []string) error {
	var ok bool
	v, err := s.vaultOf(r.Context(), e)
	if err != nil {
		return err
	}
	user := identity.User{Issuer: e.Issuer, Subject: e.Subject}
	// What the request was about: the connection it named, or the user's
	// only one there (what the page offered), or another account. A
	// credential whose account the provider did not name replaces that
	// connection (reauthorizing it, or a new API key), not a new one.
	target := vault.Target{New: e.Account == elicitation.AccountNew, Unnamed: vault.MadeUpAccount(cred.AccountID), AppID: appID}
	switch {
	case vault.ValidID(e.Account):
		target.ID = e.Account
	case e.Account == "":
		if conn, _, err := s.existing(r.Context(), e); err != nil {
			return err
		} else if conn != nil {
			target.ID = conn.ID
		}
	}
	var connID string
	_, err = v.PutWith(r.Context(), user, e.Provider, target, cred, func(ctx context.Context, tx pgx.Tx, c vault.Connection, ch vault.Change) error {
		// A request that named a connection ends on it or fails: the
		// provider's answer for another account rolls back, storing and
		// granting nothing (release.Completes).
		if vault.ValidID(e.Account) {
			if err := release.Completes(e.Provider, e.Account, c.ID, cred.DisplayName()); err != nil {
				return err
			}
		}
		var err error
		connID = c.ID
		if ok, err = s.completeIn(r, tx, e, scopes, ch.AccountID, c.ID); err != nil {
			return err
		}
		return s.lifecycle.Stored(ctx, tx, c, ch)
	})
	if errors.Is(err, release.ErrAccountMismatch) {
		return s.accountMismatch(w, r, e, err)
	}
	if errors.Is(err, vault.ErrTooManyAccounts) {
		if _, ferr := s.elicitations.Settle(r, e, elicitation.StatusFailed, "too_many_accounts"); ferr != nil {
			return ferr
		}
		return web.Refuse(http.StatusConflict, "too_many_accounts",
			"You have connected as many accounts at this provider as connectd allows. "+
				"Disconnect one on your account page (/account), then try again.", nil)
	}
	if err != nil {
		return err
	}
	return s.completed(w, r, e, how, ok, connID)
}

// accountMismatch answers a provider round trip that signed in another
// account than the connection the request named: nothing was stored or
// granted, the elicitation stays pending (the user may try again with the
// right account; the state was used up, so the next Allow starts a new
// round trip), and a page says what happened. The token the provider
// issued is dropped, not revoked: at providers that revoke a whole grant
// (Google) that would end the user's own connection of that account.
func (s *Server) accountMismatch(w http.ResponseWriter, r *http.Request, e *elicitation.Elicitation, err error) error {
	s.elicitations.Audit(r, audit.Event{Kind: "security.account_mismatch", Issuer: e.Issuer, Subject: e.Subject,
		ClientID: e.ClientID, Provider: e.Provider, Target: e.ID})
	s.logger.WarnContext(r.Context(), "provider signed in another account than the request named; nothing stored",
		slog.String("elicitation", e.ID), slog.String("provider", e.Provider))
	refused := web.AsError(err)
	v := templates.AccountMismatchView{ProviderName: e.Provider, Retry: "/c/" + e.ID}
	var rf *release.Refusal
	if errors.As(err, &rf) {
		v.Got = rf.Shown
	}
	u := identity.User{Issuer: e.Issuer, Subject: e.Subject}
	if vs, verr := s.vaultOf(r.Context(), e); verr == nil {
		if conn, cred, gerr := vs.Get(r.Context(), u, e.Provider, e.Account); gerr == nil {
			v.Wanted, v.WantedLabel = cred.DisplayName(), conn.Label
		}
	}
	if client, cerr := s.clients.Get(r.Context(), e.ClientID); cerr == nil {
		v.ClientName, v.Client = client.Name, clientMark(w, client)
	}
	if p, perr := s.catalog.Get(e.Provider); perr == nil {
		v.ProviderName, v.Provider = p.Info().DisplayName, providerMark(w, p.Info())
	}
	c := *refused
	c.Page = templates.AccountMismatch(v)
	return &c
}

// complete marks e completed (waking waiters) and records the user's
// approval of scopes on accountID's connection for e's client — the
// consent-only path, where the connection is already stored — and shows the
// success page.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, e *elicitation.Elicitation, how string, scopes []string, accountID, connID string) error {
	var ok bool
	err := pgx.BeginFunc(r.Context(), s.pool, func(tx pgx.Tx) error {
		var err error
		ok, err = s.completeIn(r, tx, e, scopes, accountID, connID)
		return err
	})
	if err != nil {
		return err
	}
	return s.completed(w, r, e, how, ok, connID)
}

// completeIn marks e completed within tx, with the approval and the
// client's webhook event: consent exists exactly when the user finished the
// flow. It reports false, writing nothing, when e was no longer pending.
func (s *Server) completeIn(r *http.Request, tx pgx.Tx, e *elicitation.Elicitation, scopes []string, accountID, connID string) (bool, error) {
	ok, err := s.elicitations.SettleWith(r, tx, e, elicitation.StatusCompleted, "")
	if err != nil || !ok {
		return false, err
	}
	if err := s.grantConsent(r, tx, e, scopes, accountID, connID); err != nil {
		return false, err
	}
	return true, s.elicitations.EmitEnded(r.Context(), tx, e, elicitation.StatusCompleted, "")
}

// completed shows the outcome of a completion: the success page, or the
// page of however e ended first.
func (s *Server) completed(w http.ResponseWriter, r *http.Request, e *elicitation.Elicitation, how string, ok bool, connID string) error {
	if !ok {
		return s.finished(w, r, e)
	}
	s.elicitations.Finished(elicitation.StatusCompleted)
	s.logger.InfoContext(r.Context(), "connect completed", slog.String("elicitation", e.ID),
		slog.String("provider", e.Provider), slog.String("via", how))
	// The success page is the link's own, reached by a GET (issue 38 item
	// 2): the provider's one-time code leaves the address bar and the
	// history (a redirect replaces the callback's entry), and a reload
	// shows the page again, not a used-up state's 400.
	noStore(w)
	http.Redirect(w, r, connectedPath(e.ID, connID), http.StatusSeeOther)
	return nil
}

// connectedPath is the success page of link id, naming the connection it
// ended on (a hint only: the page shows it only if it is the signed-in
// user's).
func connectedPath(id, connID string) string {
	return "/c/" + id + "?" + url.Values{"account": {connID}}.Encode()
}

// connectedPage is the page of a completed link: who can now use which
// account, when the link names one of the signed-in user's connections
// (connectedPath), else that the request was completed.
func (s *Server) connectedPage(w http.ResponseWriter, r *http.Request, e *elicitation.Elicitation) error {
	noStore(w)
	if connID := r.URL.Query().Get("account"); vault.ValidID(connID) {
		if c, err := s.connectedView(w, r.Context(), e, connID); err == nil {
			return s.outcome(w, r, e, http.StatusOK, templates.OutcomeView{Kind: "success", Title: templates.T(r.Context(), "outcome.connected.title"),
				Message: templates.T(r.Context(), "outcome.connected.message"), Account: true, Connected: c})
		} else if !errors.Is(err, vault.ErrNotConnected) {
			// The flow is complete; only the page's wording is lost.
			s.logger.WarnContext(r.Context(), "success page details", slog.Any("error", err))
		}
	}
	return s.outcome(w, r, e, http.StatusOK, templates.OutcomeView{Kind: "success", Title: templates.T(r.Context(), "outcome.already.title"),
		Message: templates.T(r.Context(), "outcome.already.message"), Account: true})
}

// connectedView names, for the success page, the application, the
// provider and the account connID now shares with it.
func (s *Server) connectedView(w http.ResponseWriter, ctx context.Context, e *elicitation.Elicitation, connID string) (*templates.ConnectedView, error) {
	client, err := s.clients.Get(ctx, e.ClientID)
	if err != nil {
		return nil, err
	}
	p, err := s.catalog.Get(e.Provider)
	if err != nil {
		return nil, err
	}
	info := p.Info()
	v := &templates.ConnectedView{ClientName: client.Name, ClientHomepage: client.Homepage, ProviderName: info.DisplayName,
		Client: clientMark(w, client), Provider: providerMark(w, info)}
	vs, err := s.vaultOf(ctx, e)
	if err != nil {
		return nil, err
	}
	conn, cred, err := vs.Get(ctx, identity.User{Issuer: e.Issuer, Subject: e.Subject}, e.Provider, connID)
	if err != nil {
		return nil, err
	}
	v.AccountName, v.AccountLabel = cred.DisplayName(), conn.Label
	return v, nil
}

// decline marks e declined and shows the declined page.
func (s *Server) decline(w http.ResponseWriter, r *http.Request, e *elicitation.Elicitation, reason string) error {
	if _, err := s.elicitations.Settle(r, e, elicitation.StatusDeclined, reason); err != nil {
		return err
	}
	return s.outcome(w, r, e, http.StatusOK, templates.OutcomeView{Kind: "declined", Title: templates.T(r.Context(), "outcome.declined.title"),
		Message: templates.T(r.Context(), "outcome.you_declined.message")})
}
