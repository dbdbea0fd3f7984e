package admin

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// The cut-off's pages: the confirmation form on an MCP server's page, the
// result listing the exposure, and the form that revokes what is left.

const sinceLayout = "2006-01-02" // the form's date input (UTC)

// defaultCutOffWindow is how far back the form looks by default.
const defaultCutOffWindow = 30 * 24 * time.Hour

// confirmCutOffPage handles GET /admin/clients/{id}/cut-off[?since=DATE]:
// the confirmation, listing the linked accounts whose credential it
// received since then — what revocation would revoke — before anything is
// done (issue 38 item 8: they were shown only afterwards, and revocation
// was ticked in advance).
func (s *Server) confirmCutOffPage(w http.ResponseWriter, r *http.Request) error {
	c, err := s.client(r, r.PathValue("id"))
	if err != nil {
		return clientError(err)
	}
	since := s.now().Add(-defaultCutOffWindow).UTC().Truncate(24 * time.Hour)
	if q := strings.TrimSpace(r.URL.Query().Get("since")); q != "" {
		t, err := time.Parse(sinceLayout, q)
		if err != nil || !t.Before(s.now()) {
			return web.Refuse(http.StatusBadRequest, "invalid_request",
				"Give the date since when to count what it received, a day in the past (YYYY-MM-DD).", err)
		}
		since = t
	}
	exposed, err := s.store.Exposure(r.Context(), c.ID, since)
	if err != nil {
		return err
	}
	v := templates.AdminCutOffView{Nav: s.nav(r, "clients"), ID: c.ID, Name: clientName(c), Disabled: c.Disabled,
		Since: since.Format(sinceLayout), SinceText: fmtTime(since), Action: s.href(r, "/admin/clients/"+c.ID+"/cut-off"),
		BackURL: s.href(r, "/admin/clients/"+c.ID)}
	for _, x := range exposed {
		v.Rows = append(v.Rows, s.exposedRow(r, x))
	}
	return web.Render(w, r, http.StatusOK, templates.AdminCutOff(v))
}

// exposedRow is x as the cut-off's pages list it.
func (s *Server) exposedRow(r *http.Request, x Exposed) templates.AdminExposedRow {
	return templates.AdminExposedRow{ConnectionID: x.ConnectionID, URL: s.href(r, "/admin/connections/"+x.ConnectionID),
		User: x.User.Subject + " (" + x.User.Issuer + ")", Provider: x.Provider,
		Account: accountText(Connection{DisplayName: x.DisplayName, Label: x.Label}), LastRead: fmtTime(x.LastRead),
		Outcome: "not revoked"}
}

// enablePage handles POST /admin/clients/{id}/enable (confirm: the client
// id): a disabled MCP server's keys work again (issue 38 item 8: a cut-off
// client's page offered no way back). Audited as client.enabled.
func (s *Server) enablePage(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkForm(w, r); err != nil {
		return err
	}
	c, err := s.client(r, r.PathValue("id"))
	if err != nil {
		return clientError(err)
	}
	if r.PostForm.Get("confirm") != c.ID {
		return web.Refuse(http.StatusBadRequest, "confirmation_required", "Confirm on the MCP server's page.", nil)
	}
	if c.Disabled {
		if err := s.clients.SetDisabled(r.Context(), c.ID, false); err != nil {
			return registryError(err)
		}
		s.store.auditAfter(r.Context(), Event{Kind: "client.enabled", Org: c.Org, ClientID: c.ID, Target: c.ID}, actorOf(r))
		s.logger.InfoContext(r.Context(), "client enabled again by an admin", slog.String("client_id", c.ID),
			slog.String("actor", actorOf(r).Name))
	}
	http.Redirect(w, r, s.href(r, "/admin/clients/"+c.ID), http.StatusSeeOther)
	return nil
}

// cutOffForm checks a cut-off form: CSRF, the confirmation naming the
// client, and the since date.
func (s *Server) cutOffForm(w http.ResponseWriter, r *http.Request) (string, time.Time, error) {
	if err := s.checkForm(w, r); err != nil {
		return "", time.Time{}, err
	}
	id := r.PathValue("id")
	if r.PostForm.Get("confirm") != id {
		return "", time.Time{}, web.Refuse(http.StatusBadRequest, "confirmation_required",
			"Confirm the cut-off on the confirmation page.", nil)
	}
	since, err := time.Parse(sinceLayout, strings.TrimSpace(r.PostForm.Get("since")))
	if err != nil || !since.Before(s.now()) {
		return "", time.Time{}, web.Refuse(http.StatusBadRequest, "invalid_request",
			"Give the date since when to count what it received, a day in the past (YYYY-MM-DD).", err)
	}
	return id, since, nil
}

// cutOffPage handles POST /admin/clients/{id}/cut-off (confirm, since,
// revoke): the client is disabled and the result page lists its exposure.
func (s *Server) cutOffPage(w http.ResponseWriter, r *http.Request) error {
	id, since, err := s.cutOffForm(w, r)
	if err != nil {
		return err
	}
	c, err := s.client(r, id)
	if err != nil {
		return clientError(err)
	}
	revoke := r.PostForm.Get("revoke") == "yes"
	out, err := s.store.CutOffClient(r.Context(), s.clients, c.ID, since, revoke, actorOf(r))
	if err != nil {
		return err
	}
	return s.renderCutOff(w, r, clientName(c), out, revoke)
}

// revokeExposurePage handles POST /admin/clients/{id}/cut-off/revoke
// (confirm, since): the exposure is listed again and what is still stored
// is revoked.
func (s *Server) revokeExposurePage(w http.ResponseWriter, r *http.Request) error {
	id, since, err := s.cutOffForm(w, r)
	if err != nil {
		return err
	}
	c, err := s.client(r, id)
	if err != nil {
		return clientError(err)
	}
	out, err := s.store.RevokeExposure(r.Context(), s.clients, c.ID, since, actorOf(r))
	if err != nil {
		return err
	}
	return s.renderCutOff(w, r, clientName(c), out, true)
}

func (s *Server) renderCutOff(w http.ResponseWriter, r *http.Request, name string, out *CutOff, revoke bool) error {
	v := templates.AdminCutOffResultView{Nav: s.nav(r, "clients"), ID: out.ClientID, Name: name,
		Since: fmtTime(out.Since), SinceForm: out.Since.UTC().Format(sinceLayout), Revoked: len(out.Revoked),
		Failed: len(out.Failed), Revoke: revoke, RetryURL: s.href(r, "/admin/clients/"+out.ClientID+"/cut-off/revoke"),
		ClientURL: s.href(r, "/admin/clients/"+out.ClientID)}
	failed := map[string]bool{}
	for _, id := range out.Failed {
		failed[id] = true
	}
	for _, x := range out.Exposed {
		row := s.exposedRow(r, x)
		switch at, ok := out.AtProvider[x.ConnectionID]; {
		case failed[x.ConnectionID]:
			row.Outcome, row.Bad = "revocation failed: still stored", true
		case ok:
			row.Outcome = "revoked (at the provider: " + at + ")"
			row.Bad = at == "failed"
		case revoke:
			row.Outcome = "gone already"
		}
		v.Rows = append(v.Rows, row)
	}
	return web.Render(w, r, http.StatusOK, templates.AdminCutOffResult(v))
}
