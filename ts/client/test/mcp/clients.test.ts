// The official TypeScript MCP clients against an example MCP server (the Go
// one or the TypeScript one) on a real connectd, through the real browser
// flow: SDK v2's Client (@modelcontextprotocol/client) on 2026-07-28 and SDK
// v1's (@modelcontextprotocol/sdk) on 2025-11-25. Run by e2e/typescript_test.go
// (TestOfficialTypeScriptClients), which passes MCP_URL, an MCP access token
// for it per user (TOKEN_V2, TOKEN_V1: two users, so that each test starts
// unconnected) and CONTROL_URL, whose POST /complete makes the Go test's
// browser open a connect link as a user and allow.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Client, StreamableHTTPClientTransport, type FetchLike } from "@modelcontextprotocol/client";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as TransportV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, ElicitationCompleteNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: these tests run from go test ./e2e (TestOfficialTypeScriptClients)`);
  return v;
}

const mcpURL = new URL(need("MCP_URL"));

/** The user opens the link in the (Go test's) browser, signs in and allows. */
async function complete(url: string, user: string): Promise<void> {
  const r = await fetch(new URL("/complete", need("CONTROL_URL")), { method: "POST", body: JSON.stringify({ url, user }) });
  assert.equal(r.status, 204, `completing ${url} as ${user}: ${await r.text()}`);
}

/** A fetch that adds the bearer token and records every body sent and received. */
function recording(token: string): { fetch: FetchLike; wire: string[] } {
  const wire: string[] = [];
  const f: FetchLike = async (url, init) => {
    const headers = new Headers(init?.headers);
    headers.set("Authorization", `Bearer ${token}`);
    if (typeof init?.body === "string") wire.push(`>>> ${init.body}`);
    const resp = await fetch(url, { ...init, headers });
    if (!resp.body) return resp;
    // Tee the body: one branch for the wire, one for the SDK.
    const [a, b] = resp.body.tee();
    // A stream the client closes (the SSE one) ends with an abort: what came is kept.
    void new Response(a).text().then((t) => wire.push(`<<< ${t}`), () => {});
    return new Response(b, { status: resp.status, statusText: resp.statusText, headers: resp.headers });
  };
  return { fetch: f, wire };
}

function text(res: object): string {
  return ((("content" in res ? res.content : undefined) ?? []) as { type: string; text?: string }[]).map((c) => c.text ?? "").join("\n");
}

test("SDK v2 client, 2026-07-28: InputRequiredResult, the browser, the retry answers the files", async () => {
  const { fetch, wire } = recording(need("TOKEN_V2"));
  const c = new Client(
    { name: "e2e-v2", version: "1" },
    { versionNegotiation: { mode: { pin: "2026-07-28" } }, capabilities: { elicitation: { url: {} } } },
  );
  const opened: Record<string, unknown>[] = [];
  const browsed: Promise<void>[] = [];
  c.setRequestHandler("elicitation/create", async (req) => {
    const p = req.params as Record<string, unknown>;
    opened.push(p);
    // The user consents to open the link; the browser does the rest while the retry is held.
    if (p.mode === "url") browsed.push(complete(String(p.url), need("USER_V2")));
    return { action: "accept" };
  });
  await c.connect(new StreamableHTTPClientTransport(mcpURL, { fetch }));
  assert.equal(c.getProtocolEra(), "modern");
  const res = await c.callTool({ name: "list_files", arguments: {} });
  await Promise.all(browsed);
  assert.ok(!res.isError, text(res));
  assert.match(text(res), /notes\.txt.*plan\.md|plan\.md.*notes\.txt/);
  assert.equal(opened.length, 1);
  assert.equal(opened[0]!.mode, "url");
  assert.match(String(opened[0]!.url), /\/c\/[A-Za-z0-9_-]+$/);
  assert.equal(opened[0]!.elicitationId, undefined, "no elicitationId on 2026-07-28");

  // Connected now: the next call answers at once.
  const again = await c.callTool({ name: "list_files", arguments: {} });
  assert.ok(!again.isError, text(again));
  assert.equal(opened.length, 1, "asked to connect again");
  await c.close();

  const all = wire.join("\n");
  assert.match(all, /"resultType":"input_required"/);
  assert.match(all, /"requestState":"rs1\./);
  assert.match(all, /"inputResponses":\{"connect-[^"]+":\{"action":"accept"\}\}/);
  for (const never of ['"method":"initialize"', '"elicitationId"', "-32042", '"content":null', "notifications/elicitation/complete"]) {
    assert.ok(!all.includes(never), `the 2026-07-28 wire carries ${never}`);
  }
  for (const line of wire.filter((l) => l.startsWith("<<<") && l.includes('"input_required"'))) {
    assert.ok(!line.includes('"content"'), `an input_required result carries content: ${line}`);
  }
});

test("SDK v1 client, 2025-11-25: elicitation/create within the call, the completion notification, the files", async () => {
  const { fetch, wire } = recording(need("TOKEN_V1"));
  const c = new ClientV1({ name: "e2e-v1", version: "1" }, { capabilities: { elicitation: { url: {} } } });
  const opened: Record<string, unknown>[] = [];
  const browsed: Promise<void>[] = [];
  const completed: string[] = [];
  c.setRequestHandler(ElicitRequestSchema, async (req) => {
    const p = req.params as Record<string, unknown>;
    opened.push(p);
    if (p.mode === "url") browsed.push(complete(String(p.url), need("USER_V1")));
    return { action: "accept" };
  });
  c.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => {
    completed.push(n.params.elicitationId);
  });
  await c.connect(new TransportV1(mcpURL, { fetch }));
  assert.equal(c.getServerVersion()?.name?.startsWith("connectd-example-files"), true);
  const res = await c.callTool({ name: "list_files", arguments: {} });
  await Promise.all(browsed);
  assert.ok(!res.isError, text(res));
  assert.match(text(res), /notes\.txt/);
  assert.equal(opened.length, 1);
  const id = String(opened[0]!.elicitationId);
  assert.equal(opened[0]!.mode, "url");
  assert.ok(id && String(opened[0]!.url).endsWith(`/c/${id}`), JSON.stringify(opened[0]));
  assert.deepEqual(completed, [id]);
  await c.close();
  const all = wire.join("\n");
  assert.match(all, /"protocolVersion":"2025-11-25"/);
  assert.ok(!all.includes('"resultType":"input_required"'), "InputRequiredResult on a 2025-11-25 session");
});
