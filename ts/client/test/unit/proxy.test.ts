import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import {
  AccountHeader,
  ConnectdClient,
  ConnectdError,
  ErrorFamily,
  RequestIDHeader,
  accountsOf,
  connectdErrorOf,
  isRateLimited,
  needsConnection,
} from "@connectd/client";
import type { ProviderFetch } from "@connectd/client";
import { json, key, scriptedFetch, userToken } from "./helpers.js";
import type { Recorded } from "./helpers.js";

/** connectd's error envelope for the recorded request (its request id). */
function envelope(rec: Recorded, status: number, body: Record<string, unknown>, headers: Record<string, string> = {}): Response {
  return json(status, { ...body, request_id: rec.headers.get(RequestIDHeader) }, headers);
}

/** Shaped as a provider SDK is (Octokit's request): a base URL, a fetch, its own credential and headers, JSON. */
class RepoSDK {
  constructor(
    readonly baseUrl: string,
    readonly fetch: ProviderFetch,
  ) {}
  async request(method: string, path: string, body?: unknown): Promise<{ status: number; data: unknown }> {
    const headers: Record<string, string> = {
      authorization: "token gho_sdk_own_token",
      accept: "application/vnd.github+json",
      "user-agent": "repo-sdk/1.0",
    };
    if (body !== undefined) headers["content-type"] = "application/json; charset=utf-8";
    try {
      const resp = await this.fetch(new URL(path, this.baseUrl).href, {
        method,
        headers,
        body: body === undefined ? null : JSON.stringify(body),
      });
      const text = await resp.text();
      const data = text ? JSON.parse(text) : undefined;
      if (resp.status >= 400) throw Object.assign(new Error(`sdk: ${resp.status}`), { status: resp.status, data });
      return { status: resp.status, data };
    } catch (err) {
      if (err instanceof Error && err.message.startsWith("sdk:")) throw err;
      // As Octokit: a failed fetch becomes the SDK's own error, with the cause.
      throw Object.assign(new Error(`sdk: request failed`, { cause: err }), { status: 500 });
    }
  }
}

function client(f: typeof fetch, baseUrl = "https://connect.example.com"): ConnectdClient {
  return new ConnectdClient({ baseUrl, key, fetch: f });
}

test("providerFetch: an SDK's GET and POST reach connectd's proxy with the client key, the user token and the account, not the SDK's credential", async () => {
  const { fetch, calls } = scriptedFetch([
    () => json(200, [{ id: 1, name: "a" }], { Link: '<https://api.github.com/user/repos?page=2>; rel="next"' }),
    () => json(201, { id: 3, name: "new-repo" }),
  ]);
  const inits: RequestInit[] = [];
  const spy = ((input: string | URL | Request, init?: RequestInit) => {
    inits.push(init ?? {});
    return fetch(input, init);
  }) as typeof fetch;
  const sdk = new RepoSDK("https://api.github.com/", client(spy).providerFetch(userToken, "github", { account: "cn_work" }));

  const list = await sdk.request("GET", "user/repos?per_page=10&sort=updated");
  assert.deepEqual(list, { status: 200, data: [{ id: 1, name: "a" }] });
  const created = await sdk.request("POST", "user/repos", { name: "new-repo", private: true });
  assert.deepEqual(created, { status: 201, data: { id: 3, name: "new-repo" } });

  assert.equal(calls[0]!.url, "https://connect.example.com/v1/proxy/github/user/repos?per_page=10&sort=updated");
  assert.equal(calls[0]!.method, "GET");
  assert.equal(calls[1]!.url, "https://connect.example.com/v1/proxy/github/user/repos");
  assert.equal(calls[1]!.method, "POST");
  assert.equal(calls[1]!.body, '{"name":"new-repo","private":true}');
  assert.equal(calls[1]!.headers.get("content-type"), "application/json; charset=utf-8");
  const ids = new Set<string | null>();
  for (const c of calls) {
    assert.equal(c.headers.get("authorization"), `Bearer ${key}`);
    assert.equal(c.headers.get("x-user-token"), userToken);
    assert.equal(c.headers.get(AccountHeader), "cn_work");
    assert.equal(c.headers.get("accept"), "application/vnd.github+json");
    assert.equal(c.headers.get("user-agent"), "repo-sdk/1.0");
    for (const [k, v] of c.headers) assert.ok(!v.includes("gho_sdk_own_token"), `the SDK's credential crossed in ${k}`);
    ids.add(c.headers.get(RequestIDHeader));
  }
  assert.equal(ids.size, 2, "a fresh request id per call");
  assert.ok(!ids.has(null));
  for (const i of inits) assert.equal(i.redirect, "manual", "fetch must never follow a redirect itself");
});

