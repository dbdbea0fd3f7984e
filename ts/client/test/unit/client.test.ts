import assert from "node:assert/strict";
import { test } from "node:test";
import { inspect } from "node:util";
import {
  AccountAll,
  AccountNew,
  ConnectdClient,
  ConnectdError,
  ConnectdNetworkError,
  ErrorFamily,
  URLElicitationUnsupportedError,
  WaitTimeoutError,
  accountsOf,
  chooseAccount,
  chosenAccount,
  isAccountRequired,
  keyAccount,
  isRequestStateError,
  isUserTokenError,
  missingScopes,
  needsConnection,
} from "@connectd/client";
import { json, key, minted, scriptedFetch, userToken } from "./helpers.js";

test("constructor validates baseUrl and key as Go's client.New", () => {
  const cases: [string, { baseUrl: string; key: string; allowHttp?: boolean }, boolean][] = [
    ["https", { baseUrl: "https://connect.example.com", key }, true],
    ["https with prefix and slash", { baseUrl: "https://example.com/connectd/", key }, true],
    ["http loopback", { baseUrl: "http://127.0.0.1:8080", key }, true],
    ["http localhost", { baseUrl: "http://localhost:8080", key }, true],
    ["http ::1", { baseUrl: "http://[::1]:8080", key }, true],
    ["http remote", { baseUrl: "http://connect.example.com", key }, false],
    ["http remote allowed", { baseUrl: "http://connectd:8080", key, allowHttp: true }, true],
    ["other scheme", { baseUrl: "ftp://connect.example.com", key }, false],
    ["relative", { baseUrl: "/connect", key }, false],
    ["user info", { baseUrl: "https://u:p@connect.example.com", key }, false],
    ["query", { baseUrl: "https://connect.example.com?x=1", key }, false],
    ["fragment", { baseUrl: "https://connect.example.com#f", key }, false],
    ["no key", { baseUrl: "https://connect.example.com", key: "" }, false],
    ["key with newline", { baseUrl: "https://connect.example.com", key: "cks_a\r\nX-Evil: 1" }, false],
  ];
  for (const [name, opts, ok] of cases) {
    let err: unknown;
    try {
      new ConnectdClient(opts);
    } catch (e) {
      err = e;
    }
    assert.equal(err === undefined, ok, `${name}: ${String(err)}`);
    if (err && opts.key) assert.ok(!String(err).includes(opts.key), `${name}: the error repeats the key`);
  }
  assert.equal(new ConnectdClient({ baseUrl: "https://example.com/connectd/", key }).baseUrl, "https://example.com/connectd");
});

test("the client never shows its key", () => {
  const c = new ConnectdClient({ baseUrl: "https://connect.example.com", key });
  for (const s of [String(c), JSON.stringify(c), inspect(c), inspect({ c }, { showHidden: true, depth: 5 })]) {
    assert.ok(!s.includes(key), s);
  }
});

test("token sends the key, the user token and the scopes; the Token hides its secret", async () => {
  const secret = "gho_provider_secret";
  const { fetch, calls } = scriptedFetch([
    () => json(200, { provider: "github", kind: "oauth2", token_type: "Bearer", access_token: secret, scopes: ["repo"], expires_at: "2030-01-01T00:00:00Z" }),
  ]);
  const c = new ConnectdClient({ baseUrl: "https://connect.example.com/", key, fetch });
  const tok = await c.token(userToken, "github", "repo", "read:org");
  assert.equal(tok.accessToken, secret);
  assert.equal(tok.tokenType, "Bearer");
  assert.deepEqual(tok.scopes, ["repo"]);
  assert.equal(tok.expiresAt?.toISOString(), "2030-01-01T00:00:00.000Z");
  const call = calls[0]!;
  assert.equal(call.url, "https://connect.example.com/v1/connections/github/token?scopes=repo%2Cread%3Aorg");
  assert.equal(call.headers.get("authorization"), `Bearer ${key}`);
  assert.equal(call.headers.get("x-user-token"), userToken);
  assert.equal(call.headers.get("user-agent"), "connectd-client-ts");
  for (const s of [String(tok), `${tok}`, JSON.stringify(tok), JSON.stringify({ tok }), inspect(tok), inspect({ tok }, { depth: 5 })]) {
    assert.ok(!s.includes(secret), `leaks the token: ${s}`);
  }
  assert.match(String(tok), /redacted/);
});

test("no user token: no call", async () => {
  const { fetch, calls } = scriptedFetch([]);
  const c = new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch });
  await assert.rejects(c.token("", "github"), (e) => isUserTokenError(e) && !String(e).includes(key));
  assert.equal(calls.length, 0);
});

