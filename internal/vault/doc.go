// Package vault owns connectd's stored third-party credentials: the keyring of
// versioned AES-256-GCM keys and the per-purpose keys derived from it (one for
// credentials, one for each other thing connectd seals: Keyring.Purpose),
// sealing and opening with associated data that binds every ciphertext to its
// row and purpose, the connections table (one
// connection per organization, issuer, subject, provider and provider
// account), token retrieval with a refresh
// that happens once across all replicas, key rotation (rewrap) and deletion
// with revocation at the provider. It records the outcome of refreshes in the
// shared audit trail (package audit) itself, inside the refresh transaction,
// and DeleteWith lets a caller (an admin revocation) write in the deleting
// transaction. It owns how an account is named: the one display name
// (Credential.DisplayName), kept in clear beside the sealed credential, and
// the account ids connectd makes up when a provider names none
// (NewAccountID, MadeUpAccount). Token may answer from an in-memory cache of connection rows
// with their sealed credentials (cache.go), which every write announces to
// every replica through Postgres NOTIFY.
//
// A connection belongs to the organization whose provider app obtained it
// (issue 34). A Store is one organization's handle (New: the default
// organization's; In: another's): every query it makes names its
// organization, what it stores is that organization's (with the app,
// Target.AppID), its cache entries and locks are keyed by it, and a
// connection of another organization is ErrNotConnected through it, as if
// it did not exist. Refreshes, narrowings and revocations are made for the
// connection's own app (App). ListAll is the user's own view across
// organizations; KeyStatus, Rewrap and BackfillAccounts are the operator's
// passes over every organization's rows.
//
// It must never:
//   - put a secret (token, refresh token, API key, key material, plaintext) into
//     an error, a log line or a fmt verb: Credential and Keyring redact
//     themselves when formatted;
//   - keep plaintext byte buffers after use (they are zeroed; Go strings holding
//     an opened token cannot be wiped, so they are handed to the caller and not
//     cached);
//   - import another leaf package (provider, session, mcpauth): provider calls
//     reach it as function values (RefreshFunc, RevokeFunc) supplied by the
//     wiring in cmd/connectd;
//   - hold a row lock across anything but the one provider call that must not
//     happen twice (a refresh);
//   - find, change or refresh a connection through another organization's
//     handle, or present its refresh token to another app than its own.
package vault
