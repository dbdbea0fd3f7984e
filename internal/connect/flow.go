package connect

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/connectd/connectd/internal/elicitation"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/oauth2"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/consent"
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
	sess, err := s.sessions.Load(w, r)
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
		refused.Page = templates.WrongAccount(templates.WrongAccountView{SwitchAction: switchPath(e.ID),
			CSRFToken: s.sessions.CSRFToken(sess)})
		return nil, false, refused
	}
	return &flowState{e: e, sess: sess}, true, nil
}

// finished renders the page for an elicitation that is no longer pending.
func (s *Server) finished(w http.ResponseWriter, r *http.Request, e *elicitation.Elicitation) error {
	switch e.Effective(s.now()) {
	case elicitation.StatusCompleted:
		return s.outcome(w, r, http.StatusOK, templates.OutcomeView{Kind: "success", Title: "Already connected",
			Message: "This request was already completed."})
	case elicitation.StatusDeclined:
		return s.outcome(w, r, http.StatusOK, templates.OutcomeView{Kind: "declined", Title: "Request declined",
			Message: "This request was declined. Nothing was shared."})
	case elicitation.StatusExpired:
		return s.outcome(w, r, http.StatusGone, templates.OutcomeView{Kind: "expired", Title: "This link has expired",
			Message: "Ask your application for a new link."})
	default:
		return s.outcome(w, r, http.StatusOK, templates.OutcomeView{Kind: "refused", Title: "This request failed",
			Message: "Ask your application to try again."})
	}
}

func (s *Server) outcome(w http.ResponseWriter, r *http.Request, status int, v templates.OutcomeView) error {
	return web.Render(w, r, status, templates.Outcome(v))
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
	conn, cred, err := s.vault.Get(ctx, identity.User{Issuer: e.Issuer, Subject: e.Subject}, e.Provider, e.Account)
	if errors.Is(err, vault.ErrNotConnected) || errors.Is(err, keyring.ErrDecrypt) || errors.Is(err, vault.ErrAccountRequired) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return conn, cred, nil
}