test("providerFetch maps paths: any origin, escapes kept, connectd's prefix, the SDK's prefix stripped", async () => {
  const answers = () => json(200, {});
  const { fetch, calls } = scriptedFetch(Array.from({ length: 8 }, () => answers));
  const c = client(fetch, "https://example.com/connectd/");
  const gh = c.providerFetch(userToken, "github");
  const gl = c.providerFetch(userToken, "gitlab", { pathPrefix: "/api/v4/" });
  const cases: [ProviderFetch, string | URL | Request, string][] = [
    [gh, "https://api.github.com/user", "https://example.com/connectd/v1/proxy/github/user"],
    [gh, "https://api.github.com", "https://example.com/connectd/v1/proxy/github/"],
    [gh, new URL("http://127.0.0.1:1/user?x=1"), "https://example.com/connectd/v1/proxy/github/user?x=1"],
    [gh, "https://api.github.com/repos/a%2Fb/issues?q=a%20b", "https://example.com/connectd/v1/proxy/github/repos/a%2Fb/issues?q=a%20b"],
    [gl, "https://gitlab.com/api/v4/projects/g%2Fp/issues", "https://example.com/connectd/v1/proxy/gitlab/projects/g%2Fp/issues"],
    [gl, "https://gitlab.com/api/v4", "https://example.com/connectd/v1/proxy/gitlab/"],
  ];
  for (const [f, input, want] of cases) {
    await f(input);
    assert.equal(calls.at(-1)!.url, want, String(input));
  }

  // A Request, with its own headers and (streamed) body.
  const seen: { url: string; init: RequestInit & { duplex?: string } }[] = [];
  const rf = client(((u: string, init: RequestInit) => {
    seen.push({ url: u, init });
    return Promise.resolve(json(200, {}));
  }) as unknown as typeof fetch).providerFetch(userToken, "github");
  await rf(new Request("https://api.github.com/gists", { method: "POST", body: '{"a":1}', headers: { "X-Custom": "kept", Authorization: "token x" } }));
  const r = seen[0]!;
  assert.equal(r.url, "https://connect.example.com/v1/proxy/github/gists");
  assert.equal(r.init.method, "POST");
  assert.equal(r.init.duplex, "half");
  const h = new Headers(r.init.headers);
  assert.equal(h.get("x-custom"), "kept");
  assert.equal(h.get("authorization"), `Bearer ${key}`);
  assert.equal(await new Response(r.init.body).text(), '{"a":1}');

  const n = calls.length;
  for (const u of ["https://gitlab.com/oauth/token", "https://gitlab.com/api/v40/user"]) {
    await assert.rejects(gl(u), (err: unknown) => err instanceof TypeError && /not below \/api\/v4/.test(err.message), u);
  }
  await assert.rejects(c.providerFetch("", "github")("https://api.github.com/user"), (err: unknown) =>
    err instanceof ConnectdError && err.is(ErrorFamily.UserToken),
  );
  await assert.rejects(c.providerFetch(userToken, "")("https://api.github.com/user"), TypeError);
  assert.equal(calls.length, n, "a refused request was sent");
});

