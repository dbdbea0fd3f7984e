package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/release"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
)

// Several accounts at one provider (issue 24): a user's connections are per
// provider account, an approval is for one connection, and a client that
// reads a token, or unlinks, names the connection (account=<id>) unless it
// is approved for exactly one. Nothing ever picks one silently.

// AccountAll, as an unlink's account, takes every connection the client is
// approved for at the provider.
const AccountAll = "all"

// accountDoc names a connection to a client (release.Account) by
// connectd's id, never the provider's own account id — which display_name
// is only when the provider gives no other name for the account
// (vault.Credential.DisplayName).
type accountDoc = release.Account

// errNoSuchConnection is the answer to a connection id that is not one of
// the user's at the provider: whether it exists elsewhere is not said.
var errNoSuchConnection = problem.Detail(problem.ErrNotFound, "no such connection for this user and provider")

// checkMintAccount checks a mint's account: "", elicitation.AccountNew, or one of the
// user's connections at provider in c's organization (another
// organization's is not_found, as one that does not exist).
func (s *Server) checkMintAccount(ctx context.Context, c *caller, provider, account string) error {
	if account == "" || account == elicitation.AccountNew {
		return nil
	}
	if !vault.ValidID(account) {
		return web.Errorf(http.StatusBadRequest, "invalid_request",
			`account must be a connection id (cn_…), "new", or left out`)
	}
	if _, err := s.connections(c).Lookup(ctx, c.user, provider, account); errors.Is(err, vault.ErrNotConnected) {
		return errNoSuchConnection
	} else if err != nil {
		return err
	}
	return nil
}

// chosen is the approval a client's request is about (release.Choose): the
// one for account (a connection id) when given, else the client's only one
// at the provider. approvals are the client's (consent.Store.For). An id
// that is not the user's connection there is not_found rather than the
// decision's consent_required; account_required lists the accounts to
// choose from (release.Choosable). Only connections of c's organization
// are looked at: another organization's id is not_found, as one that does
// not exist.
func (s *Server) chosen(ctx context.Context, c *caller, name, account string, approvals []consent.Approval) (*consent.Approval, error) {
	if account != "" && !vault.ValidID(account) {
		return nil, web.Errorf(http.StatusBadRequest, "invalid_request", "account must be a connection id (cn_…)")
	}
	a, err := release.Choose(name, approvals, account)
	var refused *release.Refusal
	if !errors.As(err, &refused) {
		return a, err
	}
	switch {
	case refused.Kind == release.AccountRequired:
		conns, err := s.connections(c).List(ctx, c.user)
		if err != nil {
			return nil, err
		}
		refused.Accounts = releaseClient(c.client).Choosable(name, conns, approvals)
	case account != "":
		if _, err := s.connections(c).Lookup(ctx, c.user, name, account); errors.Is(err, vault.ErrNotConnected) {
			return nil, errNoSuchConnection
		} else if err != nil {
			return nil, err
		}
	}
	return nil, refused
}
