// list_files: lists the user's files through connectd's provider API proxy
// (providerFetch: connectd attaches the credential, this server never holds
// it) or with the token it reads (credential "token"); when connectd has no
// credential it may use, it sends the user to connectd in the shape the
// request calls for, then lists the files (examples/mcp-server/tool.go):
// listFiles on SDK v1 for 2025-11-25 sessions, listFilesModern on SDK v2 for
// 2026-07-28 requests, and the fallback on both.
import {
  ConnectdClient,
  ConnectdError,
  ErrorFamily,
  Generation,
  URLElicitationUnsupportedError,
  WaitTimeoutError,
  chooseAccount,
  chosenAccount,
  isFamily,
  isRequestStateError,
  needsConnection,
  requestDigest,
  type AccountChoice,
  type Answer,
  type Elicitation,
  type ElicitationStatus,
  type Token,
} from "@connectd/client";
import {
  accountFormParams,
  callToolResult,
  elicitInputParams,
  elicitationComplete,
  fallbackToolResult,
  peerOf,
  toUrlElicitationRequiredError,
} from "@connectd/client/mcp-sdk";
import {
  accountFormResult,
  chosenAccountOf,
  fallbackToolResult as fallbackToolResultV2,
  inputRequiredResult,
  peerOf as peerOfModern,
  retryOf,
  toInputRequired,
} from "@connectd/client/mcp-sdk-v2";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult as CallToolResultV2, InputRequiredResult, ServerContext } from "@modelcontextprotocol/server";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { CallToolResult, ServerNotification, ServerRequest } from "@modelcontextprotocol/sdk/types.js";
import type { Caller } from "./auth.js";
import type { Logger } from "./log.js";

export type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** How a 2025-11-25 session is sent to connectd. */
export type LegacyStyle = "elicit" | "error";

/**
 * How list_files uses the user's credential. proxy (the default): the call
 * goes through connectd's proxy (providerFetch), which attaches the
 * credential, so this server never holds it — the only mode for a client
 * registered proxy-only. token: it reads the token (accountToken) and calls
 * the file service itself. connectd decides both alike (the same consent,
 * account choice and refusals), so the rest of the tool is the same.
 */
export type Credential = "proxy" | "token";

export interface ToolConfig {
  connectd: ConnectdClient;
  provider: string;
  scopes: string[];
  credential: Credential;
  /** proxy: the list endpoint below the provider's API base URL at connectd (its api_base_url). */
  filesPath: string;
  /** token: the file service's list endpoint URL. */
  filesApi: string;
  /** open_issue's POST below the provider's API base URL at connectd ({repo}: owner/name), always through the proxy. */
  issuesPath: string;
  /** elicit: elicitation/create within the call; error: -32042, then the client retries. */
  style: LegacyStyle;
  /** Bounds how long a 2025-11-25 call waits for the user to finish in the browser after elicitation/create. */
  waitTimeoutMs: number;
  /**
   * Bounds how long a 2026-07-28 retry with a pending requestState is held
   * before it is answered the same link with a fresh requestState: well
   * inside the client's request timeout (the SDKs' 60 s), or the answer is
   * lost (and the next retry starts over).
   */
  retryHoldMs: number;
}

/** Follows elicitations answered with -32042 after their call has ended. */
export interface Background {
  signal: AbortSignal;
  track(p: Promise<unknown>): void;
}

export interface FileList {
  owner: string;
  files: { name: string; size: number }[];
}

/** A tool result with a message for the user (the model reads and relays it). */
/**
 * The tool's answer to a connectd refusal that a connect link cannot fix
 * (an account id that is not the user's, connectd or the provider
 * unreachable); undefined when a link can (not connected, no consent, …).
 * The same in both credential modes and both protocol generations.
 */
