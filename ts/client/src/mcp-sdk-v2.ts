// Helpers for the official TypeScript MCP SDK v2 server package
// (@modelcontextprotocol/server 2.x, an optional peer dependency: only this
// subpath imports it), for protocol 2026-07-28: the client declares its
// capabilities in each request's _meta, a request needing the user answers an
// input_required result, and the client retries with inputResponses and the
// echoed requestState. There is no elicitationId, no completion notification
// and no -32042 on this protocol. Serve 2025-11-25 sessions with the v1
// helpers (@connectd/client/mcp-sdk).
import {
  CLIENT_CAPABILITIES_META_KEY,
  PROTOCOL_VERSION_META_KEY,
  inputRequired,
  inputResponse,
  type CallToolResult,
  type InputRequest,
  type InputRequiredResult,
  type ServerContext,
} from "@modelcontextprotocol/server";
import { approvalInputKey, choiceKey, chosenAccount, connectKey, deniedResult, inputKey, keyAccount, keyApproval } from "./mcp.js";
import type { Answer, FormParams, Peer, ToolResult } from "./mcp.js";
import type { Approval, InputRequiredResult as PlainInputRequiredResult } from "./types.js";

/** What a v2 handler's context carries that matters here (ServerContext's mcpReq, in part). */
export interface RequestContext {
  mcpReq: Pick<ServerContext["mcpReq"], "envelope" | "inputResponses" | "requestState">;
}

/**
 * The peer of a 2026-07-28 request: the protocol version and the
 * capabilities the client declared in this request's _meta
 * (io.modelcontextprotocol/protocolVersion and …/clientCapabilities), which
 * the SDK lifts into ctx.mcpReq.envelope. An elicitation object with neither
 * mode declares form mode only. A request without an envelope (a 2025-era
 * one) has no version here: serve it with the v1 helpers.
 */
export function peerOf(ctx: RequestContext): Peer {
  const env = (ctx.mcpReq.envelope ?? {}) as Record<string, unknown>;
  const version = env[PROTOCOL_VERSION_META_KEY];
  const caps = env[CLIENT_CAPABILITIES_META_KEY] as { elicitation?: { url?: unknown; form?: unknown } } | undefined;
  const el = caps?.elicitation;
  return {
    protocolVersion: typeof version === "string" ? version : "",
    urlElicitation: el?.url !== undefined && el?.url !== null,
    formElicitation: el !== undefined && (el.form !== undefined || el.url === undefined),
  };
}

/**
 * The answer's InputRequiredResult built the SDK's way
 * (inputRequired(…) with inputRequired.elicitUrl(…)): connectd's URL and
 * message under answer.inputKey, and connectd's sealed request_state as the
 * requestState. Return it from the tool handler.
 */
export function inputRequiredResult(answer: Answer): InputRequiredResult {
  if (!answer.result) throw new TypeError("connectd client: the answer has no InputRequiredResult (not 2026-07-28)");
  return toInputRequired(answer.result);
}

/**
 * A plain InputRequiredResult (ConnectdClient.reissue's, answerFor's) as the
 * SDK's, each URL request through inputRequired.elicitUrl: no elicitationId,
 * no content.
 */
export function toInputRequired(r: PlainInputRequiredResult): InputRequiredResult {
  const inputRequests: Record<string, InputRequest> = {};
  for (const [k, ir] of Object.entries(r.inputRequests)) {
    inputRequests[k] = inputRequired.elicitUrl({ url: ir.params.url, message: ir.params.message });
  }
  return inputRequired(r.requestState ? { inputRequests, requestState: r.requestState } : { inputRequests });
}

/** An account form (AccountChoice.form) as an input_required result under choiceKey(provider). */
export function accountFormResult(provider: string, form: FormParams): InputRequiredResult {
  return inputRequired({ inputRequests: { [choiceKey(provider)]: inputRequired.elicit(form) } });
}

/**
 * The connection id the user chose in the account form of provider, from a
 * retry's inputResponses: undefined when the retry carries no answer to it,
 * "" when the user did not accept or chose nothing.
 */
export function chosenAccountOf(ctx: RequestContext, provider: string): string | undefined {
  const v = inputResponse(ctx.mcpReq.inputResponses, choiceKey(provider));
  if (v.kind !== "elicit") return undefined;
  return v.action === "accept" ? (chosenAccount(v.content) ?? "") : "";
}

