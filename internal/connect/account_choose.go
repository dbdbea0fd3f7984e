package connect

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// accountChoice is the account chooser for fs's request, when the user has
// several connections at its provider (ok false otherwise).
func (s *Server) accountChoice(ctx context.Context, fs *flowState) (templates.AccountChoiceView, bool, error) {
	e := fs.e
	u := identity.User{Issuer: e.Issuer, Subject: e.Subject}
	vs, err := s.vaultOf(ctx, e)
	if err != nil {
		return templates.AccountChoiceView{}, false, err
	}
	all, err := vs.List(ctx, u) // the accounts of the request's organization only
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
	if err := connectStep(fs.e); err != nil {
		return err
	}
	e := fs.e
	choice := r.PostForm.Get("account")
	switch {
	case choice == elicitation.AccountNew:
	case vault.ValidID(choice):
		vs, err := s.vaultOf(r.Context(), e)
		if err != nil {
			return err
		}
		if _, err := vs.Lookup(r.Context(), identity.User{Issuer: e.Issuer, Subject: e.Subject}, e.Provider, choice); errors.Is(err, vault.ErrNotConnected) {
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
