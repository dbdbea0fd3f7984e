// open_issue: a proxied POST the operator may make the user approve first
// (a request rule that asks: POST /repos/*/issues ask "Open issues in your
// repositories"). connectd then answers it 403 user_approval_required with an
// approval elicitation and does not call the service; the tool hands the
// approval to the MCP client as it hands a connect link — in the shape of the
// request's protocol — and, once the user approved, sends exactly the same
// request again (same path and body: it passes once). A denial is answered
// with deniedResult's text ("The user denied this request: …"), and the
// request is not sent again (examples/mcp-server/issue.go).
import {
  ApprovalDeniedError,
  ApprovalNotGivenError,
  ConnectdError,
  Generation,
  URLElicitationUnsupportedError,
  WaitTimeoutError,
  approvalOutcome,
  approvalRequired,
  deniedResult,
  needsConnection,
  requestDigest,
  type Answer,
  type Approval,
  type ElicitationStatus,
} from "@connectd/client";
import {
  callToolResult,
  elicitInputParams,
  elicitationComplete,
  fallbackToolResult,
  peerOf,
  toUrlElicitationRequiredError,
} from "@connectd/client/mcp-sdk";
import {
  approvalRetryOf,
  fallbackToolResult as fallbackToolResultV2,
  inputRequiredResult,
  peerOf as peerOfModern,
  toInputRequired,
} from "@connectd/client/mcp-sdk-v2";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult as CallToolResultV2, InputRequiredResult, ServerContext } from "@modelcontextprotocol/server";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { Caller } from "./auth.js";
import type { Logger } from "./log.js";
import type { Background, Extra, ToolConfig } from "./tool.js";

/** open_issue's arguments. */
export interface IssueArgs {
  repo: string;
  title: string;
  body?: string | undefined;
}

/**
 * Approvals denied after their call was answered -32042 (notifyWhenDone), by
 * caller and request digest, until when: the client's retry of the same call
 * is answered the denial, not a new approval (the same call asks anew once
 * its approval ended).
 */
const denials = new Map<string, { approval: Approval; until: number }>();

const repoName = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\/[A-Za-z0-9._-]{1,100}$/;