test("providerFetch: connectd's refusals (its envelope naming the request's id) are thrown; the provider's own errors come back untouched", async () => {
  const big = JSON.stringify({ error: "not_connected", pad: "x".repeat(70 << 10) });
  const routes: Record<string, (rec: Recorded) => Response> = {
    "not-connected": (r) => envelope(r, 403, { error: "not_connected", error_description: "connect github first" }),
    accounts: (r) => envelope(r, 409, { error: "account_required", accounts: [{ id: "cn_1", display_name: "octo" }, { id: "cn_2", display_name: "work" }] }),
    held: (r) => envelope(r, 429, { error: "provider_rate_limited" }, { "Retry-After": "7" }),
    refused: (r) => envelope(r, 401, { error: "provider_unauthorized" }),
    "replaced-id": () => json(503, { error: "provider_unavailable", request_id: "0123abcd" }, { [RequestIDHeader]: "0123abcd" }),
    "provider-lookalike": () => json(404, { error: "not_connected", error_description: "the provider's own" }),
    "provider-own-id": () => json(404, { error: "not_found", request_id: "provider-req-1" }),
    "provider-github": () => json(404, { message: "Not Found", documentation_url: "https://docs.github.com" }),
    "provider-google": () => json(400, { error: { code: 400, message: "bad" } }),
    "provider-text": (r) =>
      new Response(JSON.stringify({ error: "invalid_request", request_id: r.headers.get(RequestIDHeader) }), {
        status: 400,
        headers: { "Content-Type": "text/plain" },
      }),
    "provider-big": () => new Response(big, { status: 400, headers: { "Content-Type": "application/json" } }),
    "ok-lookalike": (r) => envelope(r, 200, { error: "none" }),
  };
  const f = (async (input: string | URL | Request, init?: RequestInit) => {
    const rec: Recorded = { url: String(input), method: init?.method ?? "GET", headers: new Headers(init?.headers), body: null };
    const route = new URL(rec.url).pathname.replace("/v1/proxy/github/", "");
    return routes[route]!(rec);
  }) as typeof fetch;
  const sdk = new RepoSDK("https://api.github.com/", client(f).providerFetch(userToken, "github"));

  const refused: [string, number, string, ErrorFamily][] = [
    ["not-connected", 403, "not_connected", ErrorFamily.NotConnected],
    ["accounts", 409, "account_required", ErrorFamily.AccountRequired],
    ["held", 429, "provider_rate_limited", ErrorFamily.RateLimited],
    ["refused", 401, "provider_unauthorized", ErrorFamily.ReauthorizationRequired],
    ["replaced-id", 503, "provider_unavailable", ErrorFamily.Unavailable],
  ];
  for (const [path, status, code, family] of refused) {
    // Through the SDK: its own error, connectd's refusal as the cause.
    const err = await sdk.request("GET", path).then(
      () => assert.fail(`${path}: no error`),
      (e: unknown) => e,
    );
    const ce = connectdErrorOf(err);
    assert.ok(ce, `${path}: no ConnectdError in ${String(err)}`);
    assert.equal(ce.status, status, path);
    assert.equal(ce.code, code, path);
    assert.ok(ce.requestId, path);
    assert.ok(ce.is(family), path);
    assert.ok(!String(ce).includes(key) && !String(ce).includes(userToken), `${path}: the error holds a secret`);
  }
  const notConnected = await sdk.request("GET", "not-connected").catch((e: unknown) => e);
  assert.ok(needsConnection(notConnected));
  const accounts = await sdk.request("GET", "accounts").catch((e: unknown) => e);
  assert.deepEqual(
    accountsOf(accounts).map((a) => a.id),
    ["cn_1", "cn_2"],
  );
  const held = await client(f)
    .providerFetch(userToken, "github")("https://api.github.com/held")
    .catch((e: unknown) => e);
  assert.ok(held instanceof ConnectdError && isRateLimited(held) && held.retryAfterMs === 7000);

  const passed: [string, number, string][] = [
    ["provider-lookalike", 404, "the provider's own"],
    ["provider-own-id", 404, "provider-req-1"],
    ["provider-github", 404, "Not Found"],
    ["provider-google", 400, "bad"],
    ["provider-text", 400, "invalid_request"],
  ];
  for (const [path, status, text] of passed) {
    const err = (await sdk.request("GET", path).catch((e: unknown) => e)) as { status?: number; data?: unknown };
    assert.equal(connectdErrorOf(err), undefined, `${path}: the provider's answer was taken for connectd's`);
    assert.equal(err.status, status, path);
    assert.ok(JSON.stringify(err.data).includes(text), path);
  }
  const resp = await client(f).providerFetch(userToken, "github")("https://api.github.com/provider-big");
  assert.equal(resp.status, 400);
  assert.equal(await resp.text(), big, "a large provider error came back altered");
  const ok = await client(f).providerFetch(userToken, "github")("https://api.github.com/ok-lookalike");
  assert.equal(ok.status, 200, "a 2xx answer is the provider's whatever its body");
});

