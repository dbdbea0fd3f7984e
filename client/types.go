package client

import (
	"fmt"
	"log/slog"
	"time"
)

// MintRequest is the body of POST /v1/elicitations.
type MintRequest struct {
	// Provider is the provider id in connectd's catalog, e.g. "github".
	Provider string `json:"provider"`
	// Scopes to ask for; empty means the provider's default scopes. If the
	// user already granted some, connectd asks the provider for the union.
	Scopes []string `json:"scopes,omitempty"`
	// Message is shown to the user by the MCP client (at most 500
	// characters); empty lets connectd write one.
	Message string `json:"message,omitempty"`
	// RequestDigest, optional, binds the request_state to the original MCP
	// request: Resolve must present the same value (see RequestDigest).
	RequestDigest string `json:"request_digest,omitempty"`
	// Account says which of the user's accounts at the provider: a
	// connection id (Account.ID: reauthorize or step up that one; connectd
	// answers ErrNotFound when it is not this user's), AccountNew (connect
	// another account; the provider is asked to let the user choose), or
	// empty (the user connects whichever account they sign in with). A flow
	// for a connection id ends on that connection or not at all: a user who
	// signs in at the provider as another account (one it names) gets
	// connectd's page saying so (account_mismatch), nothing is stored or
	// approved, and the elicitation stays pending, so the user may try again
	// from the same link (Wait keeps waiting; no other connection appears).
	Account string `json:"account,omitempty"`
}

// Values of MintRequest.Account and UnlinkAccount's account besides a
// connection id.
const (
	// AccountNew, as MintRequest.Account, connects another account at the
	// provider.
	AccountNew = "new"
	// AccountAll, as UnlinkAccount's account, unlinks every connection at
	// the provider this client is approved for.
	AccountAll = "all"
)

// Account is one of the user's accounts (connections) at a provider, as
// connectd names it to a client: never the provider's own account id. A user
// may have several at one provider (work and personal GitHub); pass ID as
// the account of AccountToken, UnlinkAccount or MintRequest to name one.
type Account struct {
	// ID is the connection id, cn_ and 26 characters of [a-z2-7]. It is
	// stable and not a secret.
	ID string `json:"id"`
	// DisplayName is connectd's one name for the account, the same in
	// every answer: the provider's label for it (login, email, workspace),
	// else the provider's own id for it (a provider that names accounts
	// only by an id, an ID token's sub). It is "" only for an account the
	// provider does not name — an API key, a sign-in the provider said
	// nothing about, which Label or ID tells apart — and for a listed
	// connection now to another provider account than this client is
	// approved for (Connection.ConsentRequired): not this client's to know.
	DisplayName string `json:"display_name"`
	// Label is the user's own name for it ("work"), set on connectd's
	// account page; often empty.
	Label string `json:"label,omitempty"`
}

// Title is how the account is shown to its user: the label and the display
// name, "work (octocat)", either alone, or the id when it has neither.
func (a Account) Title() string {
	switch {
	case a.Label != "" && a.DisplayName != "" && a.Label != a.DisplayName:
		return a.Label + " (" + a.DisplayName + ")"
	case a.Label != "":
		return a.Label
	case a.DisplayName != "":
		return a.DisplayName
	}
	return a.ID
}

// Status is the state of an elicitation.
type Status string

// Elicitation states.
const (
	StatusPending   Status = "pending"   // the user has not finished yet
	StatusCompleted Status = "completed" // connected (or consented): fetch the token
	StatusDeclined  Status = "declined"  // the user said no, at connectd or at the provider
	StatusExpired   Status = "expired"   // the connect URL expired unused
	StatusFailed    Status = "failed"    // see ElicitationStatus.Reason
)

// Elicitation kinds (ElicitationStatus.Kind).
const (
	KindConnect  = "connect"  // connect the provider (or consent to this client)
	KindApproval = "approval" // approve one proxied call (a request rule that asks)
)

// Reasons of a declined elicitation (ElicitationStatus.Reason).
const (
	// ReasonUserDenied: the user denied the request on connectd's approval
	// page. Do not retry it; tell the user it was denied (DeniedResult).
	ReasonUserDenied = "user_denied"
	// ReasonClientDeclined: the MCP client's user declined or dismissed
	// opening the link (Cancel).
	ReasonClientDeclined = "client_declined"
)

// Final reports whether the elicitation will not change any more.
func (s Status) Final() bool { return s != StatusPending }

