// Per-request approval (issue 36) with the official TypeScript MCP clients
// against an example MCP server (the Go one or the TypeScript one) on a real
// connectd whose request rules ask before an issue is opened: SDK v2's Client
// on 2026-07-28 and SDK v1's on 2025-11-25. Run by e2e/approval_test.go
// (TestApprovalOfficialTypeScriptClients), which passes MCP_URL, a token per
// user (TOKEN_V2, TOKEN_V1) and CONTROL_URL: POST /complete connects a link
// as a user, POST /decide answers an approval page ("once" or "deny"), GET
// /posts counts the POSTs that reached the provider.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Client, StreamableHTTPClientTransport, type FetchLike } from "@modelcontextprotocol/client";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as TransportV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, ElicitationCompleteNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: these tests run from go test ./e2e (TestApprovalOfficialTypeScriptClients)`);
  return v;
}

const mcpURL = new URL(need("MCP_URL"));
const repo = need("ISSUE_REPO");
const deniedText = need("DENIED_TEXT");

async function control(path: string, body: Record<string, string>): Promise<void> {
  const r = await fetch(new URL(path, need("CONTROL_URL")), { method: "POST", body: JSON.stringify(body) });
  assert.equal(r.status, 204, `${path} ${JSON.stringify(body)}: ${await r.text()}`);
}

async function posts(): Promise<number> {
  const r = await fetch(new URL("/posts", need("CONTROL_URL")));
  return ((await r.json()) as { posts: number }).posts;
}

function withToken(token: string): FetchLike {
  return (url, init) => {
    const headers = new Headers(init?.headers);
    headers.set("Authorization", `Bearer ${token}`);
    return fetch(url, { ...init, headers });
  };
}

function text(res: object): string {
  return ((("content" in res ? res.content : undefined) ?? []) as { type: string; text?: string }[]).map((c) => c.text ?? "").join("\n");
}

/**
 * The user's browser: the next link shown is connected, or decided on
 * (decide), in the background; settled waits for it.
 */
class User {
  readonly opened: Record<string, unknown>[] = [];
  #next: string[] = [];
  #pending: Promise<void>[] = [];
  readonly #seen = new Set<string>();
  constructor(readonly name: string) {}
  decide(d: "once" | "deny"): void {
    this.#next.push(d);
  }
  show(p: Record<string, unknown>): void {
    this.opened.push(p);
    const url = String(p.url);
    // The same link again (a retry while the user is still on the page): already being handled.
    if (p.mode !== "url" || this.#seen.has(url)) return;
    this.#seen.add(url);
    const d = this.#next.shift();
    this.#pending.push(d ? control("/decide", { url, user: this.name, decision: d }) : control("/complete", { url, user: this.name }));
  }
  async settled(): Promise<void> {
    const all = this.#pending;
    this.#pending = [];
    await Promise.all(all);
  }
}

/** Connect, approve one open_issue, deny another: through call, the MCP client's tools/call. */
async function scenario(user: User, call: (name: string, args: Record<string, unknown>) => Promise<object>): Promise<void> {
  const files = await call("list_files", {});
  await user.settled();
  assert.ok(!("isError" in files && files.isError), text(files));

  const before = await posts();
  user.decide("once");
  const opened = await call("open_issue", { repo, title: "Ship the plan" });
  await user.settled();
  assert.ok(!("isError" in opened && opened.isError), text(opened));
  assert.match(text(opened), new RegExp(`^Opened the issue in ${repo}`));
  assert.equal(await posts(), before + 1, "the approved POST reaches the provider exactly once");
  const approval = user.opened.at(-1)!;
  assert.equal(approval.mode, "url");

  user.decide("deny");
  const denied = await call("open_issue", { repo, title: "Delete the plan" });
  await user.settled();
  assert.ok("isError" in denied && denied.isError, text(denied));
  assert.ok(text(denied).startsWith(deniedText), text(denied));
  assert.equal(await posts(), before + 1, "a denied POST never reaches the provider");
}

test("SDK v2 client, 2026-07-28: approval as InputRequiredResult, approved once, then denied", async () => {
  const user = new User(need("USER_V2"));
  const c = new Client(
    { name: "e2e-v2", version: "1" },
    { versionNegotiation: { mode: { pin: "2026-07-28" } }, capabilities: { elicitation: { url: {} } } },
  );
  c.setRequestHandler("elicitation/create", async (req) => {
    user.show(req.params as Record<string, unknown>);
    return { action: "accept" };
  });
  await c.connect(new StreamableHTTPClientTransport(mcpURL, { fetch: withToken(need("TOKEN_V2")) }));
  assert.equal(c.getProtocolEra(), "modern");
  await scenario(user, (name, args) => c.callTool({ name, arguments: args }));
  assert.equal(user.opened[1]!.elicitationId, undefined, "no elicitationId on 2026-07-28");
  await c.close();
});

test("SDK v1 client, 2025-11-25: approval as elicitation/create within the call, approved once, then denied", async () => {
  const user = new User(need("USER_V1"));
  const completed: string[] = [];
  const c = new ClientV1({ name: "e2e-v1", version: "1" }, { capabilities: { elicitation: { url: {} } } });
  c.setRequestHandler(ElicitRequestSchema, async (req) => {
    user.show(req.params as Record<string, unknown>);
    return { action: "accept" };
  });
  c.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => {
    completed.push(n.params.elicitationId);
  });
  await c.connect(new TransportV1(mcpURL, { fetch: withToken(need("TOKEN_V1")) }));
  await scenario(user, (name, args) => c.callTool({ name, arguments: args }));
  const approvalId = String(user.opened[1]!.elicitationId);
  assert.ok(approvalId !== "undefined" && approvalId !== "", JSON.stringify(user.opened[1]));
  assert.ok(completed.includes(approvalId), `no notifications/elicitation/complete for the approval: ${completed.join(",")}`);
  await c.close();
});
