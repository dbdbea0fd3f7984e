// MCP protocol helpers: which shape a negotiated protocol version calls for,
// and connectd's elicitation in that shape (the Go client's mcp.go).
import { URLElicitationUnsupportedError, accountsOf } from "./errors.js";
import { AccountNew, accountTitle } from "./types.js";
import type { Account, Approval, ElicitParams, Elicitation, InputRequiredResult, RPCError } from "./types.js";

/**
 * Introduced URL-mode elicitation: the server sends elicitation/create (mode
 * "url") or answers URLElicitationRequiredError, and sends
 * notifications/elicitation/complete when the interaction is done.
 */
export const ProtocolVersion20251125 = "2025-11-25";
/**
 * Replaced server-to-client requests with multi-round-trip requests: the
 * server answers InputRequiredResult (inputRequests + requestState) and the
 * client retries with inputResponses and the echoed requestState.
 */
export const ProtocolVersion20260728 = "2026-07-28";

/** The JSON-RPC error code of URLElicitationRequiredError (2025-11-25). */
export const URLElicitationRequiredCode = -32042;

/** How an MCP protocol version lets a server send the user to a URL. */
export const Generation = {
  /** Before 2025-11-25 there is no URL-mode elicitation. */
  None: "none",
  /** 2025-11-25: elicitation/create or URLElicitationRequiredError, then notifications/elicitation/complete. */
  URLElicitation: "url-elicitation",
  /** 2026-07-28 and later: InputRequiredResult. */
  InputRequired: "input-required",
} as const;
export type Generation = (typeof Generation)[keyof typeof Generation];

/** The generation of a negotiated protocol version. Versions are dates (YYYY-MM-DD), so they compare as strings. */
export function generationOf(protocolVersion: string): Generation {
  if (!isDate(protocolVersion)) return Generation.None;
  if (protocolVersion >= ProtocolVersion20260728) return Generation.InputRequired;
  if (protocolVersion >= ProtocolVersion20251125) return Generation.URLElicitation;
  return Generation.None;
}

/** A valid calendar date written YYYY-MM-DD (Go's time.Parse(time.DateOnly)). */
function isDate(s: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s);
  if (!m) return false;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (mo < 1 || mo > 12 || d < 1) return false;
  return d <= new Date(Date.UTC(y, mo, 0)).getUTCDate();
}

/** What the MCP client declared for the request being answered. */
export interface Peer {
  /** The negotiated MCP protocol version (2026-07-28 and later: the request's own). */
  protocolVersion: string;
  /**
   * The client declared elicitation mode "url": capabilities.elicitation.url
   * in initialize (2025-11-25), or in the request's _meta (2026-07-28). An
   * empty elicitation object declares form mode only.
   */
  urlElicitation: boolean;
  /**
   * The client declared form-mode elicitation: capabilities.elicitation.form,
   * or an elicitation object with neither form nor url. It lets the server
   * ask the user which account (AccountChoice.form).
   */
  formElicitation?: boolean;
}

/** Whether connectd's link may be sent to the peer as a URL-mode elicitation: the spec forbids an undeclared mode. */
export function canOpenURL(peer: Peer): boolean {
  return peer.urlElicitation && generationOf(peer.protocolVersion) !== Generation.None;
}

/** MCP text content. */
export interface TextContent {
  type: "text";
  text: string;
}

/** An MCP CallToolResult of text content, in MCP's JSON shape. */
export interface ToolResult {
  content: TextContent[];
  isError: boolean;
}

/**
 * What an MCP server sends back for a request that needs the user to connect
 * a provider, in the shape its protocol calls for. Exactly the fields of
 * generation are set, or fallback alone, or ready alone.
 */
export interface Answer {
  generation: Generation;
  /** The minted elicitation (its id to wait on, its URL). */
  elicitation: Elicitation;
  /** Set by requireApproval: the approval elicitation is of (what the user is asked to approve). */
  approval?: Approval;
  /**
   * The user finished connecting (approved) while requireConnection
   * (requireApproval) waited on a retry: look the token up again (send the
   * same request again).
   */
  ready: boolean;
  /** The client has no URL mode: answer the tool call with this result (the link, in plain words, and "try again"). */
  fallback?: ToolResult;
  /** 2025-11-25: the params of an elicitation/create request (then wait, then notifications/elicitation/complete)… */
  elicitRequest?: ElicitParams;
  /** …or the -32042 JSON-RPC error to answer the request with (notify completion when wait reports it). */
  error?: RPCError;
  /** 2026-07-28: answer the request with this; the client retries with inputResponses[inputKey] and the requestState. */
  result?: InputRequiredResult;
  inputKey?: string;
}

