package connect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// orgOf is the organization of e's MCP server: the flow reads and stores the
// user's connections for e in it only (issue 34), through the provider app
// it uses. A client's organization never changes, and the registry caches
// clients, so this costs no query on a warm page.
func (s *Server) orgOf(ctx context.Context, e *elicitation.Elicitation) (string, error) {
	cl, err := s.clients.Get(ctx, e.ClientID)
	if err != nil {
		return "", fmt.Errorf("connect: the client of elicitation %s: %w", e.ID, err)
	}
	if cl.Org == "" {
		return names.DefaultOrg, nil
	}
	return cl.Org, nil
}

// vaultOf is the vault handle of e's organization.
func (s *Server) vaultOf(ctx context.Context, e *elicitation.Elicitation) (*vault.Store, error) {
	o, err := s.orgOf(ctx, e)
	if err != nil {
		return nil, err
	}
	return s.vault.In(o), nil
}

// appOf is the OAuth app e's organization uses at e's provider (package org
// decides: its own app, or the deployment's where the operator allows). An
// organization with neither is refused with provider_app_required, before
// the browser is sent anywhere.
func (s *Server) appOf(ctx context.Context, e *elicitation.Elicitation) (org.Resolved, error) {
	o, err := s.orgOf(ctx, e)
	if err != nil {
		return org.Resolved{}, err
	}
	res, err := s.orgs.Resolve(ctx, o, e.Provider)
	if errors.Is(err, org.ErrNoApp) {
		return org.Resolved{}, web.Refuse(http.StatusConflict, "provider_app_required",
			"This application's organization has not set up its connection to this provider yet. "+
				"Ask the application's administrator; nothing was shared.", err)
	}
	return res, err
}

// branded puts the brand of e's organization on r's pages: its name in the
// header, its accent and logo over the deployment's (which stay where it
// sets none). The default organization's pages stay as they are, so a
// single-team deployment sees no change. r is changed in place, so the
// error pages of the handler that asked carry the brand too.
func (s *Server) branded(w http.ResponseWriter, r *http.Request, e *elicitation.Elicitation) {
	id, err := s.orgOf(r.Context(), e)
	if err != nil || id == names.DefaultOrg {
		return
	}
	o, err := s.orgs.Get(r.Context(), id)
	if err != nil {
		return // the deployment's brand: a page is still better than none
	}
	b := templates.BrandOf(r.Context())
	b.Org = o.Name
	if o.BrandColor != "" {
		b.Accent, b.CSSPath = o.BrandColor, templates.OrgBrandCSSPath(o.ID)
	}
	if o.LogoURL != "" {
		b.LogoURL = o.LogoURL
		web.AllowImages(w.Header(), o.LogoURL)
	}
	*r = *r.WithContext(templates.WithBrand(r.Context(), b))
}

// brandCSS serves GET /static/brand/{file}: an organization's accent
// stylesheet ("acme.css"), generated from its stored colour (#rrggbb
// only, so nothing else reaches the stylesheet). An unknown organization,
// or one without a colour, gets an empty stylesheet.
func (s *Server) brandCSS(w http.ResponseWriter, r *http.Request) {
	id, ok := strings.CutSuffix(r.PathValue("file"), ".css")
	var css []byte
	if ok && names.ValidOrg(id) {
		if o, err := s.orgs.Get(r.Context(), id); err == nil {
			css = templates.BrandCSS(o.BrandColor)
		}
	}
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(css)
}

// BrandCSS is the handler of the organizations' stylesheets
// (templates.OrgBrandCSSPath), registered by internal/server as an asset.
func (s *Server) BrandCSS() http.Handler { return http.HandlerFunc(s.brandCSS) }

// orgNames names, for the account page, the organizations of conns — only
// when they are more than one (a user of one organization's servers sees
// no grouping): id → name, the id when the organization is gone.
func (s *Server) orgNames(ctx context.Context, conns []vault.Connection) (map[string]string, error) {
	out := map[string]string{}
	for _, c := range conns {
		out[c.Org] = c.Org
	}
	if len(out) < 2 {
		return map[string]string{}, nil
	}
	for id := range out {
		o, err := s.orgs.Get(ctx, id)
		switch {
		case err == nil:
			out[id] = o.Name
		case errors.Is(err, org.ErrNotFound):
		default:
			return nil, err
		}
	}
	return out, nil
}

// ownConnection finds the signed-in user's connection id at provider, in
// whichever organization it is: the account page's forms post only the
// provider and the id. vault.ErrNotConnected when it is not theirs.
func (s *Server) ownConnection(ctx context.Context, u identity.User, provider, id string) (vault.Connection, error) {
	all, err := s.vault.ListAll(ctx, u)
	if err != nil {
		return vault.Connection{}, err
	}
	for _, c := range all {
		if c.ID == id && c.Provider == provider {
			return c, nil
		}
	}
	return vault.Connection{}, vault.ErrNotConnected
}
