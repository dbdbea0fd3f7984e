package connect

import (
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
)

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
	s.branded(w, r, e)
	if sess.Issuer != e.Issuer || sess.Subject != e.Subject {
		return web.Refuse(http.StatusForbidden, "identity_mismatch", "This request was created for another account.", nil)
	}
	if e.Effective(s.now()) != elicitation.StatusPending {
		return s.finished(w, r, e)
	}
	// The organization's app, as when the browser was sent to the
	// provider: a code is exchanged with the client id it was issued to.
	app, err := s.appOf(r.Context(), e)
	if errors.Is(err, org.ErrUnknownProvider) {
		return web.Refuse(http.StatusBadRequest, "unknown_provider", "This provider is no longer available.", nil)
	}
	if err != nil {
		return err
	}
	p := app.OAuth
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
	return s.store(w, r, e, "oauth", app.AppID, cred, approve)
}
