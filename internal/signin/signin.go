// Package signin is browser sign-in at an OIDC issuer, once for every part
// of connectd that has one (the end users' /login and the operators'
// /admin/login): start (a login state bound to this browser, then the
// issuer), finish (the callback, the browser's previous session ended, a
// new one started, back to a safe path) and sign-out (CSRF-checked, ended
// on the server). A Flow is parameterised by its session store, issuer,
// return-path rule and what to do around a sign-in (admit, audit, log); the
// refusals are package refusal's and mcpauth's sentinels, whose codes,
// statuses and page words the one error table (internal/web's codes.go)
// gives, the same everywhere.
//
// It must never redirect to a target its Config's rule did not accept, never
// start a session for a login the Config did not admit, never leave the
// session a browser held before a finished login live (a copy of its cookie
// would outlive the login), and never put a code, state, cookie or token
// into a log line, a page or a URL.
package signin

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/refusal"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// Config is one sign-in's parameters; Home and SafePath are required.
type Config struct {
	// Login is the OIDC relying party and Sessions the session store. A
	// sign-in that is not configured may lack them: Start and Finish then
	// answer Disabled without Login, and all three without Sessions.
	Login    *mcpauth.Login
	Sessions *session.Store
	Disabled *web.Error
	// Issuer is the one issuer (id or URL) this sign-in goes to. Empty: the
	// start URL names it (?issuer=), or the only login issuer is used.
	Issuer string
	// Home is where a sign-in without return_to, or whose stored return_to
	// no longer passes SafePath, ends.
	Home string
	// SafePath reports whether a sign-in may return to a path; PathRule says
	// which paths in the invalid_return_to refusal.
	SafePath func(string) bool
	PathRule string
	// CSRFHelp is the csrf_failed refusal of a sign-out form.
	CSRFHelp string
	// Admit, when set, decides on a finished login before a session starts:
	// an error is the answer (and the browser's session cookie is cleared;
	// its session has ended on the server already).
	Admit func(r *http.Request, res mcpauth.LoginResult) error
	// SignedIn and SignedOut, when set, record a new session and an ended one
	// (log lines, audit rows); they cannot fail the request.
	SignedIn  func(r *http.Request, res mcpauth.LoginResult)
	SignedOut func(r *http.Request, sess session.Session)
}

// Flow serves one sign-in's handlers.
type Flow struct{ cfg Config }

// New returns the Flow of cfg.
func New(cfg Config) (*Flow, error) {
	if cfg.Home == "" || cfg.SafePath == nil {
		return nil, errors.New("signin: Config needs Home and SafePath")
	}
	if (cfg.Login == nil || cfg.Sessions == nil) && cfg.Disabled == nil {
		return nil, errors.New("signin: Config needs Disabled without Login or Sessions")
	}
	return &Flow{cfg: cfg}, nil
}

// Start handles GET <login>?return_to=/path[&issuer=…][&switch=1]: it binds a new login
// state to this browser and redirects to the issuer.
func (f *Flow) Start(w http.ResponseWriter, r *http.Request) error {
	if f.cfg.Login == nil || f.cfg.Sessions == nil {
		return f.cfg.Disabled
	}
	q := r.URL.Query()
	returnTo := q.Get("return_to")
	if returnTo == "" {
		returnTo = f.cfg.Home
	}
	if !f.cfg.SafePath(returnTo) {
		return problem.Detail(refusal.ErrReturnTo, "%s", f.cfg.PathRule)
	}
	issuer := f.cfg.Issuer
	if issuer == "" {
		if issuer = q.Get("issuer"); issuer == "" {
			if is := f.cfg.Login.Issuers(); len(is) == 1 {
				issuer = is[0].ID
			}
		}
	}
	binding, err := f.cfg.Sessions.Binding(w, r)
	if err != nil {
		return err
	}
	// switch=1: the user signed out to continue as another account (the
	// connect pages' "Sign out and continue"): the issuer is asked to let
	// them choose rather than sign the same account back in.
	target, err := f.cfg.Login.Start(r.Context(), issuer, returnTo, binding, q.Get("switch") == "1")
	if err != nil {
		return failed(err)
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, target, http.StatusFound)
	return nil
}

