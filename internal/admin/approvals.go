package admin

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/connectd/connectd/internal/approval"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// Per-request approvals (issue 36) as an admin sees them: an MCP server's
// page lists its request rules — those that ask the user marked with their
// words and bound — and its most recent approvals, pending ones among them;
// GET /admin/api/clients/{id}/approvals answers the same list. Package
// approval owns the rows and reads them (approval.Store.ForClient, never a
// body); the client is looked up in the acting organization first
// (Server.client, Server.clientOf), so an admin of another organization gets
// the 404 of a client that does not exist, and no approval of it.

// ApprovalsShown is how many approvals an MCP server's page lists, newest
// first; the API's limit defaults to as many (DefaultPageSize), up to
// MaxPageSize.
const ApprovalsShown = DefaultPageSize

// ErrNoApprovals: the Server has no approval store.
var ErrNoApprovals error = &web.Error{Status: http.StatusServiceUnavailable, Code: "approvals_unavailable",
	Description: "this connectd has no approval store"}

// Approval outcomes, as the API names them (the page says them in words).
const (
	approvalPending   = "pending"
	approvalOnce      = "allowed_once"     // "allow this one request"
	approvalStanding  = "allowed_standing" // "allow requests matching this rule for a time"
	approvalDenied    = "denied"           // the user's No on the approval page
	approvalDismissed = "dismissed"        // the MCP client's user dismissed the link (client_declined)
	approvalExpired   = "expired"          // nobody answered in time
)

// approvalOutcome is what became of approval a: one of the outcomes above,
// or the elicitation's status when it is none of them.
func approvalOutcome(a approval.Summary) string {
	switch {
	case a.Status == elicitation.StatusPending:
		return approvalPending
	case a.Status == elicitation.StatusExpired:
		return approvalExpired
	case a.Decision == approval.Once:
		return approvalOnce
	case a.Decision == approval.Standing:
		return approvalStanding
	case a.Decision == approval.Denied || a.Reason == "user_denied":
		return approvalDenied
	case a.Status == elicitation.StatusDeclined && a.Reason == "client_declined":
		return approvalDismissed
	}
	return string(a.Status)
}

// approvalWords is an outcome in the page's words, and its CSS class.
func approvalWords(outcome string) (string, string) {
	switch outcome {
	case approvalPending:
		return "pending", ""
	case approvalOnce:
		return "allowed once", "status-delivered"
	case approvalStanding:
		return "allowed for a time", "status-delivered"
	case approvalDenied:
		return "denied", "status-failed"
	case approvalDismissed:
		return "dismissed", "muted"
	case approvalExpired:
		return "expired", "muted"
	}
	return outcome, ""
}

// clientApprovals lists c's most recent approvals, at most limit; nil
// without an approval store.
func (s *Server) clientApprovals(ctx context.Context, c clientauth.Client, limit int) ([]approval.Summary, error) {
	if s.approvals == nil {
		return nil, ErrNoApprovals
	}
	return s.approvals.ForClient(ctx, c.ID, limit)
}

type approvalDoc struct {
	ElicitationID string     `json:"elicitation_id"`
	Issuer        string     `json:"issuer"`
	Subject       string     `json:"subject"`
	Provider      string     `json:"provider"`
	ConnectionID  string     `json:"connection_id"`
	Rule          string     `json:"rule"`  // "METHOD PATTERN"
	Words         string     `json:"words"` // the rule's words, as the user saw them
	Method        string     `json:"method"`
	Path          string     `json:"path"`
	Status        string     `json:"status"`
	Reason        string     `json:"reason,omitempty"`
	AskedAt       time.Time  `json:"asked_at"`
	ExpiresAt     time.Time  `json:"expires_at"`
	DecidedAt     *time.Time `json:"decided_at,omitempty"`
}