test("errors carry connectd's code and map to the Go families", async () => {
  const cases: [number, string, ErrorFamily[]][] = [
    [404, "not_connected", [ErrorFamily.NotConnected]],
    [403, "consent_required", [ErrorFamily.ConsentRequired]],
    [403, "insufficient_scope", [ErrorFamily.InsufficientScope]],
    [409, "reauthorization_required", [ErrorFamily.ReauthorizationRequired]],
    [409, "account_required", [ErrorFamily.AccountRequired]],
    [404, "not_found", [ErrorFamily.NotFound]],
    [401, "invalid_client", [ErrorFamily.InvalidClient]],
    [401, "invalid_token", [ErrorFamily.UserToken]],
    [401, "wrong_audience", [ErrorFamily.UserToken]],
    [401, "some_new_code", [ErrorFamily.UserToken]],
    [400, "unknown_provider", [ErrorFamily.UnknownProvider]],
    [403, "provider_not_allowed", [ErrorFamily.ProviderNotAllowed]],
    [400, "invalid_scope", [ErrorFamily.InvalidRequest]],
    [400, "request_state_invalid", [ErrorFamily.RequestState, ErrorFamily.RequestStateInvalid]],
    [400, "request_state_expired", [ErrorFamily.RequestState, ErrorFamily.RequestStateExpired]],
    [409, "request_state_replayed", [ErrorFamily.RequestState, ErrorFamily.RequestStateReplayed]],
    [403, "request_state_wrong_user", [ErrorFamily.RequestState, ErrorFamily.RequestStateWrongUser]],
    [403, "request_state_wrong_client", [ErrorFamily.RequestState, ErrorFamily.RequestStateWrongClient]],
    [400, "request_digest_mismatch", [ErrorFamily.RequestState, ErrorFamily.RequestDigestMismatch]],
    [429, "rate_limited", [ErrorFamily.RateLimited]],
    [503, "provider_unavailable", [ErrorFamily.Unavailable]],
    [503, "jwks_unavailable", [ErrorFamily.Unavailable]],
    [503, "database_unavailable", [ErrorFamily.Unavailable]],
    [502, "", [ErrorFamily.Unavailable]],
  ];
  for (const [status, code, families] of cases) {
    const body = code ? JSON.stringify({ error: code, error_description: "why", request_id: "r1", missing_scopes: ["a", "b"] }) : "<html>bad gateway</html>";
    const { fetch } = scriptedFetch([() => new Response(body, { status, headers: { "Retry-After": "3" } })]);
    const c = new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch });
    const err = await c.token(userToken, "github").then(
      () => assert.fail("no error"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ConnectdError, String(err));
    assert.equal(err.status, status);
    assert.equal(err.code, code);
    assert.equal(err.retryAfterMs, 3000);
    for (const f of Object.values(ErrorFamily)) {
      assert.equal(err.is(f), families.includes(f), `${code} is ${f}`);
    }
    assert.equal(needsConnection(err), ["not_connected", "consent_required", "insufficient_scope", "reauthorization_required"].includes(code), code);
    assert.equal(isRequestStateError(err), families.includes(ErrorFamily.RequestState), code);
    if (code) assert.deepEqual(missingScopes(err), ["a", "b"]);
    assert.ok(!err.message.includes(key) && !err.message.includes(userToken));
  }
});

test("consent_required says what needs approving", async () => {
  const { fetch } = scriptedFetch([() => json(403, { error: "consent_required", unapproved_scopes: ["write"], account_changed: true })]);
  const c = new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch });
  await assert.rejects(c.token(userToken, "github"), (e) => {
    assert.ok(e instanceof ConnectdError);
    assert.deepEqual(e.unapprovedScopes, ["write"]);
    assert.equal(e.accountChanged, true);
    return needsConnection(e);
  });
});

test("redirects are not followed and are errors", async () => {
  const { fetch, calls } = scriptedFetch([(r) => (assert.equal(r.url.startsWith("https://connect.example.com/"), true), new Response(null, { status: 302, headers: { Location: "https://evil.example/" } }))]);
  const c = new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch });
  await assert.rejects(c.connections(userToken), (e) => e instanceof ConnectdError && e.status === 302);
  assert.equal(calls.length, 1);
});

