package connect

import (
	"net/http"

	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// connectPage handles GET /c/{id}: login if needed, identity check, consent.
func (s *Server) connectPage(w http.ResponseWriter, r *http.Request) error {
	fs, ok, err := s.begin(w, r, true)
	if err != nil || !ok {
		return err
	}
	e := fs.e
	if e.Kind == elicitation.KindApproval {
		return s.approvalPage(w, r, fs)
	}
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
		// An organization with no app there is told so now, not after Allow.
		app, err := s.appOf(r.Context(), e)
		if err != nil {
			return err
		}
		web.AllowFormAction(w.Header(), app.OAuth.AuthCodeURL("x", "", s.redirectURI(), nil))
	}
	return web.Render(w, r, http.StatusOK, templates.Consent(v))
}