// apiApprovals handles GET /admin/api/clients/{id}/approvals[?limit=N]:
// the MCP server's most recent approvals, newest first (default 50).
func (s *Server) apiApprovals(w http.ResponseWriter, r *http.Request) error {
	limit, err := deliveryLimit(r) // 1–MaxPageSize, DefaultPageSize (ApprovalsShown) without one
	if err != nil {
		return err
	}
	c, err := s.client(r, r.PathValue("id"))
	if err != nil {
		return clientError(err)
	}
	as, err := s.clientApprovals(r.Context(), c, limit)
	if err != nil {
		return err
	}
	out := struct {
		ClientID  string        `json:"client_id"`
		ProxyOnly bool          `json:"proxy_only"`
		Approvals []approvalDoc `json:"approvals"`
	}{ClientID: c.ID, ProxyOnly: c.ProxyOnly, Approvals: []approvalDoc{}}
	for _, a := range as {
		out.Approvals = append(out.Approvals, approvalDoc{ElicitationID: a.ElicitationID, Issuer: a.Issuer,
			Subject: a.Subject, Provider: a.Provider, ConnectionID: a.ConnID, Rule: a.Rule, Words: a.Words,
			Method: a.Method, Path: a.Path, Status: approvalOutcome(a), Reason: a.Reason, AskedAt: a.CreatedAt.UTC(),
			ExpiresAt: a.Expires.UTC(), DecidedAt: optTime(a.DecidedAt)})
	}
	web.WriteJSON(w, http.StatusOK, out)
	return nil
}

// approvalRows are as for the page.
func (s *Server) approvalRows(r *http.Request, as []approval.Summary) []templates.AdminApprovalRow {
	out := make([]templates.AdminApprovalRow, 0, len(as))
	for _, a := range as {
		words, class := approvalWords(approvalOutcome(a))
		row := templates.AdminApprovalRow{ID: a.ElicitationID, User: a.Subject, Issuer: a.Issuer, Provider: a.Provider,
			ConnectionID: a.ConnID, Rule: a.Rule, Words: a.Words, Method: a.Method, Path: a.Path, Status: words,
			StatusClass: class, Asked: fmtTime(a.CreatedAt), Expires: fmtTime(a.Expires), Decided: fmtTime(a.DecidedAt)}
		if ValidConnectionID(a.ConnID) {
			row.ConnectionURL = s.href(r, "/admin/connections/"+a.ConnID)
		}
		out = append(out, row)
	}
	return out
}

// ruleSets are c's request rules by provider, for its page: each rule
// parsed (clientauth.ParseRule, the proxy's reading of it), a rule that
// asks with its words and bound.
func ruleSets(c clientauth.Client) []templates.AdminRuleSet {
	var out []templates.AdminRuleSet
	for _, p := range slices.Sorted(maps.Keys(c.ProxyRules)) {
		set := templates.AdminRuleSet{Provider: p, Description: c.ProxyRules[p].Description}
		for _, text := range c.ProxyRules[p].Rules {
			rule, err := clientauth.ParseRule(text)
			if err != nil { // none is stored (CheckProxyRules); matches nothing
				set.Rules = append(set.Rules, templates.AdminRuleRow{Rule: text, Broken: true})
				continue
			}
			row := templates.AdminRuleRow{Rule: rule.Key(), Ask: rule.Ask, Words: rule.Words}
			if rule.Ask {
				row.Bound = "this one request only"
				if rule.Standing > 0 {
					row.Bound = "for up to " + durationText(rule.Standing)
				}
			}
			set.Rules = append(set.Rules, row)
		}
		out = append(out, set)
	}
	return out
}

// askingRules are c's rules that ask the user, "provider: rule" each.
func askingRules(c clientauth.Client) []string {
	var out []string
	for _, set := range ruleSets(c) {
		for _, rule := range set.Rules {
			if rule.Ask {
				out = append(out, set.Provider+": "+rule.Rule)
			}
		}
	}
	return out
}

// durationText is d in words: "1 hour", "90 minutes", "2 days".
func durationText(d time.Duration) string {
	if d%time.Hour == 0 {
		return overlapText(d)
	}
	if d%time.Minute == 0 {
		n := int(d / time.Minute)
		return fmt.Sprintf("%d minute%s", n, plural(n))
	}
	return d.String()
}

// approvalsView fills the approvals part of c's page: its request rules and
// its most recent approvals.
func (s *Server) approvalsView(r *http.Request, c clientauth.Client, v *templates.AdminClientView) error {
	v.ProxyOnly, v.RuleSets, v.RulesAsk = c.ProxyOnly, ruleSets(c), len(askingRules(c)) > 0
	v.ApprovalsShown = ApprovalsShown
	v.ApprovalsAPI = "/admin/api/clients/" + c.ID + "/approvals"
	if s.approvals == nil {
		v.NoApprovalStore = true
		return nil
	}
	as, err := s.clientApprovals(r.Context(), c, ApprovalsShown)
	if err != nil {
		return err
	}
	v.Approvals = s.approvalRows(r, as)
	return nil
}