// Finish handles GET <login>/callback: it completes the login, ends the
// session the browser's cookie carried (on the server, everywhere, as
// Logout does), starts a session with a new id for an identity Admit lets
// in, and redirects to the login's return_to.
func (f *Flow) Finish(w http.ResponseWriter, r *http.Request) error {
	if f.cfg.Login == nil || f.cfg.Sessions == nil {
		return f.cfg.Disabled
	}
	cb, err := mcpauth.ParseRedirect(r.URL.Query())
	if err != nil {
		// Missing, repeated or malformed: refused before the database is asked.
		return failed(fmt.Errorf("%w: %w", mcpauth.ErrLoginState, err))
	}
	cb.Binding, _ = f.cfg.Sessions.ReadBinding(r) // nil: Finish refuses with ErrStateMismatch
	res, err := f.cfg.Login.Finish(r.Context(), cb)
	if err != nil {
		return failed(err)
	}
	// Whoever signed in, the browser's previous session ends on the server,
	// as at sign-out: a copy of its cookie (another user's on a shared
	// computer, or this user's own) must not outlive this login, on any
	// replica. Done before Admit, because a refused login clears the
	// cookie too, and a session no cookie in this browser names any more
	// could never be signed out of.
	if err := f.cfg.Sessions.EndCarried(r.Context(), r); err != nil {
		return err
	}
	if f.cfg.Admit != nil {
		if err := f.cfg.Admit(r, res); err != nil {
			f.cfg.Sessions.Clear(w)
			return err
		}
	}
	if _, err := f.cfg.Sessions.Start(r.Context(), w, res.Issuer, res.Subject); err != nil {
		return err
	}
	if f.cfg.SignedIn != nil {
		f.cfg.SignedIn(r, res)
	}
	target := res.ReturnTo
	if !f.cfg.SafePath(target) { // checked at Start too; stored values are re-checked
		target = f.cfg.Home
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, target, http.StatusSeeOther)
	return nil
}

// Logout handles POST <logout>: with a live session the form's CSRF token
// must match it; then the session ends on the server (so a copy of the
// cookie stops working on every replica) and its cookie is cleared.
func (f *Flow) Logout(w http.ResponseWriter, r *http.Request) error {
	if f.cfg.Sessions == nil {
		return f.cfg.Disabled
	}
	if err := r.ParseForm(); err != nil {
		return fmt.Errorf("%w: %w", refusal.ErrBadForm, err)
	}
	sess, err := f.cfg.Sessions.Get(r)
	if errors.Is(err, session.ErrNoSession) {
		// Nothing live to end: clear whatever cookie there is.
		f.cfg.Sessions.Clear(w)
		return web.Render(w, r, http.StatusOK, templates.SignedOutPage())
	}
	if err != nil {
		return err // the database cannot say: the session is not ended, so do not pretend
	}
	if err := f.cfg.Sessions.CheckCSRF(sess, r.PostForm.Get(session.CSRFField)); err != nil {
		return fmt.Errorf("%w: %w", problem.Detail(refusal.ErrCSRF, "%s", f.cfg.CSRFHelp), err)
	}
	if err := f.cfg.Sessions.End(r.Context(), w, sess); err != nil {
		return err
	}
	if f.cfg.SignedOut != nil {
		f.cfg.SignedOut(r, sess)
	}
	return web.Render(w, r, http.StatusOK, templates.SignedOutPage())
}

// failed is a sign-in failure as the handlers return it: wrapping
// refusal.ErrSignIn, so that the error table gives the mcpauth sentinel it
// wraps the sign-in page's answer (the same for every Flow). None reveals
// more than what went wrong in general terms; any other error (the
// database's, say) keeps its own answer.
func failed(err error) error { return fmt.Errorf("%w: %w", refusal.ErrSignIn, err) }