/** open_issue on SDK v1, for 2025-11-25 sessions (and older: the fallback). */
export async function openIssue(
  cfg: ToolConfig,
  server: McpServer,
  bg: Background,
  log: Logger,
  caller: Caller,
  args: IssueArgs,
  extra: Extra,
): Promise<CallToolResult> {
  const bad = check(args);
  if (bad) return bad;
  const peer = peerOf(server, extra);
  const denialKey = `${caller.issuer} ${caller.subject} ${await requestDigest("open_issue", args)}`;
  const denied = denials.get(denialKey);
  if (denied) {
    denials.delete(denialKey);
    if (denied.until > Date.now()) return callToolResult(deniedResult(denied.approval));
  }
  const got = await post(cfg, caller, args, extra.signal);
  if ("result" in got) return got.result;
  const early = notApproval(log, got.err);
  if (early) return early;
  let ans: Answer;
  try {
    ans = await cfg.connectd.requireApproval(caller.token, peer, got.err, { signal: extra.signal });
  } catch (err) {
    return approvalFailed(log, err, approvalRequired(got.err));
  }
  const a = ans.approval!;
  log.info("approval needed", { elicitation: a.id, rule: a.rule, ready: ans.ready, protocol: peer.protocolVersion });
  if (ans.ready) return postAgain(cfg, caller, args, extra.signal);
  if (ans.fallback) return fallbackToolResult(ans);
  if (ans.generation !== Generation.URLElicitation) return stop("This MCP client's protocol version is not supported by this server.");
  if (cfg.style === "error") {
    notifyWhenDone(cfg, server, bg, log, caller, a, denialKey);
    throw toUrlElicitationRequiredError(ans);
  }
  // Within the call: ask the client to open the approval page, wait for the
  // user's decision, notify its completion.
  const params = elicitInputParams(ans);
  let action: string;
  try {
    action = (await server.server.elicitInput(params, { relatedRequestId: extra.requestId, signal: extra.signal })).action;
  } catch (err) {
    return stop(`Could not ask for your approval: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (action !== "accept") {
    await cfg.connectd.cancel(caller.token, a.id).catch((err: unknown) => log.warn("could not end the dismissed approval", { error: errCode(err) }));
    return stop("You did not open the approval link, so the issue was not opened.");
  }
  let st: ElicitationStatus;
  try {
    st = await cfg.connectd.wait(caller.token, a.id, { signal: extra.signal, timeoutMs: cfg.waitTimeoutMs });
  } catch (err) {
    if (err instanceof WaitTimeoutError) return stop("Still waiting for your decision in the browser. Call open_issue again when you are done.");
    return stop(`Could not follow the approval with connectd (${errCode(err)}).`);
  }
  await extra.sendNotification(elicitationComplete(a.id)).catch((err: unknown) => {
    log.warn("notifications/elicitation/complete failed", { error: err instanceof Error ? err.message : String(err) });
  });
  return approvalOutcome(st) ? outcomeResult(st, a) : postAgain(cfg, caller, args, extra.signal);
}

/**
 * open_issue on SDK v2 for a 2026-07-28 request: the approval goes out as an
 * InputRequiredResult under approvalKey (which names the approval); the
 * client's retry waits for the decision up to retryHoldMs, then sends the
 * approved request again, answers the denial, or gives the same link back.
 */
export async function openIssueModern(
  cfg: ToolConfig,
  log: Logger,
  caller: Caller,
  args: IssueArgs,
  ctx: ServerContext,
): Promise<CallToolResultV2 | InputRequiredResult> {
  const bad = check(args);
  if (bad) return bad;
  const cd = cfg.connectd;
  const peer = peerOfModern(ctx);
  const signal = ctx.mcpReq.signal;
  const retry = approvalRetryOf(ctx, cfg.provider);
  if (retry) {
    // The key names the approval: wait for the decision up to retryHoldMs.
    // The request is not sent while it is pending (a decision made meanwhile
    // would make it ask anew); an approval's request_state is bound to
    // connectd's own digest of the call, so it is not resolved but goes back
    // unspent with the same link.
    if (retry.action && retry.action !== "accept") {
      await cd.cancel(caller.token, retry.elicitationId, { signal }).catch((err: unknown) => log.warn("could not end the dismissed approval", { error: errCode(err) }));
      return stop("You did not open the approval link, so the issue was not opened.");
    }
    try {
      const st = await cd.wait(caller.token, retry.elicitationId, { signal, timeoutMs: cfg.retryHoldMs });
      log.info("approval decided", { elicitation: st.id, status: st.status });
      if (approvalOutcome(st)) return outcomeResult(st);
      // Approved: the request passes now.
    } catch (err) {
      if (err instanceof WaitTimeoutError && retry.requestState) {
        const pending = { id: retry.elicitationId, status: "pending" as const, provider: cfg.provider, scopes: [], expiresAt: new Date(), requestState: retry.requestState };
        return toInputRequired(cd.reissue(pending, "Still waiting: open the link to approve or deny opening the issue.", retry.key));
      }
      log.info("approval status unavailable; starting over", { code: errCode(err) });
    }
  }
  const got = await post(cfg, caller, args, signal);
  if ("result" in got) return got.result;
  const early = notApproval(log, got.err);
  if (early) return early;
  let ans: Answer;
  try {
    ans = await cd.requireApproval(caller.token, peer, got.err, { signal });
  } catch (err) {
    return approvalFailed(log, err, approvalRequired(got.err));
  }
  log.info("approval needed", { elicitation: ans.approval!.id, rule: ans.approval!.rule, ready: ans.ready, protocol: peer.protocolVersion });
  if (ans.ready) return postAgain(cfg, caller, args, signal);
  if (ans.fallback) return fallbackToolResultV2(ans);
  if (ans.generation !== Generation.InputRequired) return stop("This MCP client's protocol version is not supported by this server.");
  return inputRequiredResult(ans);
}

function check(args: IssueArgs): CallToolResult | undefined {
  if (!repoName.test(args.repo) || args.repo.includes("..") || !args.title.trim()) return stop("open_issue needs repo as owner/name and a title.");
  return undefined;
}

/** The tool's answer to a refusal that is not an approval; undefined for an approval. */
function notApproval(log: Logger, err: unknown): CallToolResult | undefined {
  if (approvalRequired(err)) return undefined;
  if (needsConnection(err)) return stop("Your file-service account is not connected yet. Call list_files first, which connects it.");
  log.warn("proxied POST refused", { code: errCode(err) });
  return stop(`The service cannot be reached through connectd right now (${errCode(err)}). Try again later.`);
}

/** The tool's answer when requireApproval threw: a denial (while a retry waited), an approval not given, or a failure. */
function approvalFailed(log: Logger, err: unknown, a: Approval | undefined): CallToolResult {
  if (err instanceof ApprovalDeniedError) return callToolResult(deniedResult(a));
  if (err instanceof ApprovalNotGivenError) {
    return stop(err.expired ? expiredText : "The issue was not opened: the approval was not given. Call open_issue again to ask again.");
  }
  if (err instanceof URLElicitationUnsupportedError) return stop("Opening an issue needs your approval, but this MCP client cannot open the approval link.");
  log.warn("approval could not be handed out", { error: errCode(err) });
  return stop(`Could not ask for your approval (${errCode(err)}).`);
}

const expiredText = "Nobody approved opening the issue in time, so it was not opened. Call open_issue again to ask again.";

/** The tool's answer to an approval that ended ungiven. */
function outcomeResult(st: ElicitationStatus, a?: Approval): CallToolResult {
  const err = approvalOutcome(st);
  if (err instanceof ApprovalDeniedError) return callToolResult(deniedResult(a));
  if (err instanceof ApprovalNotGivenError && err.expired) return stop(expiredText);
  return stop("The issue was not opened: the approval was not given. Call open_issue again to ask again.");
}

/** Sends the approved request again; connectd passes it once. */
async function postAgain(cfg: ToolConfig, caller: Caller, args: IssueArgs, signal: AbortSignal): Promise<CallToolResult> {
  const got = await post(cfg, caller, args, signal);
  return "result" in got ? got.result : stop(`Approved, but connectd refused the call (${errCode(got.err)}).`);
}

/**
 * The POST through connectd's proxy. The body is the same bytes for the same
 * arguments, so the retry of an approved request is exactly the request
 * approved. connectd's refusal comes back as err.
 */
async function post(cfg: ToolConfig, caller: Caller, args: IssueArgs, signal: AbortSignal): Promise<{ result: CallToolResult } | { err: unknown }> {
  const body = JSON.stringify(args.body ? { title: args.title, body: args.body } : { title: args.title });
  const path = cfg.issuesPath.replaceAll("{repo}", args.repo);
  const pf = cfg.connectd.providerFetch(caller.token, cfg.provider);
  let resp: Response;
  try {
    resp = await pf(new URL(path, `https://${cfg.provider}`), {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body,
      signal: AbortSignal.any([signal, AbortSignal.timeout(15_000)]),
    });
  } catch (err) {
    return { err };
  }
  if (resp.status < 200 || resp.status > 299) {
    await resp.body?.cancel().catch(() => {});
    return { result: stop(`The service answered ${resp.status}: the issue was not opened.`) };
  }
  let number: number | undefined;
  let url = "";
  try {
    const b = (await resp.json()) as { number?: unknown; html_url?: unknown };
    if (typeof b.number === "number") number = b.number;
    if (typeof b.html_url === "string") url = b.html_url;
  } catch {
    // an answer without JSON: opened all the same
  }
  const text = url ? `Opened ${url}.` : `Opened the issue in ${args.repo}.`;
  return {
    result: {
      content: [{ type: "text", text }],
      structuredContent: { repo: args.repo, status: resp.status, ...(number !== undefined ? { number } : {}), ...(url ? { url } : {}) },
    },
  };
}