function refusalAnswer(log: Logger, err: unknown, account: string): CallToolResult | undefined {
  if (account && (isFamily(err, ErrorFamily.NotFound) || isFamily(err, ErrorFamily.InvalidRequest))) {
    return stop(`${JSON.stringify(account)} is not one of your file-service accounts. Call list_files without account to choose one.`);
  }
  if (!needsConnection(err)) {
    log.warn("connectd lookup failed", { error: errCode(err) });
    return stop(`The file service cannot be reached through connectd right now (${errCode(err)}). Try again later.`);
  }
  return undefined;
}

/** The tool's answer when connectd could not mint the connect link. */
function mintFailed(log: Logger, err: unknown): CallToolResult {
  if (err instanceof URLElicitationUnsupportedError) {
    // The fallback is off (fallback: false).
    return stop(
      "This tool needs your file-service account, but this MCP client cannot open a connect link " +
        "(it needs protocol 2025-11-25 or later with URL-mode elicitation).",
    );
  }
  log.warn("connectd mint failed", { error: errCode(err) });
  return stop(`Could not start connecting your file-service account (${errCode(err)}).`);
}

function stop(text: string): CallToolResult {
  return { isError: true, content: [{ type: "text", text }] };
}

/** A short, secret-free description of a connectd error. */
function errCode(err: unknown): string {
  if (err instanceof ConnectdError && err.code) return err.code;
  if (err instanceof WaitTimeoutError) return "timeout";
  return "unreachable";
}

export async function listFiles(
  cfg: ToolConfig,
  server: McpServer,
  bg: Background,
  log: Logger,
  caller: Caller,
  args: Record<string, unknown>,
  extra: Extra,
): Promise<CallToolResult> {
  const cd = cfg.connectd;
  const peer = peerOf(server, extra);
  const digest = await requestDigest("list_files", args);
  // Which of the user's accounts at the file service: named by the caller,
  // or chosen by the user below when this server may use several. The id is
  // no secret and connectd checks it is the user's. "": the only one.
  let account = typeof args.account === "string" ? args.account : "";

  let got = await list(cfg, log, caller, account);
  const choice = "err" in got ? chooseAccount(got.err, cfg.provider) : undefined;
  if (choice) {
    const picked = await askAccount(server, log, peer.formElicitation === true, choice, extra);
    if (typeof picked !== "string") return picked;
    account = picked;
    got = await list(cfg, log, caller, account);
  }
  if ("result" in got) return got.result;
  // connectd's refusal: the same in both credential modes, since the proxy
  // decides exactly as the token read does.
  const final = refusalAnswer(log, got.err, account);
  if (final) return final;

  let ans: Answer;
  try {
    ans = await cd.requireConnection(
      caller.token,
      peer,
      {
        provider: cfg.provider,
        scopes: cfg.scopes,
        requestDigest: digest,
        // For a named account (reauthorization, a step-up, one this server
        // is not approved for yet) the link is for that one.
        ...(account ? { account } : {}),
        message: "list_files needs access to your files. Open the link to connect your file-service account.",
      },
      { signal: extra.signal },
    );
  } catch (err) {
    return mintFailed(log, err);
  }
  if (ans.ready) {
    // A retry while the link was pending, and the user finished while
    // requireConnection waited: the token lookup now succeeds.
    log.info("connected while the retried request waited", { elicitation: ans.elicitation.id });
    return lookupAndList(cfg, log, caller, account, "The file service cannot be reached through connectd right now (%s). Try again later.");
  }
  log.info("connection needed: elicitation minted", {
    elicitation: ans.elicitation.id,
    answer: answerKind(ans, cfg.style),
    protocol: peer.protocolVersion,
    same_link_again: ans.elicitation.again,
  });
  if (ans.fallback) {
    // No URL mode: the link in plain words; the next call finds the
    // connection (or waits, as a retry does).
    return fallbackToolResult(ans);
  }
  if (ans.generation !== Generation.URLElicitation) {
    // SDK v1 negotiates 2025-11-25 at most; 2026-07-28 requests are served
    // by listFilesModern.
    return stop("This MCP client's protocol version is not supported by this server.");
  }
  if (cfg.style === "error") {
    notifyWhenDone(cfg, server, bg, log, caller, ans.elicitation);
    // The SDK sends this error unchanged as the tool call's JSON-RPC error.
    throw toUrlElicitationRequiredError(ans);
  }
  return elicitAndWait(cfg, server, log, caller, ans, account, extra);
}

