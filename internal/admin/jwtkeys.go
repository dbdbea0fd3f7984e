package admin

import (
	"errors"
	"net/http"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/web"
)

// jwtKeysRequest sets a client's keys for private_key_jwt: a JWKS URL, or a
// public key (PEM, a JWK or a JWK Set, as text); neither clears them.
type jwtKeysRequest struct {
	JWKSURL   string `json:"jwks_url"`
	PublicKey string `json:"public_key"`
	// DropClientKeys ends the client's keys (cks_…) at once.
	DropClientKeys bool `json:"drop_client_keys"`
}

// errKeysRefused is the answer to keys SetAssertionKeys refuses: its rules,
// not the refusal's text.
var errKeysRefused = problem.Detail(ErrInvalid, "the keys were refused: give one of jwks_url (https, at a public address) "+
	"or public_key (PEM, a JWK or a JWK Set of public RSA >= 2048-bit, EC or Ed25519 keys); drop_client_keys needs one")

// apiJWTKeys handles PUT /admin/api/clients/{id}/jwt-keys.
func (s *Server) apiJWTKeys(w http.ResponseWriter, r *http.Request) error {
	var req jwtKeysRequest
	if err := web.DecodeJSON(w, r, &req, 64<<10); err != nil {
		return err
	}
	id := r.PathValue("id")
	if !names.ValidClientID(id) {
		return problem.Detail(ErrNotFound, "no such client")
	}
	org, err := s.store.clientIn(r.Context(), id, actorOf(r)) // another organization's: not found
	if err != nil {
		return err
	}
	err = s.clients.SetAssertionKeys(r.Context(), id, clientauth.AssertionKeys{JWKSURL: req.JWKSURL,
		PublicKey: []byte(req.PublicKey), DropSecrets: req.DropClientKeys})
	switch {
	case errors.Is(err, clientauth.ErrClientNotFound):
		return problem.Detail(ErrNotFound, "no such client")
	case errors.Is(err, clientauth.ErrInvalidClient):
		return errKeysRefused
	case err != nil:
		return err
	}
	method := "private_key_jwt"
	if req.JWKSURL == "" && req.PublicKey == "" {
		method = "client_key"
	}
	s.store.auditAfter(r.Context(), Event{Kind: "client.jwt_keys_changed", Org: org, ClientID: id, Target: id,
		Detail: map[string]any{"jwks_url": req.JWKSURL, "public_key": req.PublicKey != "", "drop_client_keys": req.DropClientKeys}},
		actorOf(r))
	web.WriteJSON(w, http.StatusOK, map[string]any{"client_id": id, "auth": method, "jwks_url": req.JWKSURL,
		"client_keys_dropped": req.DropClientKeys})
	return nil
}
