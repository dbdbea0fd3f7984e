import assert from "node:assert/strict";
import { test } from "node:test";
import {
  ConnectdClient,
  Generation,
  URLElicitationUnsupportedError,
  answerFor,
  canOpenURL,
  fallbackResult,
  generationOf,
  inputKey,
  requestDigest,
  toolResultText,
  type Elicitation,
} from "@connectd/client";
import {
  elicitInputParams,
  elicitationComplete,
  fallbackToolResult,
  inputRequiredResult,
  peerOf,
  toUrlElicitationRequiredError,
} from "@connectd/client/mcp-sdk";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { ErrorCode } from "@modelcontextprotocol/sdk/types.js";
import { json, key, minted, scriptedFetch, userToken } from "./helpers.js";

async function elicitation(): Promise<Elicitation> {
  const c = new ConnectdClient({ baseUrl: "https://connect.example.com", key, fetch: scriptedFetch([() => json(201, minted())]).fetch });
  return c.mint(userToken, { provider: "demo-files" });
}

test("generationOf", () => {
  const want: Record<string, Generation> = {
    "2024-11-05": Generation.None,
    "2025-06-18": Generation.None,
    "2025-11-25": Generation.URLElicitation,
    "2026-01-01": Generation.URLElicitation,
    "2026-07-28": Generation.InputRequired,
    "2030-01-01": Generation.InputRequired,
    "": Generation.None,
    "2026-07-28-draft": Generation.None,
    "DRAFT-2026": Generation.None,
    "2026-02-30": Generation.None,
    "2026-13-01": Generation.None,
  };
  for (const [v, g] of Object.entries(want)) assert.equal(generationOf(v), g, v);
  assert.equal(canOpenURL({ protocolVersion: "2025-11-25", urlElicitation: true }), true);
  assert.equal(canOpenURL({ protocolVersion: "2025-11-25", urlElicitation: false }), false);
  assert.equal(canOpenURL({ protocolVersion: "2025-06-18", urlElicitation: true }), false);
});

test("answerFor shapes the elicitation per generation", async () => {
  const e = await elicitation();
  const a = answerFor(e, "2025-11-25");
  assert.equal(a.generation, Generation.URLElicitation);
  assert.deepEqual(a.elicitRequest, { mode: "url", elicitationId: "elic123", url: "https://connect.example.com/c/elic123", message: "Connect your files." });
  assert.equal(a.error?.code, -32042);
  assert.deepEqual(a.error?.data.elicitations, [a.elicitRequest]);
  assert.equal(a.result, undefined);

  const b = answerFor(e, "2026-07-28");
  assert.equal(b.generation, Generation.InputRequired);
  assert.equal(b.inputKey, "connect-demo-files");
  assert.deepEqual(b.result, {
    resultType: "input_required",
    inputRequests: { "connect-demo-files": { method: "elicitation/create", params: { mode: "url", message: "Connect your files.", url: "https://connect.example.com/c/elic123" } } },
    requestState: "rs1.abc",
  });
  assert.equal(answerFor(e, "2026-07-28", "k").inputKey, "k");
  assert.equal(inputKey("github"), "connect-github");
  assert.throws(() => answerFor(e, "2025-06-18"), URLElicitationUnsupportedError);
});

test("fallbackResult is the Go client's text byte for byte", async () => {
  // Vectors from Go's client.FallbackResult.
  const e = await elicitation();
  const at = (iso: string, message: string): Elicitation => ({ ...e, url: "https://connect.example.com/c/abc", expiresAt: new Date(iso), params: { ...e.params, message } });
  assert.equal(
    toolResultText(fallbackResult(at("2026-03-04T05:06:07+01:00", "  Connect it.  "))),
    "Connect it.\n\nThis app cannot open the connect link for you. Open it in your browser:\nhttps://connect.example.com/c/abc\n\nSign in, approve, then try again. The link works only for you, grants nothing by itself, and expires at 04:06 UTC on 4 Mar.",
  );
  const r = fallbackResult(at("2026-12-31T23:59:00Z", ""));
  assert.equal(r.isError, true);
  assert.equal(
    r.content[0]!.text,
    "This needs your demo-files account, which is not connected yet.\n\nThis app cannot open the connect link for you. Open it in your browser:\nhttps://connect.example.com/c/abc\n\nSign in, approve, then try again. The link works only for you, grants nothing by itself, and expires at 23:59 UTC on 31 Dec.",
  );
});