/** Names, for the log, what the client is answered: a fallback is no answer of the protocol generation, whatever the version. */
function answerKind(ans: Answer, style: LegacyStyle): string {
  if (ans.fallback) return "fallback";
  if (ans.generation === Generation.InputRequired) return "input_required";
  return style === "error" ? "url_elicitation_required_error" : "elicitation/create";
}

/**
 * list_files on SDK v2 for a 2026-07-28 request: the capabilities come from
 * the request's _meta; a missing connection answers connectd's
 * InputRequiredResult; the client's retry echoes connectd's request_state,
 * which is resumed at connectd — held up to retryHoldMs while the user is
 * still in the browser, then the same link again — and a spent or refused
 * state starts over. Nothing is sent to the client outside the answer (no
 * elicitation/create request, no notification).
 */
export async function listFilesModern(
  cfg: ToolConfig,
  log: Logger,
  caller: Caller,
  args: Record<string, unknown>,
  ctx: ServerContext,
): Promise<CallToolResultV2 | InputRequiredResult> {
  const cd = cfg.connectd;
  const peer = peerOfModern(ctx);
  const signal = ctx.mcpReq.signal;
  const digest = await requestDigest("list_files", args);
  let account = typeof args.account === "string" ? args.account : "";
  // The account form's answer (askAccountModern), on the retry.
  const chosen = chosenAccountOf(ctx, cfg.provider);
  if (chosen !== undefined) {
    if (!chosen) return stop("No file-service account was chosen, so the files cannot be listed. Call list_files again to choose one.");
    account = chosen;
  }

  const retry = retryOf(ctx, cfg.provider);
  if (retry) {
    if (retry.action && retry.action !== "accept") {
      // The user refused to open the link: do not ask again in this call,
      // and end the link, so that a later call gets a new one at once.
      try {
        const st = await cd.resolve(caller.token, retry.requestState, digest, { signal });
        await cd.cancel(caller.token, st.id, { signal });
      } catch (err) {
        log.warn("could not end the declined elicitation at connectd", { error: errCode(err) });
      }
      return refused(retry.action);
    }
    try {
      // Resolving consumes the request_state; the answer carries the fresh one.
      const st = await cd.resume(caller.token, retry.requestState, digest, cfg.retryHoldMs, { signal });
      log.info("request_state resolved", { elicitation: st.id, status: st.status });
      if (st.status === "pending") {
        return toInputRequired(cd.reissue(st, "Still waiting: open the link to connect your file-service account.", retry.key));
      }
      if (st.status !== "completed") return finalError(st);
      if (retry.account) account = retry.account; // the link was for that account (connectKey)
    } catch (err) {
      if (!isRequestStateError(err)) return stop(`Could not check the connection with connectd (${errCode(err)}).`);
      // Tampered, expired, or spent by an earlier retry whose answer the
      // client never got: start over (the same link while it is pending).
      log.info("request_state refused; starting over", { code: errCode(err) });
      if (retry.account) account = retry.account;
    }
  }

  // In either credential mode: connectd refuses a proxied call exactly as a
  // token read.
  const got = await list(cfg, log, caller, account);
  if ("result" in got) return got.result;
  {
    const err = got.err;
    const choice = chooseAccount(err, cfg.provider);
    if (choice) {
      log.info("several accounts: asking the user which", { accounts: choice.accounts.length, form: peer.formElicitation === true });
      if (!peer.formElicitation) return callToolResult(choice.fallback("list_files"));
      return accountFormResult(cfg.provider, choice.form("list_files can use any of these file-service accounts of yours. Which one should it list?"));
    }
    const final = refusalAnswer(log, err, account);
    if (final) return final;
  }

  let ans: Answer;
  try {
    ans = await cd.requireConnection(
      caller.token,
      peer,
      {
        provider: cfg.provider,
        scopes: cfg.scopes,
        requestDigest: digest,
        ...(account ? { account } : {}),
        message: "list_files needs access to your files. Open the link to connect your file-service account.",
      },
      { signal },
    );
  } catch (err) {
    return mintFailed(log, err);
  }
  if (ans.ready) {
    log.info("connected while the retried request waited", { elicitation: ans.elicitation.id });
    return lookupAndList(cfg, log, caller, account, "The file service cannot be reached through connectd right now (%s). Try again later.");
  }
  log.info("connection needed: elicitation minted", {
    elicitation: ans.elicitation.id,
    answer: answerKind(ans, cfg.style),
    protocol: peer.protocolVersion,
    same_link_again: ans.elicitation.again,
  });
  if (ans.fallback) return fallbackToolResultV2(ans);
  if (ans.generation !== Generation.InputRequired) return stop("This MCP client's protocol version is not supported by this server.");
  return inputRequiredResult(ans);
}

