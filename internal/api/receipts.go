package api

import (
	"net/http"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/receipt"
)

// The access receipts (package receipt): approvals asked are handed to the
// receipts writer, which only counts them in memory (the write is its
// background writer's), so it neither slows nor fails the call. Token reads
// and proxied calls are not: their receipts are the sampled audit trail's
// rows (sampled.go), their one record.

// receiptAsked records that client c asked the user to approve its call
// (a new approval: asking again while it is pending is the same one).
func (s *Server) receiptAsked(r *http.Request, c *caller, provider, connID string, rule clientauth.Rule) {
	if s.receipts == nil {
		return
	}
	s.receipts.Record(receipt.Use{Org: c.client.Org, Issuer: c.user.Issuer, Subject: c.user.Subject,
		Provider: provider, ConnectionID: connID, ClientID: c.client.ID, Kind: receipt.KindApprovalAsked, Method: r.Method,
		Template: rule.Pattern, At: s.now()})
}