// ElicitationStatus is connectd's status document of an elicitation.
type ElicitationStatus struct {
	ID     string `json:"elicitation_id"`
	Status Status `json:"status"`
	// Kind says what the user is asked: KindConnect (connect the provider,
	// or consent) or KindApproval (approve one proxied call). An older
	// connectd sends none: a connect link.
	Kind string `json:"kind,omitempty"`
	// Reason says why an elicitation failed or was declined
	// (provider_error, exchange_failed, provider_access_denied, …; for an
	// approval ReasonUserDenied or ReasonClientDeclined).
	Reason      string     `json:"reason,omitempty"`
	Provider    string     `json:"provider"`
	Scopes      []string   `json:"scopes"`
	ExpiresAt   time.Time  `json:"expires_at"`
	CompletedAt *time.Time `json:"completed_at,omitempty"`
	// RequestState is set by Mint, and by Resolve while the elicitation is
	// still pending: a fresh single-use state to hand back to the MCP client.
	RequestState string `json:"request_state,omitempty"`
}

// Elicitation is a freshly minted elicitation: the connect URL and the
// ready-made MCP shapes that carry it to the MCP client.
type Elicitation struct {
	ElicitationStatus
	// URL is the connect URL: https://<connectd>/c/<opaque id>. It carries
	// nothing about the user and authenticates nothing.
	URL string `json:"url"`
	// Params are the params of a 2025-11-25 elicitation/create request
	// (mode "url", with elicitationId).
	Params ElicitParams `json:"elicitation"`
	// URLElicitationRequiredError is the 2025-11-25 JSON-RPC error (-32042).
	URLElicitationRequiredError RPCError `json:"url_elicitation_required_error"`
	// InputRequest is the 2026-07-28 entry of InputRequiredResult.inputRequests.
	InputRequest InputRequest `json:"input_request"`
	// Again reports that connectd answered with an elicitation already
	// pending for the same request (a retry): the same link as before.
	Again bool `json:"-"`
}

// Connection is one of the user's connections this client may use. It
// never carries a credential. A user may have several at one provider: ID
// tells them apart, DisplayName (as Account.DisplayName) and Label say
// which is which.
type Connection struct {
	Provider     string     `json:"provider"`
	ID           string     `json:"id"`
	DisplayName  string     `json:"display_name"`
	Label        string     `json:"label,omitempty"`
	Status       string     `json:"status"` // active or reauthorization_required
	Scopes       []string   `json:"scopes"`
	AccountLabel string     `json:"account_label,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	ExpiresAt    *time.Time `json:"expires_at,omitempty"`
	// ConsentRequired: the connection grants more than this client is
	// approved for — scopes it gained since, or another provider account
	// connected since (then DisplayName and Label are "") — so its token
	// answers ErrConsentRequired.
	ConsentRequired bool `json:"consent_required,omitempty"`
}

// Account returns the connection as an Account (its id, display name and
// label).
func (c Connection) Account() Account {
	return Account{ID: c.ID, DisplayName: c.DisplayName, Label: c.Label}
}

// Token is a currently valid credential for a provider. Keep it in memory
// for the call that needs it; connectd refreshes it when it is about to
// expire, so ask again rather than caching it. It never prints its secret
// through fmt or slog.
type Token struct {
	Provider string `json:"provider"`
	// Account is the connection the token is of (its id and display name;
	// connectd sends no label here).
	Account     Account    `json:"account"`
	Kind        string     `json:"kind"`       // oauth2 or api_key
	TokenType   string     `json:"token_type"` // usually Bearer
	AccessToken string     `json:"access_token"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	Scopes      []string   `json:"scopes"`
}

// String describes the token without its secret.
func (t Token) String() string {
	return fmt.Sprintf("client.Token{Provider:%s Account:%s Kind:%s Scopes:%v AccessToken:[redacted]}", t.Provider, t.Account.ID,
		t.Kind, t.Scopes)
}

// GoString is String, so %#v does not print the secret either.
func (t Token) GoString() string { return t.String() }

// LogValue keeps the secret out of slog output.
func (t Token) LogValue() slog.Value {
	return slog.GroupValue(slog.String("provider", t.Provider), slog.String("account", t.Account.ID), slog.String("kind", t.Kind),
		slog.Any("scopes", t.Scopes))
}

// Unlinked is the answer of Unlink and UnlinkAccount.
type Unlinked struct {
	Provider string `json:"provider"`
	// RevokedAtProvider reports whether the provider confirmed revocation
	// (RFC 7009); Revocation says what happened (revoked, skipped,
	// not_supported, failed). With several connections unlinked (AccountAll)
	// they are the first one's; Connections has each.
	RevokedAtProvider bool   `json:"revoked_at_provider"`
	Revocation        string `json:"revocation,omitempty"`
	// Connections lists every connection unlinked: one, or with AccountAll
	// each the client was approved for.
	Connections []UnlinkedConnection `json:"connections,omitempty"`
}

// UnlinkedConnection is one connection an unlink ended.
type UnlinkedConnection struct {
	ID                string `json:"id"`
	RevokedAtProvider bool   `json:"revoked_at_provider"`
	Revocation        string `json:"revocation"`
}