test("providerFetch: the calls connectd's proxy refuses (another method, an override, a path that is not plain) are sent as made and thrown as InvalidRequest", async () => {
  const forwarded = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];
  const seen: Recorded[] = [];
  // A stand-in for connectd's first checks, enough for these calls.
  const f = (async (input: string | URL | Request, init?: RequestInit) => {
    const rec: Recorded = { url: String(input), method: init?.method ?? "GET", headers: new Headers(init?.headers), body: null };
    seen.push(rec);
    const u = new URL(rec.url);
    if (!forwarded.includes(rec.method)) return envelope(rec, 405, { error: "method_not_allowed" }, { Allow: forwarded.join(", ") });
    if (rec.headers.has("X-HTTP-Method-Override") || u.searchParams.has("_method")) return envelope(rec, 400, { error: "proxy_override_refused" });
    if (u.pathname.includes(";")) return envelope(rec, 400, { error: "invalid_proxy_path" });
    if (u.pathname.endsWith("/provider-405")) return json(405, { message: "Method Not Allowed" }, { Allow: "GET" });
    return json(200, {});
  }) as typeof fetch;
  const pf = client(f).providerFetch(userToken, "github");
  const cases: [string, string, string, RequestInit, number, string][] = [
    ["PROPFIND", "https://api.github.com/user", "PROPFIND", {}, 405, "method_not_allowed"],
    ["lower-case patch", "https://api.github.com/user", "patch", {}, 405, "method_not_allowed"],
    ["override header", "https://api.github.com/user", "POST", { headers: { "X-HTTP-Method-Override": "DELETE" } }, 400, "proxy_override_refused"],
    ["_method parameter", "https://api.github.com/user?_method=DELETE", "POST", {}, 400, "proxy_override_refused"],
    ["path parameter", "https://api.github.com/repos/o/r/..;/x", "GET", {}, 400, "invalid_proxy_path"],
  ];
  for (const [name, url, method, init, status, code] of cases) {
    const n = seen.length;
    const err = await pf(url, { ...init, method }).then(
      () => assert.fail(`${name}: no error`),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ConnectdError, `${name}: ${String(err)}`);
    assert.equal(err.status, status, name);
    assert.equal(err.code, code, name);
    assert.ok(err.is(ErrorFamily.InvalidRequest), `${name}: not InvalidRequest`);
    assert.ok(!needsConnection(err), `${name}: a refused call is no reason to connect`);
    assert.equal(seen.length, n + 1, `${name}: not sent once`);
    assert.equal(seen[n]!.method, method, `${name}: the method was changed`);
  }
  const own = await pf("https://api.github.com/provider-405", { method: "DELETE" });
  assert.equal(own.status, 405, "the provider's own 405 reaches the caller");
});

test("providerFetch keeps a request id the caller set and matches the refusal against it", async () => {
  const { fetch, calls } = scriptedFetch([(r) => envelope(r, 403, { error: "consent_required" })]);
  const err = await client(fetch)
    .providerFetch(userToken, "github")("https://api.github.com/user", { headers: { [RequestIDHeader]: "trace-42" } })
    .catch((e: unknown) => e);
  assert.ok(err instanceof ConnectdError && err.is(ErrorFamily.ConsentRequired) && err.requestId === "trace-42");
  assert.equal(calls[0]!.headers.get(RequestIDHeader), "trace-42");
});

