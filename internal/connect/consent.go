package connect

import (
	"net/http"

	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/web"
)

// Approvals are package consent's; the flow grants them here and the API
// reads them through s.consents.

// grantConsent records, within q, that the user approved e's client for the
// scopes the page listed and the provider account now connected, with its
// audit row. Only a completed elicitation grants it (complete): a flow
// declined, failed or abandoned after Allow leaves the earlier approval as
// it was.
func (s *Server) grantConsent(r *http.Request, q elicitation.Querier, e *elicitation.Elicitation, scopes []string, accountID, connID string) error {
	ctx := r.Context()
	return consent.Record(ctx, q, consent.Grant{User: identity.User{Issuer: e.Issuer, Subject: e.Subject},
		ClientID: e.ClientID, Provider: e.Provider, Scopes: scopes, Requested: e.Scopes, AccountID: accountID, ConnectionID: connID,
		Elicitation: e.ID, At: s.now(), RequestID: web.RequestID(ctx), IP: web.ClientAddr(r)})
}