// connectPage handles GET /c/{id}: login if needed, identity check, consent.
func (s *Server) connectPage(w http.ResponseWriter, r *http.Request) error {
	fs, ok, err := s.begin(w, r, true)
	if err != nil || !ok {
		return err
	}
	e := fs.e
	if e.Effective(s.now()) != elicitation.StatusPending {
		return s.finished(w, r, e)
	}
	if e.Account == "" {
		// Several accounts at the provider and the application named none:
		// the user says which first.
		if v, ok, err := s.accountChoice(r.Context(), fs); err != nil {
			return err
		} else if ok {
			web.AllowImages(w.Header(), v.Client.LogoURL, v.Provider.LogoURL)
			return web.Render(w, r, http.StatusOK, templates.AccountChooser(v))
		}
	}
	v, err := s.consentView(w, r.Context(), fs)
	if err != nil {
		return err
	}
	if v.DestinationHost != "" {
		// Allow answers with a 303 to the provider, and Chromium holds that
		// redirect to this page's form-action: name the provider's origin,
		// taken from the very URL it builds, on this page only.
		if oa, err := s.catalog.OAuth(e.Provider); err == nil {
			web.AllowFormAction(w.Header(), oa.AuthCodeURL("x", "", s.redirectURI(), nil))
		}
	}
	return web.Render(w, r, http.StatusOK, templates.Consent(v))
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
		held, err := s.vault.HeldOf(ctx, user, *conn)
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
			v.ProxyRules = "only the calls the operator allowed it."
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
// When it is not, the finished page is written and fs is nil.
func (s *Server) beginForm(w http.ResponseWriter, r *http.Request) (*flowState, error) {
	fs, _, err := s.begin(w, r, false)
	if err != nil {
		return nil, err
	}
	if err := s.checkForm(w, r, fs.sess); err != nil {
		return nil, err
	}
	if fs.e.Effective(s.now()) != elicitation.StatusPending {
		return nil, s.finished(w, r, fs.e)
	}
	return fs, nil
}

// decide handles POST /c/{id}: Allow or Deny on the consent page.
func (s *Server) decide(w http.ResponseWriter, r *http.Request) error {
	fs, err := s.beginForm(w, r)
	if fs == nil || err != nil {
		return err
	}
	e := fs.e
	switch r.PostForm.Get("decision") {
	case "deny":
		return s.decline(w, r, e, "user_denied")
	case "allow":
	default:
		return web.Refuse(http.StatusBadRequest, "bad_form", "Choose Allow or Deny.", nil)
	}
	p, err := s.catalog.Get(e.Provider)
	if err != nil {
		return web.Refuse(http.StatusBadRequest, "unknown_provider", "This provider is no longer available.", nil)
	}

	info := p.Info()
	o, err := s.offerFor(r.Context(), e, info)
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("offer")), []byte(o.digest())) != 1 {
		// The connection changed since the page was shown (another
		// application widened it, or it was reconnected): show what Allow
		// would give now, and let the user decide on that.
		v, err := s.consentView(w, r.Context(), fs)
		if err != nil {
			return err
		}
		v.Changed = true
		return web.Render(w, r, http.StatusConflict, templates.Consent(v))
	}
	switch info.Kind {
	case provider.KindAPIKey:
		client, err := s.clients.Get(r.Context(), e.ClientID)
		if err != nil {
			return err
		}
		return web.Render(w, r, http.StatusOK, templates.APIKeyForm(templates.APIKeyView{ClientName: client.Name, ProviderName: info.DisplayName,
			Client: clientMark(w, client), Provider: providerMark(w, info),
			Action: "/c/" + e.ID + "/key", CSRFToken: s.sessions.CSRFToken(fs.sess)}))
	case provider.KindOAuth2:
		if o.shared {
			// Consent-only: the connection already has what was asked; the
			// approval is for what the page listed (everything the
			// connection grants, unless the provider narrows tokens).
			return s.complete(w, r, e, "consent_only", o.scopes, o.accountID, o.connID)
		}
		oa, ok := p.(provider.OAuth)
		if !ok {
			return fmt.Errorf("connect: provider %s is not OAuth", e.Provider)
		}
		// Incremental authorization: ask for everything the connection needs
		// (the listed scopes, and at a narrowing provider what it already
		// grants), so the new grant does not lose earlier ones; the approval
		// is for what the page listed.
		target, err := s.startAuthorization(r.Context(), fs, oa, o.authorize, o.scopes)
		if err != nil {
			return err
		}
		noStore(w)
		http.Redirect(w, r, target, http.StatusSeeOther)
		return nil
	default:
		return fmt.Errorf("connect: provider kind %q", info.Kind)
	}
}

