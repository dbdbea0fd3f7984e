package admin

import (
	"net/http"
	"time"

	"github.com/connectd/connectd/internal/web"
)

// The admin API of an organization's admins (owner): list, grant, revoke.
// An owner manages the acting organization's admins (?org= for an admin
// of several; a key its own); an operator names the organization in ?org=.

type assignmentDoc struct {
	Org       string    `json:"org"`
	Issuer    string    `json:"issuer"`
	Subject   string    `json:"subject"`
	Role      Role      `json:"role"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`
}

func assignmentDocOf(a Assignment) assignmentDoc {
	return assignmentDoc{Org: a.Org, Issuer: a.Issuer, Subject: a.Subject, Role: a.Role, CreatedAt: a.CreatedAt.UTC(),
		CreatedBy: a.CreatedBy}
}

// apiAdmins handles GET /admin/api/admins[?org=ORG]: the acting
// organization's admins (an operator without ?org=: every organization's).
func (s *Server) apiAdmins(w http.ResponseWriter, r *http.Request) error {
	as, err := s.store.Assignments(r.Context(), scopeOf(r), actorOf(r))
	if err != nil {
		return err
	}
	out := struct {
		Admins []assignmentDoc `json:"admins"`
	}{Admins: []assignmentDoc{}}
	for _, a := range as {
		out.Admins = append(out.Admins, assignmentDocOf(a))
	}
	web.WriteJSON(w, http.StatusOK, out)
	return nil
}

type grantRequest struct {
	Issuer  string `json:"issuer"`
	Subject string `json:"subject"`
	Role    string `json:"role"`
}

// errOrgRequired answers an operator's change to admins without ?org=.
var errOrgRequired = web.Errorf(http.StatusBadRequest, "invalid_request", "name the organization: ?org=ORG")

// apiGrant handles PUT /admin/api/admins[?org=ORG] {"issuer", "subject",
// "role"}: the identity gets the role in the acting organization (its
// previous one there replaced).
func (s *Server) apiGrant(w http.ResponseWriter, r *http.Request) error {
	var req grantRequest
	if err := web.DecodeJSON(w, r, &req, 8<<10); err != nil {
		return err
	}
	org := scopeOf(r)
	if org == "" {
		return errOrgRequired
	}
	role, err := ParseRole(req.Role)
	if err != nil {
		return err
	}
	a, err := s.store.Grant(r.Context(), Assignment{Org: org, Issuer: req.Issuer, Subject: req.Subject, Role: role}, actorOf(r))
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusOK, assignmentDocOf(a))
	return nil
}

type revokeRoleRequest struct {
	Issuer  string `json:"issuer"`
	Subject string `json:"subject"`
}

// apiRevokeRole handles POST /admin/api/admins/revoke[?org=ORG]
// {"issuer", "subject"}: the identity's role in the acting organization
// goes; its next request there is refused.
func (s *Server) apiRevokeRole(w http.ResponseWriter, r *http.Request) error {
	var req revokeRoleRequest
	if err := web.DecodeJSON(w, r, &req, 8<<10); err != nil {
		return err
	}
	org := scopeOf(r)
	if org == "" {
		return errOrgRequired
	}
	if err := s.store.RevokeRole(r.Context(), org, req.Issuer, req.Subject, actorOf(r)); err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"org": org, "issuer": req.Issuer, "subject": req.Subject, "revoked": true})
	return nil
}