/**
 * Puts an account_required answer to the user: a form-mode elicitation of
 * their accounts within the call when the client declared form mode, else a
 * tool error that lists them and asks for list_files' account argument.
 * Returns the chosen connection id, or the tool result to answer with.
 */
async function askAccount(server: McpServer, log: Logger, form: boolean, choice: AccountChoice, extra: Extra): Promise<string | CallToolResult> {
  log.info("several accounts: asking the user which", { accounts: choice.accounts.length, form });
  if (!form) return callToolResult(choice.fallback("list_files"));
  const params = accountFormParams(choice.form("list_files can use any of these file-service accounts of yours. Which one should it list?"));
  let id: string | undefined;
  try {
    const r = await server.server.elicitInput(params, { relatedRequestId: extra.requestId, signal: extra.signal });
    if (r.action === "accept") id = chosenAccount(r.content);
  } catch (err) {
    log.warn("elicitation/create (form) failed", { error: err instanceof Error ? err.message : String(err) });
    return stop(`Could not ask you which file-service account to use: ${err instanceof Error ? err.message : String(err)}`);
  }
  return id ?? stop("No file-service account was chosen, so the files cannot be listed. Call list_files again to choose one.");
}

/**
 * The 2025-11-25 path within one tool call: ask the client to open the URL,
 * wait for connectd, notify completion, then list.
 */
