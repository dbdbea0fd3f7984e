package connect

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"

	"golang.org/x/oauth2"

	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/session"
)

const insertOAuthState = `INSERT INTO oauth_states
	(state_hash, elicitation_id, session_hash, verifier_sealed, scopes, approve_scopes, created_at, expires_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

// verifierAAD binds a sealed PKCE verifier to its state.
func verifierAAD(stateHash []byte) []byte {
	return keyring.Binding("connectd/pkce_verifier/v1", string(stateHash))
}

func sessionHash(sess session.Session) []byte {
	h := sha256.Sum256([]byte("connectd/session/" + sess.ID))
	return h[:]
}

// startAuthorization creates the single-use state and PKCE verifier and
// returns the provider's authorize URL, asking for scopes; the callback
// records the approval of approve.
func (s *Server) startAuthorization(ctx context.Context, fs *flowState, p provider.OAuth, scopes, approve []string) (string, error) {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	state := base64.RawURLEncoding.EncodeToString(raw)
	sh := sha256.Sum256([]byte(state))
	verifier := oauth2.GenerateVerifier()
	sealed, err := s.verifierKeys.Seal([]byte(verifier), verifierAAD(sh[:]))
	if err != nil {
		return "", fmt.Errorf("connect: seal verifier: %w", err)
	}
	now := s.now()
	var approveCol any // NULL: the same as scopes
	if !slices.Equal(approve, scopes) {
		approveCol = elicitation.NonNil(approve)
	}
	if _, err := s.pool.Exec(ctx, insertOAuthState, sh[:], fs.e.ID, sessionHash(fs.sess), sealed, elicitation.NonNil(scopes),
		approveCol, now, now.Add(stateTTL)); err != nil {
		return "", fmt.Errorf("connect: store state: %w", err)
	}
	// PKCE S256 on every authorization (the catalog has it on for every
	// OAuth provider).
	u := p.AuthCodeURL(state, oauth2.S256ChallengeFromVerifier(verifier), s.redirectURI(), scopes)
	if fs.e.Account == elicitation.AccountNew {
		u = withParams(u, p.Info().SelectAccount)
	}
	return u, nil
}

// withParams sets params in the query of the authorize URL u (built by the
// provider, so it parses), replacing a parameter of the same name: a
// template's select-account value already combines what the provider needs
// (Google's "consent select_account").
func withParams(u string, params map[string]string) string {
	if len(params) == 0 {
		return u
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return u
	}
	q := parsed.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	parsed.RawQuery = q.Encode()
	return parsed.String()
}
