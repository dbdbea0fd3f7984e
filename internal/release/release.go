// Package release is the one decision of what an MCP server may receive of a
// user's connection (DESIGN "one decision", invariant 6): for an
// authenticated client and user, a provider and the stored connection row,
// the credential whole, a token narrowed to what the client was approved for,
// or nothing, with the typed reason. The token read, token exchange, the
// proxy, the listing, unlink, per-client webhook payloads, the account page,
// the consent page's offer and the completion of a flow all ask it; none
// derives the answer itself.
//
// It decides on what the row knows (vault.Held: granted scopes and the
// provider account's hash), never on a decrypted credential, and it picks no
// HTTP status: its refusals are *Refusal values, which the one error table
// (internal/web) maps to answers. It reads no database and holds no state.
//
// A client belongs to one organization (Client.Org), and a connection to the
// organization whose app obtained it (vault.Held.Org): the first thing
// decided on a stored row, before its account or scopes, is that it is the
// client's organization's; another organization's row is, to the client, no
// connection at all (vault.ErrNotConnected). The vault's handles scope every
// query by organization already; this is the second line below them. The
// package functions (Credential, Decide, MayEnd, Choosable) decide for a
// client of the default organization; Client's methods of the same names for
// the client's own.
//
// It must never: release anything of, or say anything about, a connection
// of another organization than the client's, nor answer it otherwise than
// "not connected"; release a credential for an approval of another provider
// account, or for fewer scopes than the credential carries unless the token
// is narrowed to the approved ones; let a request that names a connection end
// on another one; tell a client the name or scopes of an account it is not
// approved for.
package release

import (
	"crypto/subtle"
	"fmt"
	"slices"
	"strings"

	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/scope"
	"github.com/connectd/connectd/internal/vault"
)

// Use is what the caller will do with what is released.
type Use int

// Uses.
const (
	// Read: the raw credential leaves connectd (the token read, token
	// exchange). Refused to a proxy-only client.
	Read Use = iota
	// Proxy: connectd attaches the credential to a provider call for the
	// client (/v1/proxy); the client never sees it.
	Proxy
	// Describe: only words about the connection (the listing, webhook
	// payloads, unlink, the account page, the consent page's offer).
	Describe
)

// Client is what the decision needs of the authenticated client: who it is,
// its organization, the providers it is registered for and whether it is
// proxy-only.
type Client struct {
	ID string
	// Org is the client's organization; "" is the default one
	// (vault.DefaultOrg).
	Org       string
	Providers []string
	ProxyOnly bool
}

// orgOr is org, or the default organization for "".
func orgOr(org string) string {
	if org == "" {
		return vault.DefaultOrg
	}
	return org
}

// InOrg is the decision's first step on a stored row, before anything about
// its account or scopes: nil when the connection holding h is of c's
// organization; else exactly what a user with no connection at provider gets
// (vault.ErrNotConnected, so the same answer and code), never a hint that
// it exists.
func InOrg(c Client, provider string, h vault.Held) error {
	if orgOr(c.Org) != orgOr(h.Org) {
		return fmt.Errorf("%w to %s", vault.ErrNotConnected, provider)
	}
	return nil
}

// Release is what a client may receive of a connection.
type Release int

// Releases.
const (
	// Nothing: the client receives no credential (consent_required).
	Nothing Release = iota
	// Whole: the credential as it is; the approval covers all of it.
	Whole
	// Narrowed: an access token limited to Decision.Scopes, at a provider
	// that narrows tokens on refresh.
	Narrowed
)

// Decision is the answer for one client and connection.
type Decision struct {
	Release Release
	// Scopes are what the client receives (Whole: every scope held;
	// Narrowed: those held that it was approved for), and so all that
	// anything said to that client about the connection may name. Empty
	// for Nothing.
	Scopes []string
	// NotApproved: the user never approved this client for the connection.
	NotApproved bool
	// AccountChanged: the approval was for another provider account (or
	// predates accounts, or the row names no account).
	AccountChanged bool
	// Unapproved are the scopes held that the approval does not list.
	Unapproved []string
	// visible is what may be named to the client (Visible).
	visible []string
}

// Decide answers for a client of the default organization whose approval
// is a (nil: none) of a connection holding h, at a provider that narrows
// tokens when narrows: Client.Decide.
func Decide(h vault.Held, a *consent.Approval, narrows bool) Decision {
	return Client{}.Decide(h, a, narrows)
}

