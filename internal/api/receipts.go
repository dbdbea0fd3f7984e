package api

import (
	"net/http"
	"time"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/receipt"
	"github.com/connectd/connectd/internal/web"
)

// The access receipts (package receipt): every token read and proxied call
// is handed to the receipts writer, which only counts it in memory (the
// write is its background writer's), so neither slows nor fails the call.

// receiptProxy records client c's proxied call of r to path (below the
// provider's API, proxy.Clean's form) with the user's connection connID,
// started at: named by the pattern of the request rule it matched (rule,
// as proxyCall matched it: the zero Rule when the client has no rules for
// the provider), else by the path's template; with the status answered — the provider's, or the
// error table's when the provider gave none (forwarding failed with err).
func (s *Server) receiptProxy(r *http.Request, c *caller, provider, connID, path string, rule clientauth.Rule,
	status int, err error, at time.Time) {
	if s.receipts == nil {
		return
	}
	tmpl := rule.Pattern
	if tmpl == "" {
		tmpl = receipt.Template("/" + path)
	}
	if status == 0 && err != nil {
		status = web.AsError(problem.About(provider, err)).Status
	}
	s.receipts.Record(receipt.Use{Org: c.client.Org, Issuer: c.user.Issuer, Subject: c.user.Subject,
		Provider: provider, ConnectionID: connID, ClientID: c.client.ID, Kind: receipt.KindProxy, Method: r.Method,
		Template: tmpl, Status: status, At: at})
}

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