async function elicitAndWait(
  cfg: ToolConfig,
  server: McpServer,
  log: Logger,
  caller: Caller,
  ans: Answer,
  account: string,
  extra: Extra,
): Promise<CallToolResult> {
  const params = elicitInputParams(ans);
  let action: string;
  try {
    // On this call's stream, so the client sees it within the call.
    const r = await server.server.elicitInput(params, { relatedRequestId: extra.requestId, signal: extra.signal });
    action = r.action;
  } catch (err) {
    log.warn("elicitation/create failed", { error: err instanceof Error ? err.message : String(err) });
    return stop(`Could not ask you to connect your file-service account: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (action !== "accept") {
    // End the link, so that a later call gets a new one at once.
    await cfg.connectd.cancel(caller.token, params.elicitationId).catch((err: unknown) =>
      log.warn("could not end the declined elicitation at connectd", { error: errCode(err) }),
    );
    return refused(action);
  }
  let st: ElicitationStatus;
  try {
    st = await cfg.connectd.wait(caller.token, params.elicitationId, { signal: extra.signal, timeoutMs: cfg.waitTimeoutMs });
  } catch (err) {
    if (err instanceof WaitTimeoutError) {
      return stop("Still waiting for you to finish connecting in the browser. Call list_files again when you are done.");
    }
    return stop(`Could not follow the connection with connectd (${errCode(err)}).`);
  }
  // The out-of-band interaction is over, whatever its outcome.
  await extra.sendNotification(elicitationComplete(params.elicitationId)).catch((err: unknown) => {
    log.warn("notifications/elicitation/complete failed", { error: err instanceof Error ? err.message : String(err) });
  });
  if (st.status !== "completed") return finalError(st);
  return lookupAndList(cfg, log, caller, account, "Connected, but connectd refused the file-service call (%s).");
}

/**
 * Follows an elicitation answered with URLElicitationRequiredError and sends
 * notifications/elicitation/complete on the session when connectd reports it
 * over, so the client knows it can retry.
 */
function notifyWhenDone(cfg: ToolConfig, server: McpServer, bg: Background, log: Logger, caller: Caller, e: Elicitation): void {
  if (bg.signal.aborted) return; // closing
  const timeoutMs = Math.max(e.expiresAt.getTime() + 60_000 - Date.now(), 1000);
  bg.track(
    (async () => {
      let st: ElicitationStatus;
      try {
        st = await cfg.connectd.wait(caller.token, e.id, { signal: bg.signal, timeoutMs });
      } catch (err) {
        log.info("stopped following elicitation", { elicitation: e.id, error: errCode(err) });
        return;
      }
      try {
        await server.server.createElicitationCompletionNotifier(e.id)();
      } catch (err) {
        log.info("notifications/elicitation/complete not delivered", { elicitation: e.id, error: err instanceof Error ? err.message : String(err) });
        return;
      }
      log.info("elicitation over; client notified", { elicitation: e.id, status: st.status });
    })(),
  );
}

async function lookupAndList(cfg: ToolConfig, log: Logger, caller: Caller, account: string, failure: string): Promise<CallToolResult> {
  const got = await list(cfg, log, caller, account);
  return "result" in got ? got.result : stop(failure.replace("%s", errCode(got.err)));
}

/**
 * Lists account's files ("": the one account this server is approved for)
 * in the configured credential mode. A refusal by connectd (not connected,
 * no consent, several accounts, unreachable, …) comes back as err, for the
 * caller to answer; every other outcome is the tool's result.
 */
async function list(cfg: ToolConfig, log: Logger, caller: Caller, account: string): Promise<{ result: CallToolResult } | { err: unknown }> {
  try {
    const result = cfg.credential === "token" ? await listWithToken(cfg, log, caller, account) : await listThroughProxy(cfg, log, caller, account);
    return { result };
  } catch (err) {
    return { err };
  }
}

/**
 * Calls the file service through connectd's proxy: the fetch providerFetch
 * returns is what a provider's own SDK would be given (Octokit's
 * request.fetch). connectd's refusals are thrown as ConnectdError, the file
 * service's answers come back as they are.
 */
async function listThroughProxy(cfg: ToolConfig, log: Logger, caller: Caller, account: string): Promise<CallToolResult> {
  // The scopes the tool needs go with the call (Connectd-Scopes): an account
  // without them is connectd's insufficient_scope, answered with a link to
  // add them, not the provider's 403.
  const pf = cfg.connectd.providerFetch(caller.token, cfg.provider, account ? { account, scopes: cfg.scopes } : { scopes: cfg.scopes });
  let resp: Response;
  try {
    // Only the path (below the provider's API base URL at connectd) and the
    // query count: every request goes to connectd's proxy for the provider,
    // whatever origin it names.
    resp = await pf(new URL(cfg.filesPath, `https://${cfg.provider}`), {
      headers: { Accept: "application/json" },
      signal: AbortSignal.timeout(15_000),
    });
  } catch (err) {
    if (err instanceof ConnectdError && err.code === "provider_unauthorized") {
      // The file service refused the credential even after connectd
      // refreshed it: as in token mode, unlink that account so the next
      // call reconnects.
      await unlink(cfg, log, caller, account);
      return stop("The file service refused the stored authorization, so it was removed. Call list_files again to reconnect.");
    }
    if (err instanceof ConnectdError && err.code === "proxy_not_supported") {
      log.warn("connectd has no API base URL for the provider: run this server with --credential token", { provider: cfg.provider });
      return stop("This server cannot reach the file service through connectd (it knows no API for it).");
    }
    throw err; // connectd's refusal, or connectd unreachable
  }
  return decode(resp);
}

