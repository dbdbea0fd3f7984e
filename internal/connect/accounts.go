package connect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/refusal"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
)

// Several accounts at one provider (issue 24): a user's connections are per
// provider account, an approval is for one connection, and a client that
// reads a token, or unlinks, names the connection (account=<id>) unless it
// is approved for exactly one. Nothing ever picks one silently.

// AccountNew, as a mint's account, asks for another account at the provider.
const AccountNew = "new"

// AccountAll, as an unlink's account, takes every connection the client is
// approved for at the provider.
const AccountAll = "all"

// accountDoc names a connection to a client: never the provider's own
// account id.
type accountDoc struct {
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	Label       string `json:"label,omitempty"`
}

func docOf(c vault.Connection) accountDoc {
	return accountDoc{ID: c.ID, DisplayName: c.DisplayName, Label: c.Label}
}

// errNoSuchConnection is the answer to a connection id that is not one of
// the user's at the provider: whether it exists elsewhere is not said.
var errNoSuchConnection = problem.Detail(problem.ErrNotFound, "no such connection for this user and provider")

// checkMintAccount checks a mint's account: "", AccountNew, or one of the
// user's connections at provider.
func (s *Server) checkMintAccount(ctx context.Context, u identity.User, provider, account string) error {
	if account == "" || account == AccountNew {
		return nil
	}
	if !vault.ValidID(account) {
		return web.Errorf(http.StatusBadRequest, "invalid_request",
			`account must be a connection id (cn_…), "new", or left out`)
	}
	if _, err := s.vault.Lookup(ctx, u, provider, account); errors.Is(err, vault.ErrNotConnected) {
		return errNoSuchConnection
	} else if err != nil {
		return err
	}
	return nil
}

// chosen is the approval a client's request is about: the one for account
// (a connection id) when given, else the client's only one at the provider.
// approvals are the client's (consent.Store.For, never empty). A connection
// of the user's the client is not approved for is consent_required; an id
// that is not the user's connection there is not_found; several approvals
// and no account is account_required, with the accounts to choose from.
func (s *Server) chosen(ctx context.Context, u identity.User, name, account string, approvals []consent.Approval) (*consent.Approval, error) {
	if account == "" {
		if len(approvals) == 1 {
			return &approvals[0], nil
		}
		return nil, s.accountRequired(ctx, u, name, approvals)
	}
	if !vault.ValidID(account) {
		return nil, web.Errorf(http.StatusBadRequest, "invalid_request", "account must be a connection id (cn_…)")
	}
	if i := slices.IndexFunc(approvals, func(a consent.Approval) bool { return a.ConnectionID == account }); i >= 0 {
		return &approvals[i], nil
	}
	if _, err := s.vault.Lookup(ctx, u, name, account); errors.Is(err, vault.ErrNotConnected) {
		return nil, errNoSuchConnection
	} else if err != nil {
		return nil, err
	}
	return nil, problem.Detail(refusal.ErrConsentRequired,
		"the user has not allowed this client to use that %s account; mint an elicitation with it", name)
}

// accountRequired is the answer to a client approved for several of the
// user's accounts at a provider that named none: the accounts, so the MCP
// server can ask the user which (a choice, not a secret).
func (s *Server) accountRequired(ctx context.Context, u identity.User, name string, approvals []consent.Approval) error {
	conns, err := s.vault.List(ctx, u)
	if err != nil {
		return err
	}
	accounts := []accountDoc{}
	for _, c := range conns {
		if c.Provider != name {
			continue
		}
		// Only connections this client would receive something of: one
		// that holds another account than it was approved for is not its
		// to name (it answers consent_required when asked for).
		i := slices.IndexFunc(approvals, func(a consent.Approval) bool { return a.ConnectionID == c.ID })
		if i >= 0 && (c.AccountHash == nil || !consent.Decide(consent.Held{Scopes: c.Scopes, Account: c.AccountHash}, &approvals[i], true).AccountChanged) {
			accounts = append(accounts, docOf(c))
		}
	}
	return &web.Error{Status: http.StatusConflict, Code: "account_required",
		Description: fmt.Sprintf("this client may use several of the user's %s accounts; name one with account=<id>", name),
		Fields:      map[string]any{"accounts": accounts}}
}