/** What a 2026-07-28 retry of a connect request carries. */
export interface Retry {
  /** The requestState the client echoed: connectd's request_state, to resume with. */
  requestState: string;
  /** The inputRequests key the answer came under (inputKey(provider), or connectKey(provider, account)). */
  key: string;
  /** The connection id the link was for (connectKey), "" for none. */
  account: string;
  /** The user's answer to the URL request: "accept" (they agreed to open it, not that they finished), "decline", "cancel", or undefined when it is missing. */
  action?: "accept" | "decline" | "cancel";
}

/**
 * Reads a 2026-07-28 retry of a request that was answered with connectd's
 * InputRequiredResult for provider: the echoed requestState and the answer to
 * the connect request. Undefined when the request carries no requestState (a
 * first call). The requestState is read raw, as the SDK passes it without a
 * ServerOptions.requestState.verify hook: connectd seals and checks it
 * (ConnectdClient.resume), so configure no codec that would refuse it.
 */
export function retryOf(ctx: RequestContext, provider: string): Retry | undefined {
  const state = ctx.mcpReq.requestState<unknown>();
  if (typeof state !== "string" || !state) return undefined;
  let key = inputKey(provider);
  let account = "";
  for (const k of Object.keys(ctx.mcpReq.inputResponses ?? {})) {
    const a = keyAccount(provider, k);
    if (a !== undefined) [key, account] = [k, a];
  }
  const v = inputResponse(ctx.mcpReq.inputResponses, key);
  const out: Retry = { requestState: state, key, account };
  if (v.kind === "elicit") out.action = v.action;
  return out;
}

/** What a 2026-07-28 retry of an approval request carries. */
export interface ApprovalRetry {
  /** The approval's elicitation id (from its approvalKey): ConnectdClient.status or wait on it. */
  elicitationId: string;
  /** The requestState the client echoed ("" for none): unspent, it may go back with the same link (ConnectdClient.reissue). */
  requestState: string;
  /** The inputRequests key the answer came under. */
  key: string;
  /** The user's answer to the URL request: "accept" (they agreed to open it, not that they decided), "decline", "cancel", or undefined. */
  action?: "accept" | "decline" | "cancel";
}

/**
 * Reads a 2026-07-28 retry of a request that was answered with connectd's
 * approval (requireApproval) for provider: the approval's id from the key
 * its answer came under (approvalKey). Undefined when none of the
 * inputResponses answers an approval of provider (a first call, or the
 * retry of a connect request: retryOf). Wait for the decision
 * (ConnectdClient.wait on the id, bounded) and read it with approvalOutcome:
 * completed → send exactly the same request again; still pending → the same
 * link again (ConnectdClient.reissue with the echoed requestState), rather
 * than the request, which would ask anew if the user decided meanwhile. The
 * echoed requestState need not be resolved.
 */
export function approvalRetryOf(ctx: RequestContext, provider: string): ApprovalRetry | undefined {
  for (const k of Object.keys(ctx.mcpReq.inputResponses ?? {})) {
    const id = keyApproval(provider, k);
    if (id === undefined) continue;
    const v = inputResponse(ctx.mcpReq.inputResponses, k);
    const state = ctx.mcpReq.requestState<unknown>();
    const out: ApprovalRetry = { elicitationId: id, requestState: typeof state === "string" ? state : "", key: k };
    if (v.kind === "elicit") out.action = v.action;
    return out;
  }
  return undefined;
}

/** The tool call's result for a request the user denied (deniedResult: "The user denied this request: …"). */
export function deniedToolResult(approval?: Approval): CallToolResult {
  return callToolResult(deniedResult(approval));
}

/** The default inputRequests key of an approval (approvalInputKey). */
export { approvalInputKey };

/** The inputRequests key of a connect link for account (connectKey), for ConnectdClient.reissue. */
export { connectKey };

/** A ToolResult (a fallback, AccountChoice.fallback) as the tool call's result. */
export function callToolResult(r: ToolResult): CallToolResult {
  return { isError: r.isError, content: r.content.map((c) => ({ type: "text" as const, text: c.text })) };
}

/** The fallback (no URL mode) as the tool call's result. */
export function fallbackToolResult(answer: Answer): CallToolResult {
  if (!answer.fallback) throw new TypeError("connectd client: the answer is not a fallback");
  return callToolResult(answer.fallback);
}