/**
 * Reads the user's token and calls the file service with it. The token goes
 * only there: never into the result, an error or a log line.
 */
async function listWithToken(cfg: ToolConfig, log: Logger, caller: Caller, account: string): Promise<CallToolResult> {
  let tok: Token;
  try {
    tok = await cfg.connectd.accountToken(caller.token, cfg.provider, account, ...cfg.scopes);
  } catch (err) {
    if (err instanceof ConnectdError && err.code === "token_release_disabled") {
      log.warn("this client is registered proxy-only at connectd: run this server with --credential proxy");
      return stop("This server is registered at connectd to never receive a token; it must call the file service through connectd.");
    }
    throw err;
  }
  let resp: Response;
  try {
    resp = await fetch(cfg.filesApi, {
      headers: { Authorization: `Bearer ${tok.accessToken}`, Accept: "application/json" },
      redirect: "error",
      signal: AbortSignal.timeout(15_000),
    });
  } catch (err) {
    log.warn("file service unreachable", { error: err instanceof Error ? err.message : String(err) });
    return stop("The file service cannot be reached right now.");
  }
  if (resp.status === 401) {
    // The provider no longer honours the stored grant. Unlink that account, so the next call reconnects.
    await unlink(cfg, log, caller, tok.account.id);
    return stop("The file service refused the stored authorization, so it was removed. Call list_files again to reconnect.");
  }
  return decode(resp);
}

/** Removes the user's connection to account ("": the one this server is approved for); a failure is only logged. */
async function unlink(cfg: ToolConfig, log: Logger, caller: Caller, account: string): Promise<void> {
  await cfg.connectd.unlink(caller.token, cfg.provider, account ? { account } : {}).catch((err: unknown) => {
    log.warn("unlink after a refused credential failed", { error: errCode(err) });
  });
}

/** Turns the file service's answer into the tool's result. */
async function decode(resp: Response): Promise<CallToolResult> {
  if (resp.status !== 200) {
    await resp.body?.cancel().catch(() => {});
    return stop(`The file service answered ${resp.status}.`);
  }
  let out: FileList;
  try {
    const body = (await resp.json()) as Partial<FileList>;
    out = {
      owner: String(body.owner ?? ""),
      files: (body.files ?? []).map((f) => ({ name: String(f.name), size: Number(f.size) })),
    };
  } catch {
    return stop("The file service's answer could not be read.");
  }
  const names = out.files.map((f) => `${f.name} (${f.size} bytes)`);
  const text = `${out.files.length} files for ${out.owner}: ${names.join(", ")}`;
  return { content: [{ type: "text", text }], structuredContent: { ...out } };
}

/** Answers a user who did not accept to open the connect link (decline or cancel). */
function refused(action: string): CallToolResult {
  if (action === "cancel") {
    return stop("Connecting your file-service account was cancelled, so the files cannot be listed. Call list_files again to retry.");
  }
  return stop("You declined connecting your file-service account, so the files cannot be listed.");
}

/** Explains an elicitation that ended without a connection. */
function finalError(st: ElicitationStatus): CallToolResult {
  switch (st.status) {
    case "declined":
      return stop("You declined connecting your file-service account, so the files cannot be listed.");
    case "expired":
      return stop("The connect link expired. Call list_files again for a new one.");
    default:
      return stop(`Connecting your file-service account failed (${st.reason ?? ""}). Call list_files again to retry.`);
  }
}
