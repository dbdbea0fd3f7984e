package admin

import (
	"net/http"
	"net/url"

	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// The admins page of an organization, for its owners: who is an admin there
// and with which role, a form to grant one and a button to remove each.
// An operator sees every organization's, and names one with ?org= to grant.

// errPickOrg answers an operator on the admins page without ?org=.
var errPickOrg = web.Refuse(http.StatusBadRequest, "invalid_request",
	"Name the organization whose admins to show: /admin/admins?org=ORG.", nil)

// adminsPage handles GET /admin/admins[?org=ORG].
func (s *Server) adminsPage(w http.ResponseWriter, r *http.Request) error {
	return s.renderAdmins(w, r, "")
}

func (s *Server) renderAdmins(w http.ResponseWriter, r *http.Request, done string) error {
	org := scopeOf(r) // "": an operator without ?org=, every organization's
	if org != "" {
		if ok, err := s.store.OrgExists(r.Context(), org); err != nil {
			return err
		} else if !ok {
			return errNoOrg(org)
		}
	}
	as, err := s.store.Assignments(r.Context(), org, actorOf(r))
	if err != nil {
		return err
	}
	maps, err := s.store.ClaimMappings(r.Context(), org, "", actorOf(r))
	if err != nil {
		return err
	}
	v := templates.AdminAdminsView{Nav: s.nav(r, "admins"), Org: org, GrantURL: s.href(r, "/admin/admins"), Done: done}
	for _, role := range Roles() {
		v.Roles = append(v.Roles, string(role))
	}
	for _, a := range as {
		v.Admins = append(v.Admins, templates.AdminAdminRow{Org: a.Org,
			RevokeURL: "/admin/admins/revoke?" + url.Values{OrgParam: {a.Org}}.Encode(), Issuer: a.Issuer, Subject: a.Subject, Role: string(a.Role),
			Granted: fmtTime(a.CreatedAt), GrantedBy: a.CreatedBy})
	}
	for _, m := range maps {
		v.Claims = append(v.Claims, templates.AdminClaimRow{Issuer: m.Issuer, Claim: m.Claim + "=" + m.Value, Role: string(m.Role)})
	}
	return web.Render(w, r, http.StatusOK, templates.AdminAdmins(v))
}

// grantPage handles POST /admin/admins (issuer, subject, role), CSRF-checked.
func (s *Server) grantPage(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkForm(w, r); err != nil {
		return err
	}
	org := scopeOf(r)
	if org == "" {
		return errPickOrg
	}
	role, err := ParseRole(r.PostForm.Get("role"))
	if err != nil {
		return err
	}
	// Byte for byte, as every identity.
	a, err := s.store.Grant(r.Context(), Assignment{Org: org, Issuer: r.PostForm.Get("issuer"),
		Subject: r.PostForm.Get("subject"), Role: role}, actorOf(r))
	if err != nil {
		return err
	}
	return s.renderAdmins(w, r, a.Subject+" is now "+string(a.Role)+" of "+a.Org+".")
}

// revokeRolePage handles POST /admin/admins/revoke (issuer, subject).
func (s *Server) revokeRolePage(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkForm(w, r); err != nil {
		return err
	}
	org := scopeOf(r)
	if org == "" {
		return errPickOrg
	}
	subject := r.PostForm.Get("subject")
	if err := s.store.RevokeRole(r.Context(), org, r.PostForm.Get("issuer"), subject, actorOf(r)); err != nil {
		return err
	}
	return s.renderAdmins(w, r, subject+" is no longer an admin of "+org+".")
}