test("providerFetch follows redirects within the API's origin only, through connectd, as redirect asks", async () => {
  const { fetch, calls } = scriptedFetch([
    () => new Response(null, { status: 301, headers: { Location: "https://api.github.com/repositories/7?x=1" } }),
    () => json(200, { id: 7 }),
    () => new Response(null, { status: 303, headers: { Location: "/done" } }),
    () => json(200, { done: true }),
    () => new Response(null, { status: 302, headers: { Location: "https://codeload.github.com/o/r/tar.gz/main" } }),
    () => new Response(null, { status: 301, headers: { Location: "/elsewhere" } }),
    () => new Response(null, { status: 301, headers: { Location: "/elsewhere" } }),
    ...Array.from({ length: 20 }, () => () => new Response(null, { status: 302, headers: { Location: "/loop" } })),
  ]);
  const pf = client(fetch).providerFetch(userToken, "github");

  const r1 = await pf("https://api.github.com/repos/old/name");
  assert.deepEqual(await r1.json(), { id: 7 });
  assert.equal(calls[1]!.url, "https://connect.example.com/v1/proxy/github/repositories/7?x=1");
  assert.equal(calls[1]!.headers.get("authorization"), `Bearer ${key}`);

  const r2 = await pf("https://api.github.com/things", { method: "POST", body: "{}", headers: { "Content-Type": "application/json" } });
  assert.deepEqual(await r2.json(), { done: true });
  assert.equal(calls[3]!.method, "GET");
  assert.equal(calls[3]!.body, null);
  assert.equal(calls[3]!.headers.get("content-type"), null);

  const r3 = await pf("https://api.github.com/repos/o/r/tarball");
  assert.equal(r3.status, 302, "a redirect to another origin is the caller's");
  assert.equal(r3.headers.get("location"), "https://codeload.github.com/o/r/tar.gz/main");

  const r4 = await pf("https://api.github.com/moved", { redirect: "manual" });
  assert.equal(r4.status, 301);
  await assert.rejects(pf("https://api.github.com/moved", { redirect: "error" }), TypeError);
  await assert.rejects(pf("https://api.github.com/loop"), /more than 20 redirects/);
  assert.equal(calls.length, 27);
});

test("providerFetch streams the request body and the answer through the platform's fetch", async () => {
  let firstArrived!: (s: string) => void;
  const gotFirst = new Promise<string>((r) => (firstArrived = r));
  let sendSecond!: () => void;
  const second = new Promise<void>((r) => (sendSecond = r));
  const seen: { url: string; headers: Record<string, string | string[] | undefined> }[] = [];
  const srv = createServer((req, res) => {
    seen.push({ url: req.url ?? "", headers: req.headers });
    if (req.url === "/v1/proxy/demo/upload") {
      let all = "";
      req.setEncoding("utf8");
      req.on("data", (chunk: string) => {
        if (!all) firstArrived(chunk);
        all += chunk;
      });
      req.on("end", () => {
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ got: all }));
      });
      return;
    }
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    res.write("data: one\n\n");
    void second.then(() => res.end("data: two\n\n"));
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  try {
    const port = (srv.address() as AddressInfo).port;
    const pf = new ConnectdClient({ baseUrl: `http://127.0.0.1:${port}`, key }).providerFetch(userToken, "demo");

    let push!: ReadableStreamDefaultController<Uint8Array>;
    const body = new ReadableStream<Uint8Array>({ start: (c) => void (push = c) });
    const enc = new TextEncoder();
    push.enqueue(enc.encode("part one\n"));
    const pending = pf("https://files.example.com/upload", { method: "POST", body, duplex: "half" } as RequestInit);
    assert.equal(await gotFirst, "part one\n", "the first part arrives before the body is complete");
    push.enqueue(enc.encode("part two"));
    push.close();
    const up = await pending;
    assert.deepEqual(await up.json(), { got: "part one\npart two" });

    const resp = await pf("https://files.example.com/events");
    const reader = resp.body!.getReader();
    const first = await reader.read();
    assert.equal(new TextDecoder().decode(first.value), "data: one\n\n", "the first event arrives before the answer is complete");
    sendSecond();
    let rest = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    assert.equal(rest, "data: two\n\n");
    assert.equal(seen[0]!.headers.authorization, `Bearer ${key}`);
    assert.equal(seen[0]!.headers["x-user-token"], userToken);
  } finally {
    srv.closeAllConnections();
    await new Promise((r) => srv.close(r));
  }
});

test("providerFetch passes the caller's abort through", async () => {
  const f = ((_u: string, init: RequestInit) =>
    new Promise((_, reject) => init.signal!.addEventListener("abort", () => reject(init.signal!.reason)))) as unknown as typeof fetch;
  const ac = new AbortController();
  const p = client(f).providerFetch(userToken, "github")("https://api.github.com/user", { signal: ac.signal });
  ac.abort(new Error("stop"));
  await assert.rejects(p, /stop/);
});