// Decide answers for c, whose approval is a (nil: none), of a connection
// holding h, at a provider that narrows tokens when narrows. A connection of
// another organization is answered as one c has no approval of: nothing
// released, nothing to name (the callers that must say "not connected" ask
// InOrg first, or Credential and MayEnd).
func (c Client) Decide(h vault.Held, a *consent.Approval, narrows bool) Decision {
	if InOrg(c, "", h) != nil {
		a = nil
	}
	return decide(h, a, narrows)
}

func decide(h vault.Held, a *consent.Approval, narrows bool) Decision {
	if a == nil {
		return Decision{NotApproved: true, Unapproved: []string{}, visible: []string{}}
	}
	if !SameAccount(h, a) {
		// Another account's scopes are not this client's to know, not
		// even as what it would have to be approved for.
		return Decision{AccountChanged: true, Unapproved: []string{}, visible: []string{}}
	}
	d := Decision{Unapproved: nonNil(scope.Missing(h.Scopes, a.Scopes))}
	switch set := scope.Intersect(a.Scopes, h.Scopes); {
	case len(d.Unapproved) == 0:
		d.Release, d.Scopes = Whole, nonNil(scope.Union(nil, h.Scopes))
	case narrows && len(set) > 0:
		d.Release, d.Scopes = Narrowed, set
	}
	if d.Release != Nothing {
		d.visible = d.Scopes
	} else {
		// Nothing now, but the same account: the scopes it was approved for
		// that the connection still holds are its to know.
		d.visible = nonNil(scope.Intersect(a.Scopes, h.Scopes))
	}
	return d
}

// Visible is what anything said to the client about the connection may
// name: what it receives, or, when it receives nothing now, the scopes it
// was approved for that the same account still holds.
func (d Decision) Visible() []string {
	if d.visible == nil {
		return []string{}
	}
	return d.visible
}

// MayName reports whether the connection's account name and label may be
// told to the client: not when its approval is for another account.
func (d Decision) MayName() bool { return !d.AccountChanged && !d.NotApproved }

// SameAccount reports whether approval a was given for the provider account
// the connection holds (h names one, and a the same).
func SameAccount(h vault.Held, a *consent.Approval) bool {
	return a != nil && a.Account != nil && h.Account != nil && subtle.ConstantTimeCompare(a.Account, h.Account) == 1
}

// Admit is what is refused before anything about the user's connections is
// looked up (a client must not learn whether a user has one): a provider the
// client is not registered for, and a raw credential for a proxy-only client.
func Admit(c Client, provider string, use Use) error {
	if use == Read && c.ProxyOnly {
		return &Refusal{Kind: ProxyOnly, Provider: provider}
	}
	if !slices.Contains(c.Providers, provider) && !slices.Contains(c.Providers, AnyProvider) {
		return &Refusal{Kind: ProviderNotAllowed, Provider: provider}
	}
	return nil
}

// AnyProvider, in a client's providers, allows every provider.
const AnyProvider = "*"

// Choose is the approval a request is about among the client's approvals at
// provider: the one of connection account when the request names it, else
// its only one. No approval at all is consent_required; several and none
// named is account_required (the caller lists the accounts with
// Choosable); a named connection the client is not approved for is
// consent_required for that account — the caller says not_found instead
// when it is not the user's connection at all.
func Choose(provider string, approvals []consent.Approval, account string) (*consent.Approval, error) {
	if len(approvals) == 0 {
		return nil, &Refusal{Kind: ConsentRequired, Provider: provider, Reason: reasonNoApproval}
	}
	if account == "" {
		if len(approvals) == 1 {
			return &approvals[0], nil
		}
		return nil, &Refusal{Kind: AccountRequired, Provider: provider}
	}
	if i := slices.IndexFunc(approvals, func(a consent.Approval) bool { return a.ConnectionID == account }); i >= 0 {
		return &approvals[i], nil
	}
	return nil, &Refusal{Kind: ConsentRequired, Provider: provider, Reason: reasonOtherAccount}
}

// Choosable is Client.Choosable for a client of the default organization.
func Choosable(provider string, conns []vault.Connection, approvals []consent.Approval) []Account {
	return Client{}.Choosable(provider, conns, approvals)
}

