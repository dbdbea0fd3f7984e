package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/refusal"
)

// A request_state is what an MCP server hands its client as the MCP
// requestState and gets echoed back: an AEAD-sealed record binding the client,
// the user, the elicitation and an optional request digest, with an expiry and
// a random id that makes it single-use. Nothing in it is readable or
// changeable without the vault keys.
type requestState struct {
	ID          string `json:"jti"` // 128 random bits, base64url; consumed on resolve
	ClientID    string `json:"cid"`
	Issuer      string `json:"iss"`
	Subject     string `json:"sub"`
	Elicitation string `json:"eid"`
	Digest      string `json:"dig,omitempty"`
	Expires     int64  `json:"exp"` // unix seconds
}

// requestStatePrefix versions the format.
const requestStatePrefix = "rs1."

// maxRequestState bounds what resolve will try to decode.
const maxRequestState = 4096

// Its refusals are package refusal's request_state sentinels (the error
// table gives each its code).

// requestStateAAD names the purpose of these ciphertexts, so a sealed
// credential or PKCE verifier can never be passed off as a request_state.
var requestStateAAD = keyring.Binding("connectd/request_state/v1")

// stateKeys is the keyring that seals request_states: a purpose of its own
// (derived once, then a lookup), so the request_states MCP servers hold spend
// no other purpose's nonce budget. What an older release sealed under the
// configured keys still opens (keyring.Keyring.Purpose).
func (s *Server) stateKeys() *keyring.Keyring { return s.keys.Purpose(requestStatePurpose) }

func (s *Server) sealRequestState(e *elicitation.Elicitation) (string, error) {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	rs := requestState{
		ID: base64.RawURLEncoding.EncodeToString(id), ClientID: e.ClientID, Issuer: e.Issuer, Subject: e.Subject,
		Elicitation: e.ID, Digest: e.RequestDigest, Expires: s.now().Add(s.requestStateTTL).Unix(),
	}
	if e.Kind == elicitation.KindApproval {
		// An approval's digest is connectd's own (the call's hash), which
		// the MCP server is never given: its request_state resolves without
		// one. The call itself is bound by the grant (method, path, body).
		rs.Digest = ""
	}
	b, err := json.Marshal(rs)
	if err != nil {
		return "", fmt.Errorf("connect: encode request_state: %w", err)
	}
	ct, err := s.stateKeys().Seal(b, requestStateAAD)
	if err != nil {
		return "", fmt.Errorf("connect: seal request_state: %w", err)
	}
	return requestStatePrefix + base64.RawURLEncoding.EncodeToString(ct), nil
}

// openRequestState decodes and authenticates raw. It checks nothing about who
// presents it; see checkRequestState.
func (s *Server) openRequestState(raw string) (*requestState, error) {
	if len(raw) > maxRequestState || !strings.HasPrefix(raw, requestStatePrefix) {
		return nil, refusal.ErrStateInvalid
	}
	// Strict and alphabet-only: the decoder would otherwise skip CR/LF and
	// accept non-zero padding bits, so that several strings opened as the
	// same request_state. One string, one state.
	enc := raw[len(requestStatePrefix):]
	for i := 0; i < len(enc); i++ {
		if !elicitation.IsBase64URL(enc[i]) {
			return nil, refusal.ErrStateInvalid
		}
	}
	ct, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil {
		return nil, refusal.ErrStateInvalid
	}
	b, err := s.stateKeys().Open(ct, requestStateAAD)
	if err != nil {
		return nil, refusal.ErrStateInvalid
	}
	var rs requestState
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rs); err != nil || rs.ID == "" || rs.Elicitation == "" {
		return nil, refusal.ErrStateInvalid
	}
	return &rs, nil
}

// checkRequestState applies the bindings in order: who may present it first,
// so another client or user learns nothing else and cannot burn it.
func (s *Server) checkRequestState(rs *requestState, clientID string, u identity.User, digest string) error {
	switch {
	case rs.ClientID != clientID:
		return refusal.ErrStateWrongClient
	case rs.Issuer != u.Issuer || rs.Subject != u.Subject:
		return refusal.ErrStateWrongUser
	case !s.now().Before(time.Unix(rs.Expires, 0)):
		return refusal.ErrStateExpired
	case subtle.ConstantTimeCompare([]byte(rs.Digest), []byte(digest)) != 1:
		return refusal.ErrDigestMismatch
	}
	return nil
}

const insertStateUse = `INSERT INTO request_state_uses (id, expires_at) VALUES ($1, $2) ON CONFLICT DO NOTHING`

// consumeRequestState marks rs used; refusal.ErrStateReplayed when it already was.
func (s *Server) consumeRequestState(ctx context.Context, rs *requestState) error {
	id, err := base64.RawURLEncoding.DecodeString(rs.ID)
	if err != nil {
		return refusal.ErrStateInvalid
	}
	tag, err := s.pool.Exec(ctx, insertStateUse, id, time.Unix(rs.Expires, 0))
	if err != nil {
		return fmt.Errorf("connect: consume request_state: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return refusal.ErrStateReplayed
	}
	return nil
}
