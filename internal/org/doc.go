// Package org owns organizations (issue 34) and their provider apps: the
// tables organizations and provider_apps and all their SQL, the rule of what
// an organization's name, brand color and logo may be, and the one answer
// to "which OAuth app does organization O use at provider P" (Resolve, and
// ByID for a stored connection's app).
//
// An organization owns MCP servers (clients.org_id, package clientauth),
// connections (connections.org_id and app_id, package vault), admin keys and
// its audit trail; here are only the organization itself and its own OAuth
// apps. An app's client secret is write-only: sealed with the vault keyring
// under this package's own purpose, bound to the app's id, organization,
// provider and client id (a sealed secret copied onto another row does not
// open), opened only inside this package to build the provider
// (provider.Catalog.WithApp), never returned, printed or logged.
//
// Resolve's rule: an organization with its own app at the provider uses
// it; one without uses the deployment's app (the providers file's client id
// and secret) if it is the default organization, or if the provider's
// shared_app is "all"; otherwise ErrNoApp. Answers are cached in memory for
// a short TTL, by (organization, provider) and by app id, holding the
// sealed secret, never the clear one; every write sends
// pg_notify(InvalidationChannel, organization id) in its transaction, so
// each replica's cache forgets the organization (package cache, subscribed
// by CacheSubscriber).
//
// It must never: return, log or put into an error a client secret; answer
// one organization's Resolve with another's app; count or read another
// package's tables (a delete refused while clients or connections remain is
// the schema's foreign keys' answer); pick an HTTP status (its sentinels
// wrap package problem's kinds, and ErrNoApp has its row in
// internal/web/codes.go).
package org