const insertOAuthState = `INSERT INTO oauth_states
	(state_hash, elicitation_id, session_hash, verifier_sealed, scopes, approve_scopes, created_at, expires_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

// verifierAAD binds a sealed PKCE verifier to its state.
func verifierAAD(stateHash []byte) []byte {
	return keyring.Binding("connectd/pkce_verifier/v1", string(stateHash))
}

func sessionHash(sess session.Session) []byte {
	h := sha256.Sum256([]byte("connectd/session/" + sess.ID))
	return h[:]
}

// startAuthorization creates the single-use state and PKCE verifier and
// returns the provider's authorize URL, asking for scopes; the callback
// records the approval of approve.
func (s *Server) startAuthorization(ctx context.Context, fs *flowState, p provider.OAuth, scopes, approve []string) (string, error) {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	state := base64.RawURLEncoding.EncodeToString(raw)
	sh := sha256.Sum256([]byte(state))
	verifier := oauth2.GenerateVerifier()
	sealed, err := s.verifierKeys.Seal([]byte(verifier), verifierAAD(sh[:]))
	if err != nil {
		return "", fmt.Errorf("connect: seal verifier: %w", err)
	}
	now := s.now()
	var approveCol any // NULL: the same as scopes
	if !slices.Equal(approve, scopes) {
		approveCol = elicitation.NonNil(approve)
	}
	if _, err := s.pool.Exec(ctx, insertOAuthState, sh[:], fs.e.ID, sessionHash(fs.sess), sealed, elicitation.NonNil(scopes),
		approveCol, now, now.Add(stateTTL)); err != nil {
		return "", fmt.Errorf("connect: store state: %w", err)
	}
	// PKCE S256 on every authorization (the catalog has it on for every
	// OAuth provider).
	u := p.AuthCodeURL(state, oauth2.S256ChallengeFromVerifier(verifier), s.redirectURI(), scopes)
	if fs.e.Account == elicitation.AccountNew {
		u = withParams(u, p.Info().SelectAccount)
	}
	return u, nil
}

// consumeOAuthState takes the state only for the browser session it was
// made for: a callback URL stolen and opened elsewhere is refused without
// using the state up, so the user's own flow can still finish.
const (
	consumeOAuthState = `DELETE FROM oauth_states WHERE state_hash = $1 AND session_hash = $2
		RETURNING elicitation_id, verifier_sealed, scopes, approve_scopes, expires_at`
	selectOAuthState = `SELECT elicitation_id FROM oauth_states WHERE state_hash = $1`
)

type pendingAuth struct {
	elicitation string
	verifier    []byte
	scopes      []string // asked of the provider
	approve     []string // the approval's scopes; nil: scopes
	expires     time.Time
}

// callback handles GET /oauth/callback?code&state[&iss] (or error=...).
func (s *Server) callback(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	rp, perr := parseRedirect(q)
	switch {
	case errors.Is(perr, errParamMissing):
		return web.Refuse(http.StatusBadRequest, "missing_state",
			"This sign-in response is incomplete. Open the link from your application again.", nil)
	case perr != nil:
		// Not a state connectd issued (or a parameter repeated or malformed):
		// refused before the database is asked.
		return web.Refuse(http.StatusBadRequest, "invalid_state",
			"This sign-in response was already used or is not valid. Open the link from your application again.", nil)
	}
	sh := sha256.Sum256([]byte(rp.State))
	// The browser binding is checked before the state is used up: no
	// session, or another one, consumes nothing.
	sess, serr := s.sessions.Load(w, r)
	var bound []byte
	if serr == nil {
		bound = sessionHash(sess)
	}
	var pa pendingAuth
	err := s.pool.QueryRow(r.Context(), consumeOAuthState, sh[:], bound).Scan(&pa.elicitation,
		&pa.verifier, &pa.scopes, &pa.approve, &pa.expires)
	if errors.Is(err, pgx.ErrNoRows) {
		var other string
		switch err := s.pool.QueryRow(r.Context(), selectOAuthState, sh[:]).Scan(&other); {
		case err == nil:
			s.elicitations.Audit(r, audit.Event{Kind: "security.state_session_mismatch", Issuer: sess.Issuer, Subject: sess.Subject,
				Target: other})
			return web.Refuse(http.StatusBadRequest, "state_mismatch",
				"This sign-in was started in another browser session. Open the link from your application again.", nil)
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		s.elicitations.Audit(r, audit.Event{Kind: "security.state_unknown_or_replayed"})
		return web.Refuse(http.StatusBadRequest, "invalid_state",
			"This sign-in response was already used or is not valid. Open the link from your application again.", nil)
	}
	if err != nil {
		return err
	}
	if !s.now().Before(pa.expires) {
		return web.Refuse(http.StatusBadRequest, "state_expired",
			"This sign-in took too long. Open the link from your application again.", nil)
	}
	e, err := s.elicitations.Get(r.Context(), pa.elicitation)
	if err != nil {
		return err
	}
	if sess.Issuer != e.Issuer || sess.Subject != e.Subject {
		return web.Refuse(http.StatusForbidden, "identity_mismatch", "This request was created for another account.", nil)
	}
	if e.Effective(s.now()) != elicitation.StatusPending {
		return s.finished(w, r, e)
	}
	p, err := s.catalog.OAuth(e.Provider)
	if err != nil {
		return web.Refuse(http.StatusBadRequest, "unknown_provider", "This provider is no longer available.", nil)
	}
	if err := p.CheckIssuer(rp.Iss); err != nil {
		// RFC 9207: the response came from another authorization server (mix-up).
		s.elicitations.Audit(r, audit.Event{Kind: "security.issuer_mismatch", Issuer: e.Issuer, Subject: e.Subject,
			ClientID: e.ClientID, Provider: e.Provider, Target: e.ID})
		if _, ferr := s.elicitations.Settle(r, e, elicitation.StatusFailed, "issuer_mismatch"); ferr != nil {
			return ferr
		}
		return web.Refuse(http.StatusBadRequest, "issuer_mismatch",
			"The response did not come from the expected sign-in service. Nothing was stored.", nil)
	}
	if cbErr := provider.CallbackError(e.Provider, url.Values{"error": {rp.Error}}); cbErr != nil {
		if errors.Is(cbErr, provider.ErrAccessDenied) {
			return s.decline(w, r, e, "provider_access_denied")
		}
		if _, ferr := s.elicitations.Settle(r, e, elicitation.StatusFailed, "provider_error"); ferr != nil {
			return ferr
		}
		return web.Refuse(http.StatusBadGateway, "provider_error", "The provider could not complete the authorization. Please try again.", nil)
	}
	code := rp.Code
	if code == "" {
		return web.Refuse(http.StatusBadRequest, "missing_code", "This sign-in response is incomplete.", nil)
	}
	verifier, err := s.verifierKeys.Open(pa.verifier, verifierAAD(sh[:]))
	if err != nil { // sealed under a key no longer configured, or tampered with
		s.logger.WarnContext(r.Context(), "PKCE verifier does not open", slog.Any("error", err))
		return web.Refuse(http.StatusBadRequest, "invalid_state",
			"This sign-in can no longer be completed. Open the link from your application again.", nil)
	}
	tok, err := p.Exchange(r.Context(), code, string(verifier), s.redirectURI())
	clear(verifier)
	if err != nil {
		s.logger.WarnContext(r.Context(), "code exchange failed", slog.String("provider", e.Provider), slog.Any("error", err))
		if _, ferr := s.elicitations.Settle(r, e, elicitation.StatusFailed, "exchange_failed"); ferr != nil {
			return ferr
		}
		return web.Refuse(http.StatusBadGateway, "exchange_failed", "The provider did not accept the authorization. Please try again.", nil)
	}
	granted := tok.Scopes
	if granted == nil {
		granted = pa.scopes // providers that do not echo scopes granted what was asked
	}
	account := tok.AccountID
	if account == "" {
		// The provider named no account, in its token answer, an ID token
		// or its "who am I" endpoint (DESIGN invariant 15): this round trip
		// is taken as a new account, as a typed API key is, so approvals
		// given for the account before stop covering it — it may be
		// another person's.
		account = vault.NewAccountID(vault.UnnamedAccount)
		s.logger.InfoContext(r.Context(), "provider named no account; the connection is taken as a new account",
			slog.String("provider", e.Provider))
	}
	cred := vault.Credential{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, TokenType: tok.TokenType,
		Expiry: tok.Expiry, Scopes: granted, AccountID: account, AccountLabel: tok.AccountLabel}
	// The approval is for the scopes the page listed and the account now
	// stored: the one just authorized, or the earlier one when the provider
	// names none.
	approve := pa.scopes
	if pa.approve != nil {
		approve = pa.approve
	}
	return s.store(w, r, e, "oauth", cred, approve)
}

// store stores cred as the user's connection to e's provider and, in the
// same transaction, completes e with the user's approval of scopes on the
// stored account, and enqueues the webhook events of both; then shows the
// success page.
func (s *Server) store(w http.ResponseWriter, r *http.Request, e *elicitation.Elicitation, how string, cred vault.Credential, scopes []string) error {
	var ok bool
	user := identity.User{Issuer: e.Issuer, Subject: e.Subject}
	// What the request was about: the connection it named, or the user's
	// only one there (what the page offered), or another account. A
	// credential whose account the provider did not name replaces that
	// connection (reauthorizing it, or a new API key), not a new one.
	target := vault.Target{New: e.Account == elicitation.AccountNew, Unnamed: vault.MadeUpAccount(cred.AccountID)}
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
	_, err := s.vault.PutWith(r.Context(), user, e.Provider, target, cred, func(ctx context.Context, tx pgx.Tx, c vault.Connection, ch vault.Change) error {
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
	if conn, cred, gerr := s.vault.Get(r.Context(), u, e.Provider, e.Account); gerr == nil {
		v.Wanted, v.WantedLabel = cred.DisplayName(), conn.Label
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

// submitKey handles POST /c/{id}/key: the API-key form.
func (s *Server) submitKey(w http.ResponseWriter, r *http.Request) error {
	fs, err := s.beginForm(w, r)
	if fs == nil || err != nil {
		return err
	}
	e := fs.e
	if r.PostForm.Get("decision") == "deny" {
		return s.decline(w, r, e, "user_denied")
	}
	p, err := s.catalog.APIKey(e.Provider)
	if err != nil {
		return web.Refuse(http.StatusBadRequest, "unknown_provider", "This provider does not take API keys.", nil)
	}
	key := r.PostForm.Get("api_key")
	form := func(msg string) error {
		client, err := s.clients.Get(r.Context(), e.ClientID)
		if err != nil {
			return err
		}
		return web.Render(w, r, http.StatusBadRequest, templates.APIKeyForm(templates.APIKeyView{ClientName: client.Name,
			ProviderName: p.Info().DisplayName, Action: "/c/" + e.ID + "/key", CSRFToken: s.sessions.CSRFToken(fs.sess),
			Client: clientMark(w, client), Provider: providerMark(w, p.Info()), Error: msg}))
	}
	if key == "" || len(key) > 4096 || elicitation.HasControl(key) {
		return form("Enter the API key exactly as the provider shows it.")
	}
	if err := p.Verify(r.Context(), key); err != nil {
		if errors.Is(err, provider.ErrInvalidKey) {
			return form(p.Info().DisplayName + " did not accept this key. Check it and try again.")
		}
		s.logger.WarnContext(r.Context(), "api key verification failed", slog.String("provider", e.Provider), slog.Any("error", err))
		return form(p.Info().DisplayName + " could not be reached to check the key. Try again in a moment.")
	}
	// An API key names no account connectd can read. Each key typed is
	// taken as a new account, so a key replaced through one application is
	// not handed to the others until the user approves them again.
	cred := vault.Credential{AccessToken: key, TokenType: "api_key", AccountID: vault.NewAccountID(vault.KeyAccount)}
	return s.store(w, r, e, "api_key", cred, nil)
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
	v := templates.OutcomeView{Kind: "success", Title: "Connected",
		Message: "Your account is connected. Your application can use it now.", Account: true}
	if c, err := s.connectedView(w, r.Context(), e, connID); err != nil {
		// The flow is complete; only the page's wording is lost.
		s.logger.WarnContext(r.Context(), "success page details", slog.Any("error", err))
	} else {
		v.Connected = c
	}
	return s.outcome(w, r, http.StatusOK, v)
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
	conn, cred, err := s.vault.Get(ctx, identity.User{Issuer: e.Issuer, Subject: e.Subject}, e.Provider, connID)
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
	return s.outcome(w, r, http.StatusOK, templates.OutcomeView{Kind: "declined", Title: "Request declined",
		Message: "You declined. Nothing was shared with the application."})
}

// withParams sets params in the query of the authorize URL u (built by the
// provider, so it parses), replacing a parameter of the same name: a
// template's select-account value already combines what the provider needs
// (Google's "consent select_account").
func withParams(u string, params map[string]string) string {
	if len(params) == 0 {
		return u
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return u
	}
	q := parsed.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	parsed.RawQuery = q.Encode()
	return parsed.String()
}

// accountChoice is the account chooser for fs's request, when the user has
// several connections at its provider (ok false otherwise).
func (s *Server) accountChoice(ctx context.Context, fs *flowState) (templates.AccountChoiceView, bool, error) {
	e := fs.e
	u := identity.User{Issuer: e.Issuer, Subject: e.Subject}
	all, err := s.vault.List(ctx, u)
	if err != nil {
		return templates.AccountChoiceView{}, false, err
	}
	var accounts []templates.AccountChoice
	for _, c := range all {
		if c.Provider == e.Provider && c.Status != vault.StatusRevoked {
			accounts = append(accounts, templates.AccountChoice{ID: c.ID, Name: c.DisplayName, Label: c.Label,
				Healthy: c.Status == vault.StatusActive})
		}
	}
	if len(accounts) < 2 {
		return templates.AccountChoiceView{}, false, nil
	}
	client, err := s.clients.Get(ctx, e.ClientID)
	if err != nil {
		return templates.AccountChoiceView{}, false, fmt.Errorf("connect: load client: %w", err)
	}
	name := e.Provider
	if p, err := s.catalog.Get(e.Provider); err == nil {
		name = p.Info().DisplayName
	}
	var pm templates.Mark
	if p, err := s.catalog.Get(e.Provider); err == nil {
		pm = templates.ProviderMark(name, p.Info().LogoURL, p.Info().Template)
	}
	return templates.AccountChoiceView{ClientName: client.Name, ProviderName: name, Accounts: accounts,
		Client: templates.Mark{Name: client.Name, LogoURL: client.LogoURL}, Provider: pm,
		Action: "/c/" + e.ID + "/account", CSRFToken: s.sessions.CSRFToken(fs.sess), UserLabel: fs.sess.Subject,
		SwitchAction: switchPath(e.ID)}, true, nil
}

// chooseAccountForm handles POST /c/{id}/account: the account chooser's
// answer, one of the user's connections at the provider or "new", becomes
// the request's account; the consent page follows.
func (s *Server) chooseAccountForm(w http.ResponseWriter, r *http.Request) error {
	fs, err := s.beginForm(w, r)
	if fs == nil || err != nil {
		return err
	}
	e := fs.e
	choice := r.PostForm.Get("account")
	switch {
	case choice == elicitation.AccountNew:
	case vault.ValidID(choice):
		if _, err := s.vault.Lookup(r.Context(), identity.User{Issuer: e.Issuer, Subject: e.Subject}, e.Provider, choice); errors.Is(err, vault.ErrNotConnected) {
			return web.Refuse(http.StatusBadRequest, "bad_form", "Choose one of your accounts.", nil)
		} else if err != nil {
			return err
		}
	default:
		return web.Refuse(http.StatusBadRequest, "bad_form", "Choose one of your accounts.", nil)
	}
	if err := s.elicitations.ChooseAccount(r.Context(), e.ID, choice); err != nil {
		return err
	}
	noStore(w)
	http.Redirect(w, r, "/c/"+e.ID, http.StatusSeeOther)
	return nil
}

// switchPath is where a connect page's "Not you?" form posts.
func switchPath(id string) string { return "/c/" + id + "/switch" }

// switchAccount handles POST /c/{id}/switch, "Not you? Sign out and
// continue": the form's CSRF token must match the session, which then ends
// (on every replica), and a page leads back to the same link, which asks
// to sign in at the link's issuer. A page with a link rather than a
// redirect: the sign-in is at another origin, and Chromium holds every
// redirect after a form to the page's form-action ('self'). It leads
// nowhere but that link, and it is all it does: nothing is decided about
// the request.
func (s *Server) switchAccount(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if !elicitation.ValidID(id) {
		return errLinkInvalid
	}
	back := "/c/" + id
	sess, err := s.sessions.Get(r)
	switch {
	case errors.Is(err, session.ErrNoSession):
		s.sessions.Clear(w)
	case err != nil:
		return err
	default:
		if err := s.checkForm(w, r, sess); err != nil {
			return err
		}
		if err := s.sessions.End(r.Context(), w, sess); err != nil {
			return err
		}
	}
	return web.Render(w, r, http.StatusOK, templates.SwitchedOut(back))
}