/** The default inputRequests key for a provider's connect request. */
export function inputKey(provider: string): string {
  return `connect-${provider}`;
}

/**
 * The inputRequests key requireConnection gives a connect request for one of
 * the user's accounts: inputKey(provider) and, for a connection id, ":" and
 * the id. The MCP client echoes the key with its answer, so the retry knows
 * which account the link was for (keyAccount). The id is no secret, and
 * connectd checks it is the user's.
 */
export function connectKey(provider: string, account?: string): string {
  return !account || account === AccountNew ? inputKey(provider) : `${inputKey(provider)}:${account}`;
}

/** Reads a connectKey: undefined when key is no connect request for provider, else the connection id it was for ("" for none). */
export function keyAccount(provider: string, key: string): string | undefined {
  if (key === inputKey(provider)) return "";
  const prefix = `${inputKey(provider)}:`;
  return key.startsWith(prefix) && key.length > prefix.length ? key.slice(prefix.length) : undefined;
}

/**
 * Shapes a minted elicitation as the answer for protocolVersion. inputKey
 * names its inputRequests entry (2026-07-28; default inputKey(provider)).
 * Throws URLElicitationUnsupportedError before 2025-11-25.
 */
export function answerFor(e: Elicitation, protocolVersion: string, key?: string): Answer {
  const generation = generationOf(protocolVersion);
  switch (generation) {
    case Generation.URLElicitation: {
      const rpc = e.urlElicitationRequiredError;
      return {
        generation,
        elicitation: e,
        ready: false,
        elicitRequest: { ...e.params },
        error: { code: rpc.code, message: rpc.message, data: { elicitations: rpc.data.elicitations.map((p) => ({ ...p })) } },
      };
    }
    case Generation.InputRequired: {
      const k = key || inputKey(e.provider);
      return {
        generation,
        elicitation: e,
        ready: false,
        inputKey: k,
        result: { resultType: "input_required", inputRequests: { [k]: e.inputRequest }, requestState: e.requestState ?? "" },
      };
    }
    default:
      throw new URLElicitationUnsupportedError(
        `connectd: the MCP client cannot do URL-mode elicitation: protocol version ${JSON.stringify(protocolVersion)}`,
      );
  }
}

const months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/**
 * The tool result that hands the connect link to a user whose MCP client
 * cannot open URL-mode elicitations: the elicitation's message, the link as
 * plain text, and what to do after. It is an error result, since the tool did
 * not do its job yet. The link is safe in the model's hands: it is bound to
 * this user and authenticates nothing. The text is byte for byte the Go
 * client's FallbackResult.
 */
export function fallbackResult(e: Elicitation): ToolResult {
  const msg = e.params.message.trim() || `This needs your ${e.provider} account, which is not connected yet.`;
  const t = e.expiresAt;
  const pad = (n: number) => String(n).padStart(2, "0");
  // Go's "15:04 MST on 2 Jan", in UTC.
  const expiry = `${pad(t.getUTCHours())}:${pad(t.getUTCMinutes())} UTC on ${t.getUTCDate()} ${months[t.getUTCMonth()]}`;
  const text =
    `${msg}\n\nThis app cannot open the connect link for you. Open it in your browser:\n${e.url}\n\n` +
    `Sign in, approve, then try again. The link works only for you, grants nothing by itself, and expires at ${expiry}.`;
  return { isError: true, content: [{ type: "text", text }] };
}

/** The prefix of a provider's approval inputRequests keys (approvalKey). */
export function approvalInputKey(provider: string): string {
  return `approve-${provider}`;
}

/**
 * The inputRequests key requireApproval gives an approval request
 * (2026-07-28): approvalInputKey(provider), ":" and the approval's
 * elicitation id. The MCP client echoes it, so the retry knows it answers an
 * approval, and which (keyApproval): status (or wait) on that id gives the
 * user's decision without resolving the request_state. The id is no secret
 * (it is in the link); connectd answers it only to this client for this user.
 */
export function approvalKey(provider: string, elicitationId: string): string {
  return `${approvalInputKey(provider)}:${elicitationId}`;
}

/** Reads an approvalKey: undefined when key is no approval request for provider, else the approval's elicitation id. */
export function keyApproval(provider: string, key: string): string | undefined {
  const prefix = `${approvalInputKey(provider)}:`;
  return key.startsWith(prefix) && key.length > prefix.length ? key.slice(prefix.length) : undefined;
}

/** What the tool result of a denied request opens with (deniedResult). */
export const DeniedText = "The user denied this request";

/**
 * The tool result for a request the user denied: it says so, what the
 * request was (when approval is given), that it was not made, and not to try
 * it again unless the user asks. An error result. Byte for byte the Go
 * client's DeniedResult.
 */
