// @connectd/client against a real connectd, run by e2e/typescript_test.go
// (go test ./e2e), which passes the world in the environment: connectd's
// URL, two registered clients' keys (A, B), alice's and bob's MCP access
// tokens for each, and CONTROL_URL, whose POST /complete makes the Go test's
// browser open a connect link as a user and allow.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  ConnectdClient,
  ConnectdError,
  ErrorFamily,
  Generation,
  URLElicitationUnsupportedError,
  isInvalidClient,
  isRequestStateError,
  needsConnection,
  requestDigest,
  toolResultText,
} from "@connectd/client";

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: these tests run from go test ./e2e (TestTypeScriptClientIntegration)`);
  return v;
}

const baseUrl = need("CONNECTD_URL");
const provider = need("CONNECTD_PROVIDER");
const scope = need("CONNECTD_SCOPE");
const clientA = new ConnectdClient({ baseUrl, key: need("CONNECTD_KEY_A"), retryWaitMs: 1000 });
const clientB = new ConnectdClient({ baseUrl, key: need("CONNECTD_KEY_B"), retryWaitMs: 1000 });
const aliceA = need("ALICE_TOKEN_A");
const aliceB = need("ALICE_TOKEN_B");
const bobA = need("BOB_TOKEN_A");

/** The user opens the link in the (Go test's) browser, signs in and allows. */
async function complete(url: string, user: string): Promise<void> {
  const r = await fetch(new URL("/complete", need("CONTROL_URL")), { method: "POST", body: JSON.stringify({ url, user }) });
  assert.equal(r.status, 204, `completing ${url} as ${user}: ${await r.text()}`);
}

async function code(p: Promise<unknown>): Promise<ConnectdError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof ConnectdError, String(err));
    return err;
  }
  assert.fail("no error");
}

test("a bad key is invalid_client", async () => {
  const bad = new ConnectdClient({ baseUrl, key: "cks_not_a_real_key" });
  const err = await code(bad.connections(aliceA));
  assert.equal(err.status, 401);
  assert.equal(err.code, "invalid_client");
  assert.ok(isInvalidClient(err));
  assert.ok(!err.message.includes("cks_not_a_real_key") && !err.message.includes(aliceA));
});

test("a token for another client's resource is refused", async () => {
  const err = await code(clientA.connections(aliceB));
  assert.ok(err.is(ErrorFamily.UserToken), err.message);
});

test("connect: not connected, mint, the same link again, complete, wait, token; then the typed refusals", async () => {
  // Not connected yet.
  let err = await code(clientA.token(aliceA, provider, scope));
  assert.equal(err.code, "not_connected");
  assert.ok(needsConnection(err));
  assert.deepEqual(await clientA.connections(aliceA), []);

  // requireConnection's shapes, per what the peer declared.
  const digest = await requestDigest("list_files", {});
  const req = { provider, scopes: [scope], requestDigest: digest, message: "Connect your files." };
  const first = await clientA.mint(aliceA, req);
  assert.equal(first.again, false);
  assert.equal(first.status, "pending");
  assert.equal(first.url, `${baseUrl}/c/${first.id}`);
  assert.match(first.requestState ?? "", /^rs1\./);
  const again = await clientA.mint(aliceA, req);
  assert.equal(again.again, true);
  assert.equal(again.id, first.id);
  assert.equal(again.url, first.url);

  // 2025-11-25 with URL mode: a retry waits retryWaitMs, then the same link.
  const a = await clientA.requireConnection(aliceA, { protocolVersion: "2025-11-25", urlElicitation: true }, req);
  assert.equal(a.generation, Generation.URLElicitation);
  assert.equal(a.ready, false);
  assert.equal(a.elicitRequest?.url, first.url);
  assert.equal(a.error?.code, -32042);
  assert.equal(a.error?.data.elicitations[0]?.elicitationId, first.id);
  // 2026-07-28: the InputRequiredResult.
  const b = await clientA.requireConnection(aliceA, { protocolVersion: "2026-07-28", urlElicitation: true }, req);
  assert.equal(b.result?.resultType, "input_required");
  assert.equal(b.result?.inputRequests[`connect-${provider}`]?.params.url, first.url);
  // No URL mode: the fallback text carries the link.
  const fb = await clientA.requireConnection(aliceA, { protocolVersion: "2025-11-25", urlElicitation: false }, req);
  assert.ok(fb.fallback);
  assert.ok(toolResultText(fb.fallback).includes(first.url));
  assert.match(toolResultText(fb.fallback), /Open it in your browser/);
  const strict = new ConnectdClient({ baseUrl, key: need("CONNECTD_KEY_A"), fallback: false });
  await assert.rejects(strict.requireConnection(aliceA, { protocolVersion: "2025-11-25", urlElicitation: false }, req), URLElicitationUnsupportedError);

  // Resolve consumes a request_state once; a digest must match.
  const st = await clientA.resolve(aliceA, b.result!.requestState, digest);
  assert.equal(st.id, first.id);
  assert.equal(st.status, "pending");
  assert.match(st.requestState ?? "", /^rs1\./);
  err = await code(clientA.resolve(aliceA, b.result!.requestState, digest));
  assert.equal(err.code, "request_state_replayed");
  assert.ok(isRequestStateError(err));
  err = await code(clientA.resolve(aliceA, st.requestState!, "another-digest"));
  assert.equal(err.code, "request_digest_mismatch");
  assert.ok(isRequestStateError(err));

  // Another user cannot read alice's elicitation.
  err = await code(clientA.status(bobA, first.id));
  assert.equal(err.code, "not_found");

  // The user completes while wait long-polls.
  const waiting = clientA.wait(aliceA, first.id, { timeoutMs: 30_000 });
  await complete(first.url, "alice");
  const done = await waiting;
  assert.equal(done.status, "completed");
  assert.ok(done.completedAt instanceof Date);

  const tok = await clientA.token(aliceA, provider, scope);
  assert.equal(tok.provider, provider);
  assert.ok(tok.accessToken.length > 0);
  assert.ok(!JSON.stringify({ tok }).includes(tok.accessToken));
  const conns = await clientA.connections(aliceA);
  assert.equal(conns.length, 1);
  assert.equal(conns[0]?.provider, provider);
  // The token and the listing name the same connection (issue 24).
  assert.match(tok.account.id, /^cn_[a-z2-7]{26}$/);
  assert.equal(conns[0]?.id, tok.account.id);
  assert.equal((await clientA.accountToken(aliceA, provider, tok.account.id, scope)).account.id, tok.account.id);

  // A scope the connection lacks: insufficient_scope, typed, with the missing scopes.
  err = await code(clientA.token(aliceA, provider, scope, "files.write"));
  assert.equal(err.code, "insufficient_scope");
  assert.deepEqual(err.missingScopes, ["files.write"]);
  assert.ok(needsConnection(err));

  // Another MCP server the user never approved: consent_required.
  err = await code(clientB.token(aliceB, provider, scope));
  assert.equal(err.code, "consent_required");
  assert.ok(err.is(ErrorFamily.ConsentRequired));
  assert.ok(needsConnection(err));

  // Unlink withdraws it.
  const u = await clientA.unlink(aliceA, provider);
  assert.equal(u.provider, provider);
  assert.deepEqual(
    u.connections.map((c) => c.id),
    [tok.account.id],
  );
  err = await code(clientA.token(aliceA, provider, scope));
  assert.equal(err.code, "not_connected");
});

test("requireConnection on a retry is ready when the user finishes while it waits", async () => {
  const req = { provider, scopes: [scope], requestDigest: await requestDigest("read_file", { path: "/x" }) };
  const peer = { protocolVersion: "2025-11-25", urlElicitation: true };
  const slow = new ConnectdClient({ baseUrl, key: need("CONNECTD_KEY_A"), retryWaitMs: 20_000 });
  const e = await slow.mint(bobA, req);
  const held = slow.requireConnection(bobA, peer, req);
  await new Promise((r) => setTimeout(r, 300));
  await complete(e.url, "bob");
  const ans = await held;
  assert.equal(ans.ready, true);
  assert.equal(ans.elicitation.id, e.id);
  await slow.unlink(bobA, provider);
});