test("mint: 201 new, 200 the same pending request again", async () => {
  const { fetch, calls } = scriptedFetch([() => json(201, minted()), () => json(200, minted({ request_state: "rs1.def" }))]);
  const c = new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch });
  const req = { provider: "demo-files", scopes: ["files.read"], message: "m", requestDigest: "d1" };
  const e1 = await c.mint(userToken, req);
  const e2 = await c.mint(userToken, req);
  assert.equal(e1.again, false);
  assert.equal(e2.again, true);
  assert.equal(e1.url, e2.url);
  assert.equal(e1.params.elicitationId, "elic123");
  assert.equal(e1.expiresAt.toISOString(), "2026-03-04T05:06:07.000Z");
  assert.deepEqual(JSON.parse(calls[0]!.body!), { provider: "demo-files", scopes: ["files.read"], message: "m", request_digest: "d1" });
  assert.equal(calls[0]!.headers.get("content-type"), "application/json");
});

test("status asks for a long-poll of whole seconds, at most 60", async () => {
  const st = { elicitation_id: "e1", status: "pending", provider: "p", expires_at: "2026-03-04T05:06:07Z" };
  const { fetch, calls } = scriptedFetch([() => json(200, st), () => json(200, st), () => json(200, st)]);
  const c = new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch });
  await c.status(userToken, "e1");
  await c.status(userToken, "e1", 1.2);
  await c.status(userToken, "e1", 600);
  assert.deepEqual(
    calls.map((r) => r.url),
    ["https://connect.example.com/v1/elicitations/e1", "https://connect.example.com/v1/elicitations/e1?wait=2s", "https://connect.example.com/v1/elicitations/e1?wait=60s"],
  );
});

test("wait rides out 503, 429 and network errors until a final status", async () => {
  const pending = { elicitation_id: "e1", status: "pending", provider: "p", expires_at: "2026-03-04T05:06:07Z" };
  const { fetch, calls } = scriptedFetch([
    () => json(503, { error: "jwks_unavailable" }),
    () => json(429, { error: "rate_limited" }, { "Retry-After": "0" }),
    () => Promise.reject(new TypeError("fetch failed")),
    () => json(200, pending),
    () => json(200, { ...pending, status: "completed", completed_at: "2026-03-04T05:00:00Z" }),
  ]);
  const c = new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch });
  const st = await c.wait(userToken, "e1", { timeoutMs: 10_000 });
  assert.equal(st.status, "completed");
  assert.equal(calls.length, 5);
  assert.ok(calls.every((r) => r.url.endsWith("?wait=30s")));
});

test("wait stops at a refusal, at its timeout and at the caller's signal", async () => {
  let c = new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch: scriptedFetch([() => json(404, { error: "not_found" })]).fetch });
  await assert.rejects(c.wait(userToken, "e1"), (e) => e instanceof ConnectdError && e.is(ErrorFamily.NotFound));

  // A fetch that hangs until aborted, as a long-poll does.
  const hang: typeof fetch = (_u, init) =>
    new Promise((_, reject) => init?.signal?.addEventListener("abort", () => reject(init.signal?.reason)));
  c = new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch: hang });
  await assert.rejects(c.wait(userToken, "e1", { timeoutMs: 50 }), WaitTimeoutError);
  const ac = new AbortController();
  const p = c.wait(userToken, "e1", { signal: ac.signal });
  ac.abort(new Error("stop"));
  await assert.rejects(p, /stop/);
});

test("a per-call timeout is a network error", async () => {
  const hang: typeof fetch = (_u, init) =>
    new Promise((_, reject) => init?.signal?.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))));
  const c = new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch: hang, timeoutMs: 30 });
  await assert.rejects(c.connections(userToken), (e) => e instanceof ConnectdNetworkError && /within 30 ms/.test(e.message));
});

test("requireConnection without URL mode and without fallback mints nothing", async () => {
  const { fetch, calls } = scriptedFetch([]);
  const c = new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch, fallback: false });
  for (const peer of [
    { protocolVersion: "2025-11-25", urlElicitation: false },
    { protocolVersion: "2025-06-18", urlElicitation: true },
  ]) {
    await assert.rejects(c.requireConnection(userToken, peer, { provider: "p" }), URLElicitationUnsupportedError);
  }
  assert.equal(calls.length, 0);
});

