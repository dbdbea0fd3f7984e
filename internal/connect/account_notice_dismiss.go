package connect

import (
	"net/http"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/notice"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/web"
)

// dismissNotice handles POST /account/notices/dismiss: the signed-in user's
// notice goes; an id that is not theirs changes nothing ("gone").
func (s *Server) dismissNotice(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.sessions.Load(w, r)
	if err != nil {
		http.Redirect(w, r, accountPath, http.StatusSeeOther)
		return nil
	}
	if err := r.ParseForm(); err != nil {
		return web.Refuse(http.StatusBadRequest, "bad_form", "The form could not be read.", nil)
	}
	if err := s.sessions.CheckCSRF(sess, r.PostForm.Get(session.CSRFField)); err != nil {
		return &web.Error{Status: http.StatusForbidden, Code: "csrf_failed", Err: err,
			Description: "The form has expired. Open your account page again and retry."}
	}
	id, ok := notice.ParseID(r.PostForm.Get("notice"))
	if !ok {
		return web.Refuse(http.StatusBadRequest, "bad_form", "The form names no notice.", nil)
	}
	done := "dismissed"
	if found, err := notice.Dismiss(r.Context(), s.pool, identity.User{Issuer: sess.Issuer, Subject: sess.Subject}, id); err != nil {
		return err
	} else if !found {
		done = "gone"
	}
	http.Redirect(w, r, accountPath+"?done="+done, http.StatusSeeOther)
	return nil
}
