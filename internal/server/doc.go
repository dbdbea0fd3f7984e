// Package server wires connectd: it builds every service of one process
// from one Config, and serves them on two handlers: Public (the browser
// surface of internal/connect, the MCP-server surface of internal/api,
// /admin, behind the production middleware of web.Public) and Internal (the
// operators' listener: probes, metrics, pprof). cmd/connectd's serve, and
// every test harness that needs the app (internal/servertest for connect,
// admin and e2e), build it here, so what is tested is what runs.
//
// It builds in order, each service from what is built before it, no
// closure breaking a cycle: the keyring, the catalog and the organizations
// (whose own issuers identity's verifier trusts); identity; the job
// enqueuer (webhook.Service on an insert-only River client); the one
// lifecycle owner, then the vault (whose OnReauth is the owner's; the owner
// is handed the vault once it exists: the two need each other); the
// elicitation store and the consent store both surfaces share; connect and
// api; admin; and last the working River client, whose workers (deliveries,
// the health job, the database sweeps) use all of the above.
//
// It owns the process-wide plumbing: the Postgres notification hub
// (cache.Hub) that keeps every replica's caches fresh and wakes long-polls,
// started by Run; the one database sweep job (elicitations, OAuth states,
// browser sessions, used request_state ids, spent client assertions); and
// the seams tests use, as Config fields (Now, HTTPClient).
//
// It must never:
//   - read the environment, open or close the database pool, or listen on a
//     socket: the caller (cmd/connectd) does, so tests can build a Server
//     over their own pool and httptest listeners;
//   - be imported by a package other than cmd/connectd and tests: it is the
//     top of the dependency graph (cmd → server → connect, api, admin →
//     elicitation, lifecycle → leaves);
//   - wire a service differently for tests than for production: a test's
//     needs are Config fields.
package server