test("requireConnection on a retry: ready when the user finished, the same link when still pending", async () => {
  const done = { elicitation_id: "elic123", status: "completed", provider: "demo-files", expires_at: "2026-03-04T05:06:07Z" };
  let { fetch } = scriptedFetch([() => json(200, minted()), () => json(200, done)]);
  let c = new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch });
  const peer = { protocolVersion: "2025-11-25", urlElicitation: true };
  const a = await c.requireConnection(userToken, peer, { provider: "demo-files" });
  assert.equal(a.ready, true);
  assert.equal(a.elicitRequest, undefined);

  const hangAfterMint: typeof fetch = async (u, init) => {
    if (String(u).endsWith("/v1/elicitations")) return json(200, minted());
    return new Promise((_, reject) => init?.signal?.addEventListener("abort", () => reject(init.signal?.reason)));
  };
  c = new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch: hangAfterMint, retryWaitMs: 50 });
  const b = await c.requireConnection(userToken, { protocolVersion: "2025-11-25", urlElicitation: false }, { provider: "demo-files" });
  assert.equal(b.ready, false);
  assert.match(b.fallback!.content[0]!.text, /https:\/\/connect\.example\.com\/c\/elic123/);

  // Ended otherwise (declined) while waiting: a new link.
  ({ fetch } = scriptedFetch([() => json(200, minted()), () => json(200, { ...done, status: "declined" }), () => json(201, minted({ elicitation_id: "new" }))]));
  c = new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch });
  const d = await c.requireConnection(userToken, peer, { provider: "demo-files" });
  assert.equal(d.elicitation.id, "new");
  assert.equal(d.elicitation.again, false);
});

test("cancel ends a pending elicitation with DELETE", async () => {
  const st = { elicitation_id: "e1", status: "declined", reason: "client_declined", provider: "p", expires_at: "2026-03-04T05:06:07Z" };
  const { fetch, calls } = scriptedFetch([() => json(200, st)]);
  const c = new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch });
  const got = await c.cancel(userToken, "e1");
  assert.equal(got.status, "declined");
  assert.equal(got.reason, "client_declined");
  assert.equal(calls[0]!.method, "DELETE");
  assert.equal(calls[0]!.url, "https://connect.example.com/v1/elicitations/e1");
  await assert.rejects(c.cancel(userToken, ""), TypeError);
});

test("every error code docs/openapi.yaml lists maps to a family (or is generic)", async () => {
  const { readFileSync } = await import("node:fs");
  const { fileURLToPath } = await import("node:url");
  const spec = readFileSync(fileURLToPath(new URL("../../../../docs/openapi.yaml", import.meta.url)), "utf8");
  const m = /error:\n\s+type: string\n[\s\S]*?enum: \[([^\]]+)\]/.exec(spec);
  assert.ok(m, "no error enum in docs/openapi.yaml");
  const codes = (m[1] ?? "").split(",").map((s) => s.trim());
  assert.ok(codes.length >= 20, `only ${codes.length} codes`);
  const generic = ["internal_error", "unsupported_media_type", "cross_origin_request"];
  for (const code of codes) {
    // A 400 status matches no family by itself: only the code can.
    const err = new ConnectdError({ status: 400, code });
    const mapped = Object.values(ErrorFamily).some((f) => err.is(f));
    assert.equal(mapped, !generic.includes(code), `code ${code}`);
  }
});

const workId = "cn_aaaaaaaaaaaaaaaaaaaaaaaaaa";
const homeId = "cn_bbbbbbbbbbbbbbbbbbbbbbbbbb";
const twoAccounts = {
  error: "account_required",
  error_description: "this client may use several of the user's github accounts; name one with account=<id>",
  accounts: [
    { id: workId, display_name: "octocat", label: "work" },
    { id: homeId, display_name: "octo-home" },
  ],
};

test("account_required lists the accounts, and is a choice for the user, not a connection to mint", async () => {
  const { fetch } = scriptedFetch([() => json(409, twoAccounts)]);
  const c = new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch });
  const err = await c.token(userToken, "github").then(
    () => assert.fail("no error"),
    (e: unknown) => e,
  );
  assert.ok(isAccountRequired(err) && !needsConnection(err), String(err));
  const want = [
    { id: workId, displayName: "octocat", label: "work" },
    { id: homeId, displayName: "octo-home" },
  ];
  assert.deepEqual(accountsOf(err), want);
  assert.deepEqual((err as ConnectdError).accounts, want);
  assert.deepEqual(accountsOf(new ConnectdError({ status: 404, code: "not_connected" })), []);
  assert.equal(chooseAccount(new Error("x"), "github"), undefined);

  // The same form and the same text as the Go client's (client.TestAccountRequired).
  const choice = chooseAccount(err, "github")!;
  assert.equal(
    JSON.stringify(choice.form()),
    `{"mode":"form","message":"You have several github accounts this app may use. Which one should it use?",` +
      `"requestedSchema":{"type":"object","properties":{"account":{"type":"string","title":"github account","oneOf":[` +
      `{"const":"${workId}","title":"work (octocat)"},{"const":"${homeId}","title":"octo-home"}]}},` +
      `"required":["account"]}}`,
  );
  assert.equal(
    JSON.stringify(choice.fallback("list_repos")),
    `{"isError":true,"content":[{"type":"text","text":"You have several github accounts this app may use, and it needs to know which one. ` +
      `Ask which, then call list_repos again with account set to its id:\\n- work (octocat): ${workId}\\n` +
      `- octo-home: ${homeId}"}]}`,
  );
  assert.equal(chosenAccount({ account: homeId }), homeId);
  for (const content of [{ account: "" }, { account: 3 }, {}, undefined]) assert.equal(chosenAccount(content), undefined);
});

