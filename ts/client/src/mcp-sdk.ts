// Helpers for the official TypeScript MCP SDK (@modelcontextprotocol/sdk, an
// optional peer dependency: only this subpath imports it). The SDK speaks
// protocol versions up to 2025-11-25; the 2026-07-28 InputRequiredResult is
// given as a plain typed object, since the SDK has no type for it.
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import {
  UrlElicitationRequiredError,
  type CallToolResult,
  type ElicitRequestFormParams,
  type ElicitRequestURLParams,
  type ElicitationCompleteNotification,
} from "@modelcontextprotocol/sdk/types.js";
import { deniedResult } from "./mcp.js";
import type { Answer, FormParams, Peer, ToolResult } from "./mcp.js";
import type { Approval, InputRequiredResult } from "./types.js";

export type { InputRequiredResult };

/** What the SDK passes a request handler that matters here (RequestHandlerExtra's requestInfo). */
export interface RequestExtra {
  requestInfo?: { headers?: Record<string, string | string[] | undefined> };
}

/**
 * The peer of a request: the client's declared capabilities (from
 * initialize, as the SDK keeps them) and its protocol version. The SDK does
 * not keep the negotiated version, so it is read from the request's
 * Mcp-Protocol-Version header, which HTTP clients send on every request after
 * initialize; on other transports pass protocolVersion (from
 * initialize's answer).
 */
export function peerOf(server: Server | McpServer, extra?: RequestExtra, protocolVersion?: string): Peer {
  const s = "server" in server ? server.server : server;
  let version = protocolVersion ?? "";
  const h = extra?.requestInfo?.headers?.["mcp-protocol-version"];
  if (!version && h) version = Array.isArray(h) ? (h[0] ?? "") : h;
  const el = s.getClientCapabilities()?.elicitation;
  // The SDK reads an empty elicitation object as { form: {} }.
  return { protocolVersion: version, urlElicitation: el?.url !== undefined, formElicitation: el?.form !== undefined };
}

/** The answer's -32042 error as the SDK's UrlElicitationRequiredError: throw it from a tool handler. */
export function toUrlElicitationRequiredError(answer: Answer): UrlElicitationRequiredError {
  if (!answer.error) throw new TypeError("connectd client: the answer has no URLElicitationRequiredError (not 2025-11-25)");
  return new UrlElicitationRequiredError(answer.error.data.elicitations.map(toElicitParams), answer.error.message);
}

/** The params for server.elicitInput (URL mode, with elicitationId). */
export function elicitInputParams(answer: Answer): ElicitRequestURLParams {
  if (!answer.elicitRequest) throw new TypeError("connectd client: the answer has no elicitation request (not 2025-11-25)");
  return toElicitParams(answer.elicitRequest);
}

/** An account form (AccountChoice.form) as the params for server.elicitInput. */
export function accountFormParams(form: FormParams): ElicitRequestFormParams {
  return form;
}

/** The fallback (no URL mode) as the tool call's result. */
export function fallbackToolResult(answer: Answer): CallToolResult {
  if (!answer.fallback) throw new TypeError("connectd client: the answer is not a fallback");
  return callToolResult(answer.fallback);
}

/** A ToolResult (a fallback, AccountChoice.fallback) as the tool call's result. */
export function callToolResult(r: ToolResult): CallToolResult {
  return { isError: r.isError, content: r.content.map((c) => ({ type: "text" as const, text: c.text })) };
}

/**
 * The tool call's result for a request the user denied on connectd's approval
 * page (deniedResult: "The user denied this request: …"). An approval answer
 * (requireApproval) goes to the client as a connect answer does —
 * elicitInputParams, toUrlElicitationRequiredError, fallbackToolResult — and
 * approvalOutcome reads its final status.
 */
export function deniedToolResult(approval?: Approval): CallToolResult {
  return callToolResult(deniedResult(approval));
}

/** The 2026-07-28 InputRequiredResult of an answer, as a plain object (the SDK has no type for it). */
export function inputRequiredResult(answer: Answer): InputRequiredResult {
  if (!answer.result) throw new TypeError("connectd client: the answer has no InputRequiredResult (not 2026-07-28)");
  return answer.result;
}

/** notifications/elicitation/complete for an elicitation, to send with extra.sendNotification. */
export function elicitationComplete(elicitationId: string): ElicitationCompleteNotification {
  return { method: "notifications/elicitation/complete", params: { elicitationId } };
}

function toElicitParams(p: { url: string; message: string; elicitationId?: string }): ElicitRequestURLParams {
  if (!p.elicitationId) throw new TypeError("connectd client: a 2025-11-25 elicitation needs its elicitationId");
  return { mode: "url", message: p.message, url: p.url, elicitationId: p.elicitationId };
}