export function deniedResult(approval?: Pick<Approval, "method" | "path" | "message">): ToolResult {
  let text = `${DeniedText}.`;
  if (approval) {
    let what = `${approval.method} ${approval.path}`.trim();
    if (approval.message) what += ` (${approval.message})`;
    text = `${DeniedText}: ${what}.`;
  }
  text += " It was not made. Do not try it again unless the user asks for it.";
  return { isError: true, content: [{ type: "text", text }] };
}

/**
 * The tool result that hands the approval link to a user whose MCP client
 * cannot open URL-mode elicitations: what is to be approved, the link as
 * plain text, and to try again after (the Go client's ApprovalFallbackResult).
 */
export function approvalFallbackResult(a: Approval): ToolResult {
  const msg = a.params.message.trim() || `This request needs your approval: ${a.message}`;
  const text =
    `${msg}\n\nThis app cannot open the approval link for you. Open this link to approve or deny ${a.method} ${a.path}:\n${a.url}\n\n` +
    `Then try again. The link works only for you and expires at ${expiryText(a.expiresAt)}.`;
  return { isError: true, content: [{ type: "text", text }] };
}

/** Go's "15:04 MST on 2 Jan", in UTC. */
function expiryText(t: Date): string {
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${pad(t.getUTCHours())}:${pad(t.getUTCMinutes())} UTC on ${t.getUTCDate()} ${months[t.getUTCMonth()]}`;
}

/** Joins a tool result's text. */
export function toolResultText(r: ToolResult): string {
  return r.content.map((c) => c.text).join("\n");
}

/** The field of the account form (AccountChoice.form), and the tool argument AccountChoice.fallback asks for: a connection id. */
export const AccountField = "account";

/** The inputRequests key of the account form for provider. */
export function choiceKey(provider: string): string {
  return `account-${provider}`;
}

/** The params of a form-mode elicitation/create request, with MCP's field names. */
export interface FormParams {
  mode: "form";
  message: string;
  requestedSchema: {
    type: "object";
    properties: Record<string, { type: "string"; title?: string; oneOf: { const: string; title: string }[] }>;
    required: string[];
  };
}

/**
 * An account_required refusal put to the user: which of their accounts at
 * provider the request is for. Which accounts a user has is no secret from
 * them, so the choice goes through the MCP client: a form-mode elicitation when
 * the client declared one (form), else a tool result that lists the accounts
 * and asks for the tool's account argument (fallback). The answer is a
 * connection id: read the token with accountToken, which connectd checks is the
 * user's. The Go client's AccountChoice.
 */
export class AccountChoice {
  constructor(
    readonly provider: string,
    readonly accounts: Account[],
  ) {}

  /** The accounts' titles, made unique with the id where two agree. */
  #titles(): string[] {
    const titles = this.accounts.map(accountTitle);
    return titles.map((t, i) => {
      const id = this.accounts[i]!.id;
      return titles.filter((u) => u === t).length > 1 && t !== id ? `${t} [${id}]` : t;
    });
  }

  /**
   * The form-mode elicitation/create params that ask the user: one required
   * field, AccountField, a titled enum of the accounts (value the id, title
   * accountTitle). Read the answer with chosenAccount.
   */
  form(message?: string): FormParams {
    const oneOf = this.#titles().map((title, i) => ({ const: this.accounts[i]!.id, title }));
    return {
      mode: "form",
      message: message || `You have several ${this.provider} accounts this app may use. Which one should it use?`,
      requestedSchema: {
        type: "object",
        properties: { [AccountField]: { type: "string", title: `${this.provider} account`, oneOf } },
        required: [AccountField],
      },
    };
  }

  /**
   * The tool result for an MCP client without form-mode elicitation: the
   * accounts with their ids, and to call tool again with AccountField set to
   * one (byte for byte the Go client's Fallback).
   */
  fallback(tool: string): ToolResult {
    let text =
      `You have several ${this.provider} accounts this app may use, and it needs to know which one. ` +
      `Ask which, then call ${tool} again with ${AccountField} set to its id:`;
    this.#titles().forEach((t, i) => (text += `\n- ${t}: ${this.accounts[i]!.id}`));
    return { isError: true, content: [{ type: "text", text }] };
  }
}

/** The choice an account_required refusal of provider asks for, or undefined when err is none (or lists no account). */
export function chooseAccount(err: unknown, provider: string): AccountChoice | undefined {
  const accounts = accountsOf(err);
  return accounts.length ? new AccountChoice(provider, accounts) : undefined;
}

/** The connection id an accepted account form answered (the elicitation result's content), or undefined. */
export function chosenAccount(content: Record<string, unknown> | undefined): string | undefined {
  const id = content?.[AccountField];
  return typeof id === "string" && id ? id : undefined;
}