// Choosable are the accounts an account_required answer to cl lists: the
// user's connections at provider, in cl's organization, that it would
// receive something of under its approvals (one that holds another account
// than it was approved for is not its to name).
func (cl Client) Choosable(provider string, conns []vault.Connection, approvals []consent.Approval) []Account {
	out := []Account{}
	for _, c := range conns {
		if c.Provider != provider || c.Status == vault.StatusRevoked || InOrg(cl, provider, c.Held()) != nil {
			continue
		}
		i := slices.IndexFunc(approvals, func(a consent.Approval) bool { return a.ConnectionID == c.ID })
		if i < 0 {
			continue
		}
		if d := decide(c.Held(), &approvals[i], true); d.MayName() {
			out = append(out, AccountOf(c))
		}
	}
	return out
}

// Credential is Client.Credential for a client of the default
// organization.
func Credential(provider string, h vault.Held, a *consent.Approval, narrows bool, required []string) (Decision, error) {
	return Client{}.Credential(provider, h, a, narrows, required)
}

// Credential is the decision of a release of the credential (Read or
// Proxy) of the connection holding h to c under approval a: the decision,
// or the refusal — not connected when the connection is another
// organization's (InOrg, first of all), consent_required when the approval
// is for another account (before anything else is said of it),
// insufficient_scope when the connection lacks a scope the caller requires,
// consent_required when the client would receive nothing, or when the token
// must be narrowed and a required scope is outside the approval.
func (c Client) Credential(provider string, h vault.Held, a *consent.Approval, narrows bool, required []string) (Decision, error) {
	if err := InOrg(c, provider, h); err != nil {
		return decide(h, nil, narrows), err
	}
	if !SameAccount(h, a) {
		// First: whether another account's connection holds a required
		// scope is not this client's to learn either.
		d := decide(h, a, narrows)
		return d, consentRequired(provider, d)
	}
	if m := scope.Missing(required, h.Scopes); len(m) > 0 {
		return Decision{}, &Refusal{Kind: InsufficientScope, Provider: provider, Missing: m, Connection: h.ID}
	}
	d := decide(h, a, narrows)
	switch d.Release {
	case Nothing:
		return d, consentRequired(provider, d)
	case Narrowed:
		if u := scope.Missing(required, a.Scopes); len(u) > 0 {
			return d, &Refusal{Kind: ConsentRequired, Provider: provider, Reason: reasonRequiredUnapproved, Unapproved: u}
		}
	}
	return d, nil
}

// MayEnd is Client.MayEnd for a client of the default organization.
func MayEnd(provider string, h vault.Held, a *consent.Approval) error {
	return Client{}.MayEnd(provider, h, a)
}

// MayEnd is the decision of an unlink through c: it may end a connection
// only of its organization (else: not connected) and while its approval is
// for the account the connection holds now (a stale approval of another
// account is no say over this one).
func (c Client) MayEnd(provider string, h vault.Held, a *consent.Approval) error {
	if err := InOrg(c, provider, h); err != nil {
		return err
	}
	if d := decide(h, a, false); d.AccountChanged || d.NotApproved {
		return consentRequired(provider, d)
	}
	return nil
}

// NotNarrowed is the refusal when decision d said Narrowed and the provider
// could not narrow the token after all: the client receives nothing until
// the user approves it for the whole connection.
func NotNarrowed(provider string, d Decision) error {
	return &Refusal{Kind: ConsentRequired, Provider: provider, Reason: reasonGrown, Unapproved: nonNil(d.Unapproved)}
}

// Replaced is the refusal when the connection a decision was made on holds
// another account by the time it is acted on.
func Replaced(provider string) error {
	return &Refusal{Kind: ConsentRequired, Provider: provider, Reason: reasonGrown, AccountChanged: true, Unapproved: []string{}}
}

// Completes is the decision of a flow's completion: a request that named
// the connection named must end on that connection. stored is the
// connection the provider's answer was stored on (in the storing
// transaction, which this refusal rolls back); shown is the display name of
// the account the provider answered with, for the page that explains. A
// request that named none ("", or a new account) ends where the provider's
// account is.
func Completes(provider, named, stored, shown string) error {
	if named == "" || named == stored {
		return nil
	}
	return &Refusal{Kind: AccountMismatch, Provider: provider, Connection: named, Shown: shown}
}

