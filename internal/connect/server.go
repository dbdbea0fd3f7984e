package connect

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/a-h/templ"

	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/web"
)

// Config holds every dependency of the Server.
type Config struct {
	Logger   *slog.Logger
	Sessions *session.Store
	Login    *mcpauth.Login
}

// Server serves the connect pages.
type Server struct {
	logger   *slog.Logger
	sessions *session.Store
	login    *mcpauth.Login
}

// New returns a Server over cfg's dependencies.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil || cfg.Sessions == nil || cfg.Login == nil {
		return nil, errors.New("connect: Logger, Sessions and Login are required")
	}
	return &Server{logger: cfg.Logger, sessions: cfg.Sessions, login: cfg.Login}, nil
}

// Routes registers the Server's routes on mux; this is the whole route table
// of the package.
func (s *Server) Routes(mux *http.ServeMux) {
	mux.Handle("GET /login", web.Page(s.logger, s.startLogin))
	mux.Handle("GET /login/callback", web.Page(s.logger, s.finishLogin))
	mux.Handle("GET /session", web.Page(s.logger, s.sessionPage))
	mux.Handle("POST /logout", web.Page(s.logger, s.logout))
}

// noStore keeps pages that carry per-user content or one-time URLs out of
// every cache.
func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
}

// render writes a page. It renders into a buffer first, so a rendering error
// still becomes a proper error page rather than half a page.
func render(w http.ResponseWriter, r *http.Request, c templ.Component) error {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		return fmt.Errorf("render page: %w", err)
	}
	noStore(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, err := w.Write(buf.Bytes())
	return err
}
