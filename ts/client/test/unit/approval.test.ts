import assert from "node:assert/strict";
import { test } from "node:test";
import {
  ApprovalDeniedError,
  ApprovalNotGivenError,
  ConnectdClient,
  ConnectdError,
  DeniedText,
  ErrorFamily,
  Generation,
  KindApproval,
  ProtocolVersion20251125,
  ProtocolVersion20260728,
  RequestIDHeader,
  URLElicitationUnsupportedError,
  approvalOutcome,
  approvalRequired,
  deniedResult,
  isApprovalRequired,
  keyApproval,
  needsConnection,
  toolResultText,
} from "@connectd/client";
import type { ElicitationStatus } from "@connectd/client";
import { deniedToolResult } from "@connectd/client/mcp-sdk";
import { approvalRetryOf } from "@connectd/client/mcp-sdk-v2";
import type { RequestContext } from "@connectd/client/mcp-sdk-v2";
import { json, key, minted, scriptedFetch, userToken } from "./helpers.js";
import type { Recorded, Step } from "./helpers.js";

const base = "https://connect.example.com";
const soon = () => new Date(Date.now() + 10 * 60_000).toISOString();

/** The approval a user_approval_required refusal carries (docs/api.md). */
function approvalDoc(): Record<string, unknown> {
  const id = "aid1";
  const url = `${base}/c/${id}`;
  const p = { mode: "url", elicitationId: id, url, message: "Approve: Open issues in your repositories" };
  return minted({
    elicitation_id: id,
    url,
    scopes: [],
    provider: "github",
    expires_at: soon(),
    elicitation: p,
    url_elicitation_required_error: { code: -32042, message: "This request requires the user's approval.", data: { elicitations: [p] } },
    input_request: { method: "elicitation/create", params: { mode: "url", message: p.message, url } },
    kind: "approval",
    method: "POST",
    path: "/repos/a/b/issues",
    rule: "POST /repos/*/issues",
    message: "Open issues in your repositories",
  });
}

const refuse: Step = (rec: Recorded) =>
  json(403, {
    error: "user_approval_required",
    error_description: "the user must approve this call first: Open issues in your repositories",
    request_id: rec.headers.get(RequestIDHeader),
    approval: approvalDoc(),
  });

function status(over: Record<string, unknown>): Step {
  return () => json(200, { elicitation_id: "aid1", status: "pending", kind: "approval", provider: "demo-files", scopes: [], expires_at: soon(), ...over });
}

/** POSTs through providerFetch and returns what it threw, wrapped as an SDK wraps it. */
async function postIssue(cd: ConnectdClient, account?: string): Promise<unknown> {
  const f = cd.providerFetch(userToken, "github", account ? { account } : {});
  try {
    await f("https://api.github.com/repos/a/b/issues", { method: "POST", body: JSON.stringify({ title: "t" }) });
  } catch (err) {
    return new Error("sdk: request failed", { cause: err });
  }
  assert.fail("the POST was not refused");
}

test("approvalRequired: the proxy's user_approval_required is ApprovalRequired, with the whole approval and the call's account", async () => {
  const { fetch } = scriptedFetch([refuse]);
  const cd = new ConnectdClient({ baseUrl: base, key, fetch });
  const err = await postIssue(cd, "cn_work");
  assert.ok(isApprovalRequired(err));
  assert.ok(!needsConnection(err));
  const a = approvalRequired(err);
  assert.ok(a);
  assert.equal(a.id, "aid1");
  assert.equal(a.url, `${base}/c/aid1`);
  assert.equal(a.kind, KindApproval);
  assert.equal(a.status, "pending");
  assert.equal(a.method, "POST");
  assert.equal(a.path, "/repos/a/b/issues");
  assert.equal(a.rule, "POST /repos/*/issues");
  assert.equal(a.message, "Open issues in your repositories");
  assert.equal(a.account, "cn_work");
  assert.equal(a.params.elicitationId, "aid1");
  assert.equal(a.inputRequest.params.url, a.url);
  assert.equal(a.urlElicitationRequiredError.code, -32042);
  assert.equal(a.requestState, "rs1.abc");
  for (const other of [undefined, new Error("x"), new ConnectdError({ status: 403, code: "not_connected" })]) {
    assert.equal(approvalRequired(other), undefined);
  }
  assert.ok(new ConnectdError({ status: 403, code: "user_approval_required" }).is(ErrorFamily.ApprovalRequired));
});