/**
 * Follows an approval answered with -32042: remembers a denial for the retry
 * of the same call (denialKey), and notifies its completion on the session.
 */
function notifyWhenDone(cfg: ToolConfig, server: McpServer, bg: Background, log: Logger, caller: Caller, a: Approval, denialKey: string): void {
  if (bg.signal.aborted) return;
  const timeoutMs = Math.max(a.expiresAt.getTime() + 60_000 - Date.now(), 1000);
  bg.track(
    (async () => {
      try {
        const st = await cfg.connectd.wait(caller.token, a.id, { signal: bg.signal, timeoutMs });
        if (approvalOutcome(st) instanceof ApprovalDeniedError) {
          const now = Date.now();
          for (const [k, v] of denials) if (v.until <= now) denials.delete(k); // no retry came for these
          denials.set(denialKey, { approval: a, until: now + 10 * 60_000 });
        }
        await server.server.createElicitationCompletionNotifier(a.id)();
      } catch (err) {
        log.info("stopped following approval", { elicitation: a.id, error: errCode(err) });
      }
    })(),
  );
}

function stop(text: string): CallToolResult {
  return { isError: true, content: [{ type: "text", text }] };
}

function errCode(err: unknown): string {
  if (err instanceof ConnectdError && err.code) return err.code;
  if (err instanceof WaitTimeoutError) return "timeout";
  return "unreachable";
}