func consentRequired(provider string, d Decision) *Refusal {
	r := &Refusal{Kind: ConsentRequired, Provider: provider, Reason: reasonGrown, Unapproved: nonNil(d.Unapproved),
		AccountChanged: d.AccountChanged}
	if d.NotApproved {
		r.Reason, r.Unapproved = reasonNoApproval, nil
	}
	return r
}

// Kind is the kind of a refusal.
type Kind int

// Kinds of refusal.
const (
	// ProxyOnly: the client never receives a raw credential.
	ProxyOnly Kind = iota + 1
	// ProviderNotAllowed: the client is not registered for the provider.
	ProviderNotAllowed
	// ConsentRequired: the user has not approved this client for what it
	// would receive (Unapproved, AccountChanged).
	ConsentRequired
	// AccountRequired: the client may use several of the user's accounts
	// and named none (Accounts, filled by the caller with Choosable).
	AccountRequired
	// AccountMismatch: a flow for connection Connection came back from the
	// provider with another account (Shown); nothing was stored or granted.
	AccountMismatch
	// InsufficientScope: the connection lacks Missing.
	InsufficientScope
)

// Reasons of a consent_required, in the words a caller sees.
const (
	reasonNoApproval         = "the user has not allowed this client to use their %s connection; mint an elicitation"
	reasonOtherAccount       = "the user has not allowed this client to use that %s account; mint an elicitation with it"
	reasonRequiredUnapproved = "the user has not approved this client for every scope it requires of their %s connection; " +
		"mint an elicitation with them"
	reasonGrown = "the user has not approved this client for everything their %s connection now grants; " +
		"mint an elicitation (the user approves on the consent page, no new sign-in at the provider)"
)

// Refusal is a typed refusal of the decision. It carries no secret: ids,
// scope names and the words a caller may see.
type Refusal struct {
	Kind     Kind
	Provider string
	// Reason is the description's format (%s: the provider) for
	// ConsentRequired.
	Reason string
	// Unapproved and AccountChanged: ConsentRequired.
	Unapproved     []string
	AccountChanged bool
	// Missing: InsufficientScope.
	Missing []string
	// Accounts: AccountRequired.
	Accounts []Account
	// Connection: the connection the answer is about (InsufficientScope:
	// the one to step up; AccountMismatch: the one the request named).
	Connection string
	// Shown: AccountMismatch, the account the provider answered with.
	Shown string
}

func (r *Refusal) Error() string { return "release: " + r.Describe() }

// Describe is the refusal in the words a caller may see.
func (r *Refusal) Describe() string {
	switch r.Kind {
	case ProxyOnly:
		return fmt.Sprintf("this client is registered proxy-only: it never receives a credential; "+
			"call the provider through /v1/proxy/%s/…", r.Provider)
	case ProviderNotAllowed:
		return fmt.Sprintf("this client may not use provider %q", r.Provider)
	case ConsentRequired:
		return fmt.Sprintf(r.Reason, r.Provider)
	case AccountRequired:
		return fmt.Sprintf("this client may use several of the user's %s accounts; name one with account=<id>", r.Provider)
	case AccountMismatch:
		return fmt.Sprintf("the request was for another %s account than the one the provider signed in", r.Provider)
	case InsufficientScope:
		return fmt.Sprintf("the %s connection lacks required scopes (%s); mint an elicitation with them",
			r.Provider, strings.Join(r.Missing, " "))
	}
	return "refused"
}

// Is makes errors.Is(err, release.ErrX) answer by kind.
func (r *Refusal) Is(target error) bool {
	t, ok := target.(*Refusal)
	return ok && t.Provider == "" && t.Kind == r.Kind
}

// Sentinels of each kind, for errors.Is and the error table.
var (
	ErrProxyOnly          = &Refusal{Kind: ProxyOnly}
	ErrProviderNotAllowed = &Refusal{Kind: ProviderNotAllowed}
	ErrConsentRequired    = &Refusal{Kind: ConsentRequired}
	ErrAccountRequired    = &Refusal{Kind: AccountRequired}
	ErrAccountMismatch    = &Refusal{Kind: AccountMismatch}
	ErrInsufficientScope  = &Refusal{Kind: InsufficientScope}
)

// Account names a connection to a client: never the provider's own account
// id.
type Account struct {
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	Label       string `json:"label,omitempty"`
}

// AccountOf is how a connection is named to a client it may be named to.
func AccountOf(c vault.Connection) Account {
	return Account{ID: c.ID, DisplayName: c.DisplayName, Label: c.Label}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