test("requireApproval: the approval in the shape the MCP client declared, keyed approve-<provider>:<approval id>", async () => {
  const cases: { name: string; peer: { protocolVersion: string; urlElicitation: boolean }; account?: string; fallback?: boolean; check: (a: unknown) => void }[] = [
    {
      name: "2025-11-25",
      peer: { protocolVersion: ProtocolVersion20251125, urlElicitation: true },
      check: (ans: any) => {
        assert.equal(ans.generation, Generation.URLElicitation);
        assert.equal(ans.elicitRequest.elicitationId, "aid1");
        assert.equal(ans.error.code, -32042);
        assert.equal(ans.approval.id, "aid1");
        assert.equal(ans.ready, false);
      },
    },
    {
      name: "2026-07-28",
      peer: { protocolVersion: ProtocolVersion20260728, urlElicitation: true },
      check: (ans: any) => {
        assert.equal(ans.generation, Generation.InputRequired);
        assert.equal(ans.inputKey, "approve-github:aid1");
        assert.equal(ans.result.requestState, "rs1.abc");
        assert.equal(ans.result.inputRequests["approve-github:aid1"].params.url, `${base}/c/aid1`);
        assert.equal(keyApproval("github", ans.inputKey), "aid1");
        for (const other of ["approve-github", "approve-github:", "connect-github", "approve-gitlab:aid1"]) {
          assert.equal(keyApproval("github", other), undefined, other);
        }
      },
    },
    {
      name: "2026-07-28 with an account",
      peer: { protocolVersion: ProtocolVersion20260728, urlElicitation: true },
      account: "cn_work",
      check: (ans: any) => {
        assert.equal(ans.inputKey, "approve-github:aid1");
        assert.equal(ans.approval.account, "cn_work");
      },
    },
    {
      name: "no URL mode",
      peer: { protocolVersion: ProtocolVersion20251125, urlElicitation: false },
      check: (ans: any) => {
        assert.ok(ans.fallback.isError);
        const text = toolResultText(ans.fallback);
        for (const want of ["/c/aid1", "approve or deny POST /repos/a/b/issues", "try again"]) assert.ok(text.includes(want), text);
        assert.equal(ans.elicitRequest, undefined);
      },
    },
  ];
  for (const tc of cases) {
    const { fetch } = scriptedFetch([refuse]);
    const cd = new ConnectdClient({ baseUrl: base, key, fetch, retryWaitMs: -1 });
    tc.check(await cd.requireApproval(userToken, tc.peer, await postIssue(cd, tc.account)));
  }
  const { fetch } = scriptedFetch([refuse]);
  const cd = new ConnectdClient({ baseUrl: base, key, fetch, fallback: false });
  await assert.rejects(
    cd.requireApproval(userToken, { protocolVersion: ProtocolVersion20251125, urlElicitation: false }, await postIssue(cd)),
    URLElicitationUnsupportedError,
  );
  await assert.rejects(
    cd.requireApproval(userToken, { protocolVersion: ProtocolVersion20251125, urlElicitation: true }, new ConnectdError({ status: 403, code: "not_connected" })),
    TypeError,
  );
});

