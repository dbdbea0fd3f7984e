// Package lifecycle owns the whole life of a connection after the vault
// stores it, whoever acts: every event and audit row of a change, from one
// Owner that internal/server builds once and hands to connect, api, admin
// and the vault.
//   - Changed: Stored reports a put (connection created, its scopes or
//     account changed) to every client approved for it, in the put's
//     transaction (the vault writes the put's audit row).
//   - Withdrawn: Withdraw takes one client's approval back (the user's
//     "Remove access"), its audit row and the client's event in one
//     transaction.
//   - Reauthorization: ReauthRequired is the vault's OnReauth, reporting a
//     connection the provider stopped honouring in the vault's marking
//     transaction.
//   - Ended: Delete — by the MCP server (unlink), by the user (Disconnect on
//     the account page) or by an admin (revoke) — with everything that goes
//     with it in the deleting transaction: every client's approval withdrawn,
//     one consent.withdrawn audit row per client and one connection.revoked
//     row, the user's notice, the clients' webhook events (each told only what
//     it may see); then the revocation at the provider, whose outcome is
//     audited (connection.provider_revocation). One shape for every deletion,
//     whoever asks.
//
// Every connection is its organization's (issue 34): DeleteIn ends one
// through the vault's handle on that organization (Delete: the
// organization of the owner's handle), and every event goes to the holders of the connection's own
// organization (consent.HolderApprovalsIn), decided for that organization.
//
// It must never be imported by the leaf packages it joins (vault, consent,
// webhook, audit, notice), never import a surface (connect, api, admin) or
// answer HTTP, and never hold a credential beyond the vault's call.
package lifecycle
