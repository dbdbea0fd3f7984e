// @connectd/client/mcp-sdk-v2 against the official SDK v2: a real McpServer
// behind createMcpHandler and a real v2 Client (protocol 2026-07-28), joined
// in-process through the handler's fetch. connectd is scripted here; the Go
// e2e tests run the same helpers against a real one.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ConnectdClient, ProtocolVersion20260728, inputKey, type Peer } from "@connectd/client";
import { accountFormResult, chosenAccountOf, fallbackToolResult, inputRequiredResult, peerOf, retryOf, toInputRequired } from "@connectd/client/mcp-sdk-v2";
import { Client, StreamableHTTPClientTransport, type ClientCapabilities } from "@modelcontextprotocol/client";
import { createMcpHandler, McpServer, type CallToolResult, type InputRequiredResult } from "@modelcontextprotocol/server";
import { z } from "zod";
import { json, key, minted, scriptedFetch, userToken } from "./helpers.js";

interface Seen {
  peers: Peer[];
  retries: (ReturnType<typeof retryOf> | undefined)[];
}

/** A server whose list_files mints at a scripted connectd, then answers a retry with the files. */
function world(connectd: ConnectdClient): { fetch: typeof fetch; wire: string[]; seen: Seen } {
  const seen: Seen = { peers: [], retries: [] };
  const handler = createMcpHandler(
    () => {
      const server = new McpServer({ name: "t", version: "1" });
      server.registerTool("list_files", { inputSchema: z.object({}) }, async (_args, ctx): Promise<CallToolResult | InputRequiredResult> => {
        const peer = peerOf(ctx);
        const retry = retryOf(ctx, "demo-files");
        seen.peers.push(peer);
        seen.retries.push(retry);
        if (retry) return { content: [{ type: "text", text: "2 files" }] };
        const ans = await connectd.requireConnection(userToken, peer, { provider: "demo-files" });
        return ans.fallback ? fallbackToolResult(ans) : inputRequiredResult(ans);
      });
      return server;
    },
    { legacy: "reject" },
  );
  const wire: string[] = [];
  const f = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const req = new Request(input, init);
    wire.push(`>>> ${await req.clone().text()}`);
    const resp = await handler.fetch(req);
    wire.push(`<<< ${await resp.clone().text()}`);
    return resp;
  };
  return { fetch: f as typeof fetch, wire, seen };
}

function connectd(): ConnectdClient {
  const mint = () => json(201, minted());
  return new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch: scriptedFetch([mint, mint]).fetch });
}

async function client(fetch: typeof globalThis.fetch, elicitation: NonNullable<ClientCapabilities["elicitation"]>, opened: string[]): Promise<Client> {
  const c = new Client({ name: "t", version: "1" }, { versionNegotiation: { mode: { pin: ProtocolVersion20260728 } }, capabilities: { elicitation } });
  c.setRequestHandler("elicitation/create", async (req) => {
    opened.push(JSON.stringify(req.params));
    return { action: "accept" };
  });
  await c.connect(new StreamableHTTPClientTransport(new URL("http://mcp.test/mcp"), { fetch }));
  return c;
}

test("2026-07-28 with SDK v2: input_required the SDK's way, capabilities from _meta, the retry's requestState", async () => {
  const w = world(connectd());
  const opened: string[] = [];
  const c = await client(w.fetch, { url: {} }, opened);
  const res = await c.callTool({ name: "list_files", arguments: {} });
  await c.close();
  assert.deepEqual(res.content, [{ type: "text", text: "2 files" }]);

  assert.deepEqual(w.seen.peers[0], { protocolVersion: "2026-07-28", urlElicitation: true, formElicitation: false });
  assert.equal(w.seen.retries[0], undefined);
  assert.deepEqual(w.seen.retries[1], { requestState: "rs1.abc", key: inputKey("demo-files"), account: "", action: "accept" });
  assert.equal(opened.length, 1);
  const p = JSON.parse(opened[0]!) as Record<string, unknown>;
  assert.equal(p.mode, "url");
  assert.equal(p.url, "https://connect.example.com/c/elic123");
  assert.equal(p.elicitationId, undefined, "no elicitationId on 2026-07-28");

  const wire = w.wire.join("\n");
  assert.match(wire, /"resultType":"input_required"/);
  assert.match(wire, /"requestState":"rs1\.abc"/);
  assert.match(wire, /"inputResponses":\{"connect-demo-files":\{"action":"accept"\}\}/);
  for (const never of ['"elicitationId"', "-32042", '"content":null', "notifications/elicitation/complete", '"method":"initialize"']) {
    assert.ok(!wire.includes(never), `the 2026-07-28 wire carries ${never}`);
  }
  const ir = w.wire.find((l) => l.startsWith("<<<") && l.includes("input_required"))!;
  assert.ok(!/"content"/.test(ir), `an input_required result has no content: ${ir}`);
});

test("2026-07-28 with SDK v2: a client declaring form mode only gets the fallback, never a URL request", async () => {
  const w = world(connectd());
  const opened: string[] = [];
  const c = await client(w.fetch, {}, opened);
  const res = await c.callTool({ name: "list_files", arguments: {} });
  await c.close();
  assert.equal(res.isError, true);
  assert.match((res.content as { text: string }[])[0]!.text, /Open it in your browser:\nhttps:\/\/connect\.example\.com\/c\/elic123/);
  assert.deepEqual(w.seen.peers[0], { protocolVersion: "2026-07-28", urlElicitation: false, formElicitation: true });
  assert.equal(opened.length, 0);
  const wire = w.wire.join("\n");
  for (const never of ['"inputRequests"', '"mode":"url"', "-32042"]) assert.ok(!wire.includes(never), `wire carries ${never}`);
});

test("toInputRequired, accountFormResult and chosenAccountOf keep connectd's shapes", () => {
  const r = toInputRequired({
    resultType: "input_required",
    requestState: "rs1.x",
    inputRequests: { k: { method: "elicitation/create", params: { mode: "url", url: "https://c/c/1", message: "m", elicitationId: "1" } } },
  });
  assert.deepEqual(JSON.parse(JSON.stringify(r)), {
    resultType: "input_required",
    requestState: "rs1.x",
    inputRequests: { k: { method: "elicitation/create", params: { mode: "url", url: "https://c/c/1", message: "m" } } },
  });
  const f = accountFormResult("demo-files", {
    mode: "form",
    message: "Which?",
    requestedSchema: { type: "object", properties: { account: { type: "string", oneOf: [{ const: "cn_1", title: "work" }] } }, required: ["account"] },
  });
  assert.equal(f.inputRequests?.["account-demo-files"]?.method, "elicitation/create");
  const ctx = (responses: Record<string, unknown>) => ({ mcpReq: { inputResponses: responses, requestState: () => undefined } });
  assert.equal(chosenAccountOf(ctx({}), "demo-files"), undefined);
  assert.equal(chosenAccountOf(ctx({ "account-demo-files": { action: "accept", content: { account: "cn_1" } } }), "demo-files"), "cn_1");
  assert.equal(chosenAccountOf(ctx({ "account-demo-files": { action: "decline" } }), "demo-files"), "");
});