test("requireApproval: a retry of an approval handed out waits for it: approved → ready, denied → ApprovalDeniedError, still pending → the same link", async () => {
  const peer = { protocolVersion: ProtocolVersion20251125, urlElicitation: true };
  const cases: { name: string; final: Step; check: (p: Promise<unknown>) => Promise<void> }[] = [
    { name: "approved", final: status({ status: "completed" }), check: async (p) => assert.equal(((await p) as any).ready, true) },
    { name: "denied", final: status({ status: "declined", reason: "user_denied" }), check: (p) => assert.rejects(p, ApprovalDeniedError) },
    { name: "dismissed", final: status({ status: "declined", reason: "client_declined" }), check: (p) => assert.rejects(p, ApprovalNotGivenError) },
  ];
  for (const tc of cases) {
    const { fetch, calls } = scriptedFetch([refuse, refuse, tc.final]);
    const cd = new ConnectdClient({ baseUrl: base, key, fetch, retryWaitMs: 5_000 });
    const first = await cd.requireApproval(userToken, peer, await postIssue(cd));
    assert.equal(first.ready, false, tc.name);
    assert.equal(calls.length, 1, `${tc.name}: the first answer waited`);
    await tc.check(cd.requireApproval(userToken, peer, await postIssue(cd)));
    assert.match(calls[2]!.url, /\/v1\/elicitations\/aid1\?wait=/, tc.name);
  }
  // Still pending when retryWaitMs runs out: the same link again.
  const slow: Step = () => new Promise((resolve) => setTimeout(() => resolve(json(200, { elicitation_id: "aid1", status: "pending", provider: "github", scopes: [], expires_at: soon() })), 400));
  const { fetch } = scriptedFetch([refuse, refuse, slow, slow, slow, slow]);
  const cd = new ConnectdClient({ baseUrl: base, key, fetch, retryWaitMs: 300 });
  await cd.requireApproval(userToken, peer, await postIssue(cd));
  const again = await cd.requireApproval(userToken, peer, await postIssue(cd));
  assert.equal(again.ready, false);
  assert.equal(again.elicitRequest?.elicitationId, "aid1");
});

test("approvalOutcome and deniedResult: what a final approval means, and the denial's tool result (the Go client's text)", () => {
  const st = (over: Partial<ElicitationStatus>): ElicitationStatus => ({ id: "A", status: "pending", provider: "p", scopes: [], expiresAt: new Date(), ...over });
  assert.equal(approvalOutcome(st({ status: "completed" })), undefined);
  assert.ok(approvalOutcome(st({ status: "declined", reason: "user_denied" })) instanceof ApprovalDeniedError);
  const dismissed = approvalOutcome(st({ status: "declined", reason: "client_declined" }));
  assert.ok(dismissed instanceof ApprovalNotGivenError && !dismissed.expired);
  const expired = approvalOutcome(st({ status: "expired" }));
  assert.ok(expired instanceof ApprovalNotGivenError && expired.expired);
  assert.ok(approvalOutcome(st({ status: "failed" })) instanceof Error);
  const r = deniedResult({ method: "POST", path: "/repos/a/b/issues", message: "Open issues" });
  assert.equal(r.isError, true);
  assert.equal(
    toolResultText(r),
    "The user denied this request: POST /repos/a/b/issues (Open issues). It was not made. Do not try it again unless the user asks for it.",
  );
  assert.ok(toolResultText(deniedResult()).startsWith(`${DeniedText}.`));
  const sdk = deniedToolResult();
  assert.equal(sdk.isError, true);
  assert.ok((sdk.content[0] as { text: string }).text.startsWith(DeniedText));
});

test("approvalRetryOf: a 2026-07-28 retry answering an approval, not one answering a connect link", () => {
  const ctx = (state: string | undefined, responses: Record<string, unknown>): RequestContext =>
    ({ mcpReq: { envelope: {}, inputResponses: responses, requestState: () => state } }) as unknown as RequestContext;
  const accepted = { action: "accept" };
  assert.deepEqual(approvalRetryOf(ctx("rs1.x", { "approve-github:aid1": accepted }), "github"), {
    elicitationId: "aid1",
    requestState: "rs1.x",
    key: "approve-github:aid1",
    action: "accept",
  });
  assert.equal(approvalRetryOf(ctx("rs1.x", { "connect-github": accepted }), "github"), undefined);
  assert.equal(approvalRetryOf(ctx(undefined, {}), "github"), undefined);
});