test("requestDigest gives Go's client.RequestDigest values", async () => {
  // Computed with Go: client.RequestDigest(name, v) for v = json.Unmarshal(args).
  const vectors: { name: string; args: unknown; digest: string }[] = [
    { name: "list_files", args: {}, digest: "QZ8Sc6atlrLbTHIj1Z7tXxZUQNRTYPBzJElV-EPyoLw" },
    { name: "list_files", args: { path: "/a", limit: 10 }, digest: "kUDgrBGzzFPJc_hVj-HKSz1A5HrT-jrCvQYF64mq8yM" },
    { name: "x", args: { b: 1, a: 2 }, digest: "m4n6OwsR3fEhs23YleVULHTZia3t4TKJ3dUCHDgwp0E" },
    {
      name: "read_file",
      args: { q: "<script>&amp;</script>", s: "\u2028\u2029", n: null, t: true, f: false, arr: [1, 2.5, -0.000001, 1e21, 1e-7, 123456789012345680000, "é"] },
      digest: "bbrPElKYzNmjC3Wvrx8nOfHLG0tleqhQebL2ahM_Zw4",
    },
    {
      name: "ünï",
      args: { é: 1, z: { y: [{ b: 2, a: 1 }], a: "\t\n\r\b\f\u0001\"\\/" }, "\ue000": 1, "😀": 2, A: 0 },
      digest: "l8EQqctxGJeAoz4hkTnlTVbQzpGAxOnBBJFhRh3MKHs",
    },
    { name: "", args: [], digest: "k9RZP_G91FLtIH4Qi_6HlvXJPvCnzJX7hi2z_C5QmjQ" },
    { name: "t", args: "plain", digest: "W8We7fedTfxHzY7NFE-O9APrI3VudvjaKMMQOaLskdM" },
    { name: "n", args: 3.14159, digest: "AsposICXnuqaOOC39jRWVqRXK33BITqXQVCKfmlSa1g" },
  ];
  for (const v of vectors) assert.equal(await requestDigest(v.name, v.args), v.digest, `${v.name} ${JSON.stringify(v.args)}`);
  assert.equal(await requestDigest("x", { a: 2, b: 1 }), await requestDigest("x", { b: 1, a: 2 }));
  await assert.rejects(requestDigest("x", { n: NaN }), TypeError);
  await assert.rejects(requestDigest("x", () => 1), TypeError);
});

test("reissue hands a pending status back with its fresh requestState", () => {
  const c = new ConnectdClient({ baseUrl: "https://connect.example.com/prefix/", key });
  const st = { id: "e1", status: "pending" as const, provider: "github", scopes: [], expiresAt: new Date(), requestState: "rs1.fresh" };
  assert.deepEqual(c.reissue(st, "Still waiting"), {
    resultType: "input_required",
    requestState: "rs1.fresh",
    inputRequests: { "connect-github": { method: "elicitation/create", params: { mode: "url", url: "https://connect.example.com/prefix/c/e1", message: "Still waiting" } } },
  });
  assert.throws(() => c.reissue({ ...st, status: "completed" }, "m"), TypeError);
  assert.throws(() => c.reissue({ ...st, requestState: undefined }, "m"), TypeError);
});

test("mcp-sdk helpers give the SDK's shapes", async () => {
  const e = await elicitation();
  const a = answerFor(e, "2025-11-25");
  const err = toUrlElicitationRequiredError(a);
  assert.equal(err.code, ErrorCode.UrlElicitationRequired);
  assert.equal(err.code, -32042);
  assert.deepEqual(err.elicitations, [{ mode: "url", message: "Connect your files.", url: "https://connect.example.com/c/elic123", elicitationId: "elic123" }]);
  assert.deepEqual(elicitInputParams(a), err.elicitations[0]);
  assert.deepEqual(elicitationComplete("elic123"), { method: "notifications/elicitation/complete", params: { elicitationId: "elic123" } });
  assert.throws(() => inputRequiredResult(a), TypeError);
  assert.equal(inputRequiredResult(answerFor(e, "2026-07-28")).resultType, "input_required");

  const fb = { ...a, fallback: fallbackResult(e) };
  const r = fallbackToolResult(fb);
  assert.equal(r.isError, true);
  assert.equal(r.content[0]?.type, "text");

  // Before initialize the SDK knows no capabilities.
  const server = new McpServer({ name: "t", version: "1" });
  assert.deepEqual(peerOf(server, { requestInfo: { headers: { "mcp-protocol-version": "2025-11-25" } } }), { protocolVersion: "2025-11-25", urlElicitation: false, formElicitation: false });
  assert.deepEqual(peerOf(server.server, {}, "2025-06-18"), { protocolVersion: "2025-06-18", urlElicitation: false, formElicitation: false });
});
