package api

import (
	"net/http"

	"github.com/connectd/connectd/internal/web"
)

// endpoint is one operation of the MCP-server surface in the four steps
// serveJSON takes it through (tailscale/setec's serveJSON shape). REQ is what
// the request asks, RESP what the operation gives; each route keeps the
// order of its checks: what decode refuses is refused before anyone is
// authenticated, and a request body read after the caller's budget is read
// in call.
type endpoint[REQ, RESP any] struct {
	// decode reads and checks what the request names before who is
	// calling is known (path, query, form); nil: nothing.
	decode func(r *http.Request, req *REQ) error
	// caller authenticates who is calling: the MCP server and the user.
	caller func(r *http.Request, req *REQ) (caller, error)
	// call is the operation. The caller comes by value: a pointer to
	// serveJSON's local, handed to a function value, would move it (~0.4 KB)
	// to the heap on every request.
	call func(w http.ResponseWriter, r *http.Request, c caller, req *REQ) (RESP, error)
	// encode writes the operation's answer in this route's format.
	encode func(w http.ResponseWriter, resp RESP) error
}

// serveJSON serves r with e: decode → who is calling → call → encode. Its
// error is the route's to answer (the JSON problem of web.API, or the
// token endpoint's RFC 6749 form); req, filled in by decode and caller, is
// the caller's to read after.
func serveJSON[REQ, RESP any](w http.ResponseWriter, r *http.Request, req *REQ, e endpoint[REQ, RESP]) error {
	if e.decode != nil {
		if err := e.decode(r, req); err != nil {
			return err
		}
	}
	c, err := e.caller(r, req)
	if err != nil {
		return err
	}
	resp, err := e.call(w, r, c, req)
	if err != nil {
		return err
	}
	return e.encode(w, resp)
}

// authenticated is the caller step of every /v1 route: the client key and
// the user's token of the request's headers (authenticate).
func authenticated[REQ any](s *Server) func(r *http.Request, _ *REQ) (caller, error) {
	return func(r *http.Request, _ *REQ) (caller, error) { return s.authenticate(r) }
}

// writeOK is the answer format of most /v1 routes: resp as JSON, 200.
func writeOK[RESP any](w http.ResponseWriter, resp RESP) error {
	web.WriteJSON(w, http.StatusOK, resp)
	return nil
}