test("accountToken, unlink, mint and connections name the account", async () => {
  const tokenAnswer = { provider: "github", account: { id: workId, display_name: "octocat" }, kind: "oauth2", access_token: "gho_SECRET" };
  const { fetch, calls } = scriptedFetch([
    () => json(200, tokenAnswer),
    () => json(200, tokenAnswer),
    () =>
      json(200, {
        connections: [
          { provider: "github", id: workId, display_name: "octocat", label: "work", status: "active" },
          { provider: "github", id: homeId, display_name: "octo-home", status: "reauthorization_required", consent_required: true },
        ],
      }),
    () =>
      json(200, {
        provider: "github",
        revoked_at_provider: true,
        revocation: "revoked",
        connections: [
          { id: workId, revoked_at_provider: true, revocation: "revoked" },
          { id: homeId, revoked_at_provider: false, revocation: "not_supported" },
        ],
      }),
    () => json(200, { provider: "github", revoked_at_provider: false, revocation: "skipped" }),
    () => json(201, minted()),
    () => json(201, minted()),
    () => json(404, { error: "not_found" }),
  ]);
  const c = new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch });
  const tok = await c.accountToken(userToken, "github", workId, "repo");
  assert.deepEqual(tok.account, { id: workId, displayName: "octocat" });
  assert.equal(calls[0]!.url, `https://connect.example.com/v1/connections/github/token?scopes=repo&account=${workId}`);
  assert.ok(String(tok).includes(workId) && !JSON.stringify(tok).includes("gho_SECRET"));
  await c.token(userToken, "github");
  assert.equal(calls[1]!.url, "https://connect.example.com/v1/connections/github/token");

  const conns = await c.connections(userToken);
  assert.deepEqual(
    conns.map((x) => [x.id, x.displayName, x.label, x.consentRequired]),
    [
      [workId, "octocat", "work", undefined],
      [homeId, "octo-home", undefined, true],
    ],
  );

  const all = await c.unlink(userToken, "github", { account: AccountAll });
  assert.equal(calls[3]!.url, "https://connect.example.com/v1/connections/github?account=all");
  assert.deepEqual(all.connections, [
    { id: workId, revokedAtProvider: true, revocation: "revoked" },
    { id: homeId, revokedAtProvider: false, revocation: "not_supported" },
  ]);
  const one = await c.unlink(userToken, "github");
  assert.equal(calls[4]!.url, "https://connect.example.com/v1/connections/github");
  assert.deepEqual(one.connections, []);

  await c.mint(userToken, { provider: "github", account: workId });
  await c.mint(userToken, { provider: "github", account: AccountNew });
  assert.deepEqual(JSON.parse(calls[5]!.body!), { provider: "github", account: workId });
  assert.deepEqual(JSON.parse(calls[6]!.body!), { provider: "github", account: "new" });

  await assert.rejects(c.accountToken(userToken, "github", "cn_cccccccccccccccccccccccccc"), (e) => e instanceof ConnectdError && e.is(ErrorFamily.NotFound) && !needsConnection(e));
});

test("a 2026-07-28 connect request minted for one account is keyed with it", async () => {
  const peer = { protocolVersion: "2026-07-28", urlElicitation: true };
  for (const [account, k] of [
    [workId, `connect-demo-files:${workId}`],
    [AccountNew, "connect-demo-files"],
    [undefined, "connect-demo-files"],
  ] as const) {
    const { fetch } = scriptedFetch([() => json(201, minted())]);
    const c = new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch });
    const a = await c.requireConnection(userToken, peer, account ? { provider: "demo-files", account } : { provider: "demo-files" });
    assert.equal(a.inputKey, k);
    assert.ok(a.result!.inputRequests[k]);
    assert.equal(keyAccount("demo-files", k), account === workId ? workId : "");
  }
  for (const k of [`connect-gitlab:${workId}`, "connect-demo-files:", "account-demo-files", "connect-demo-filesx"]) {
    assert.equal(keyAccount("demo-files", k), undefined, k);
  }
});
