package connect

import (
	"crypto/subtle"
	"fmt"
	"net/http"

	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// decide handles POST /c/{id}: Allow or Deny on the consent page.
func (s *Server) decide(w http.ResponseWriter, r *http.Request) error {
	fs, err := s.beginForm(w, r)
	if fs == nil || err != nil {
		return err
	}
	e := fs.e
	if e.Kind == elicitation.KindApproval {
		return s.approvalDecide(w, r, fs)
	}
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
		// The organization's own app, or the deployment's where allowed.
		app, err := s.appOf(r.Context(), e)
		if err != nil {
			return err
		}
		oa := app.OAuth
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
