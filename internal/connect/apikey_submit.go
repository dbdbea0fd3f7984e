package connect

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// submitKey handles POST /c/{id}/key: the API-key form.
func (s *Server) submitKey(w http.ResponseWriter, r *http.Request) error {
	fs, err := s.beginForm(w, r)
	if fs == nil || err != nil {
		return err
	}
	if err := connectStep(fs.e); err != nil {
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
		return form(templates.T(r.Context(), "apikey.error.empty"))
	}
	if err := p.Verify(r.Context(), key); err != nil {
		if errors.Is(err, provider.ErrInvalidKey) {
			return form(templates.T(r.Context(), "apikey.error.refused", "Provider", p.Info().DisplayName))
		}
		s.logger.WarnContext(r.Context(), "api key verification failed", slog.String("provider", e.Provider), slog.Any("error", err))
		return form(templates.T(r.Context(), "apikey.error.unreachable", "Provider", p.Info().DisplayName))
	}
	// An API key names no account connectd can read. Each key typed is
	// taken as a new account, so a key replaced through one application is
	// not handed to the others until the user approves them again.
	cred := vault.Credential{AccessToken: key, TokenType: "api_key", AccountID: vault.NewAccountID(vault.KeyAccount)}
	return s.store(w, r, e, "api_key", "", cred, nil)
}
