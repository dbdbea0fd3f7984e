// ConnectdClient: connectd's /v1 API for one MCP server (the Go client's
// client.go and wait.go in TypeScript). It uses only the platform's fetch.
import {
  ConnectdError,
  ConnectdNetworkError,
  ErrorFamily,
  URLElicitationUnsupportedError,
  WaitTimeoutError,
  approvalOutcome,
  approvalRequired,
} from "./errors.js";
import {
  answerFor,
  approvalFallbackResult,
  approvalKey,
  canOpenURL,
  connectKey,
  fallbackResult,
  generationOf,
  inputKey as defaultInputKey,
} from "./mcp.js";
import type { Answer, Peer } from "./mcp.js";
import type { components, paths } from "./openapi.js";
import { providerFetch } from "./proxy.js";
import type { ProviderFetch, ProviderFetchOptions } from "./proxy.js";
import { Token, isFinal } from "./types.js";
import type {
  Account,
  Approval,
  Body,
  Connection,
  Elicitation,
  ElicitationStatus,
  InputRequiredResult,
  MintRequest,
  Unlinked,
} from "./types.js";

type Schemas = components["schemas"];

/** Carries the user's MCP access token on every /v1 call. */
export const UserTokenHeader = "X-User-Token";

/** Bounds what is read from connectd. */
const maxResponse = 1 << 20;
/** connectd's longest long-poll, in seconds. */
const maxWaitSeconds = 60;
/** How long each long-poll of wait asks connectd to hold, in seconds. */
const pollWaitSeconds = 30;
/** Bounds how many approval ids requireApproval remembers. */
const maxHandedOut = 4096;

export interface ConnectdClientOptions {
  /** connectd's public origin, e.g. https://connect.example.com (a path prefix is allowed). */
  baseUrl: string;
  /** This MCP server's client key (cks_…). Keep it secret: it is sent on every call. */
  key: string;
  /** The fetch to call with; default globalThis.fetch. */
  fetch?: typeof fetch;
  /**
   * Bounds each HTTP call (default 90 000 ms, more than connectd's longest
   * long-poll). A shorter one makes wait poll with shorter waits.
   */
  timeoutMs?: number;
  /**
   * Permits an http:// baseUrl whose host is not a loopback address.
   * Development only: the key and the users' tokens would cross the network
   * in clear text. http://127.0.0.1 and http://localhost are always allowed.
   */
  allowHttp?: boolean;
  /** Sent with every call; default "connectd-client-ts". */
  userAgent?: string;
  /**
   * How long requireConnection waits when the MCP client retries a request
   * whose connect link is still pending (default 20 000 ms; negative: no
   * wait). See requireConnection.
   */
  retryWaitMs?: number;
  /**
   * By default requireConnection answers an MCP client that did not declare
   * URL-mode elicitation with a tool result that asks the user to open the
   * link and try again (Answer.fallback). false: it throws
   * URLElicitationUnsupportedError instead, without minting anything.
   */
  fallback?: boolean;
}

/** Options of the calls that can be cancelled. */
export interface CallOptions {
  signal?: AbortSignal;
}

export interface UnlinkOptions extends CallOptions {
  /** Which connection: its id, AccountAll for every one this client is approved for at the provider, or left out (the only one). */
  account?: string;
}

export interface WaitOptions extends CallOptions {
  /** Give up after this long with WaitTimeoutError (connectd ends the wait itself when the elicitation expires). */
  timeoutMs?: number;
}

/**
 * The client of connectd's /v1 API for one MCP server. Every call acts for the
 * user whose MCP access token it is given: the bare JWT the MCP server
 * received from its MCP client (and verified), which connectd verifies again.
 */
export class ConnectdClient {
  readonly #base: string;
  readonly #key: string;
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;
  readonly #userAgent: string;
  readonly #retryWaitMs: number;
  readonly #fallback: boolean;
  /** The approvals requireApproval handed out, by id, until each expires (ms): to recognise a retry. */
  readonly #handedOut = new Map<string, number>();

  constructor(opts: ConnectdClientOptions) {
    this.#base = checkBaseUrl(opts.baseUrl, opts.allowHttp ?? false);
    if (!opts.key || [...opts.key].some((c) => c <= " " || c === "\x7f")) {
      throw new TypeError("connectd client: key must be the client key (cks_…)");
    }
    this.#key = opts.key;
    this.#fetch = opts.fetch ?? globalThis.fetch.bind(globalThis);
    this.#timeoutMs = opts.timeoutMs && opts.timeoutMs > 0 ? opts.timeoutMs : 90_000;
    this.#userAgent = opts.userAgent || "connectd-client-ts";
    const rw = opts.retryWaitMs ?? 20_000;
    this.#retryWaitMs = rw === 0 ? 20_000 : Math.max(rw, 0);
    this.#fallback = opts.fallback ?? true;
  }

  /** connectd's base URL, as normalised. */
  get baseUrl(): string {
    return this.#base;
  }

  /** The key never shows in logs or JSON. */
  toString(): string {
    return `ConnectdClient{${this.#base}}`;
  }
  toJSON(): { baseUrl: string } {
    return { baseUrl: this.#base };
  }
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return this.toString();
  }

  /**
   * A currently valid credential for provider (GET
   * /v1/connections/{provider}/token), refreshed by connectd first if it was
   * about to expire. Every scope in required must have been granted, else the
   * error is insufficient_scope with missingScopes. When needsConnection(err),
   * call requireConnection.
   *
   * It reads the one connection at provider this client is approved for.
   * Approved for several (work and personal GitHub), it throws account_required
   * (isAccountRequired) with the accounts: ask the user which (chooseAccount),
   * then call accountToken.
   */
  async token(userToken: string, provider: string, ...requiredScopes: string[]): Promise<Token> {
    return this.accountToken(userToken, provider, "", ...requiredScopes);
  }

  /**
   * token for one of the user's accounts at provider: account is its
   * connection id (Account.id, Connection.id); "" is token's choice. An id that
   * is not one of the user's connections there is not_found; one this client
   * is not approved for is consent_required (mint with that account).
   */
  async accountToken(userToken: string, provider: string, account: string, ...requiredScopes: string[]): Promise<Token> {
    if (!provider) throw new TypeError("connectd client: empty provider");
    const query: Record<string, string> = {};
    if (requiredScopes.length) query.scopes = requiredScopes.join(",");
    if (account) query.account = account;
    const { body } = await this.#call<Schemas["Token"]>("GET", `/v1/connections/${enc(provider)}/token`, userToken, {
      query: Object.keys(query).length ? query : undefined,
    });
    return new Token(body);
  }

  /** The user's connections this client was allowed to use (GET /v1/connections). No credential is included. */
  async connections(userToken: string, opts?: CallOptions): Promise<Connection[]> {
    type B = Body<paths["/v1/connections"]["get"], 200>;
    const { body } = await this.#call<B>("GET", "/v1/connections", userToken, { signal: opts?.signal });
    return (body.connections ?? []).map((c) => {
      const out: Connection = {
        // Defaults for an older connectd, which sent fewer fields.
        provider: c.provider ?? "",
        id: c.id ?? "",
        displayName: c.display_name ?? "",
        status: c.status ?? "active",
        scopes: c.scopes ?? [],
      };
      if (c.label) out.label = c.label;
      if (c.account_label) out.accountLabel = c.account_label;
      if (c.created_at) out.createdAt = new Date(c.created_at);
      if (c.updated_at) out.updatedAt = new Date(c.updated_at);
      if (c.expires_at) out.expiresAt = new Date(c.expires_at);
      if (c.consent_required) out.consentRequired = true;
      return out;
    });
  }

  /**
   * Creates an elicitation (POST /v1/elicitations): a connect URL bound to
   * this client, the user and the provider, with the MCP shapes that carry
   * it. A 200 answer is the same request, still pending, answered again
   * (again: true, the same link).
   */
  async mint(userToken: string, req: MintRequest, opts?: CallOptions): Promise<Elicitation> {
    const body: Schemas["MintRequest"] = { provider: req.provider };
    if (req.scopes?.length) body.scopes = req.scopes;
    if (req.message) body.message = req.message;
    if (req.requestDigest) body.request_digest = req.requestDigest;
    if (req.account) body.account = req.account;
    const r = await this.#call<Schemas["Minted"]>("POST", "/v1/elicitations", userToken, {
      body,
      want: [201, 200],
      signal: opts?.signal,
    });
    return toElicitation(r.body, r.status === 200);
  }

  /**
   * An elicitation's state (GET /v1/elicitations/{id}). With waitSeconds > 0
   * connectd holds the answer until the elicitation leaves pending or the
   * wait ends (at most 60 s).
   */
  async status(userToken: string, elicitationId: string, waitSeconds = 0, opts?: CallOptions): Promise<ElicitationStatus> {
    if (!elicitationId) throw new TypeError("connectd client: empty elicitation id");
    const query = waitSeconds > 0 ? { wait: `${Math.ceil(Math.min(waitSeconds, maxWaitSeconds))}s` } : undefined;
    const { body } = await this.#call<Schemas["Status"]>("GET", `/v1/elicitations/${enc(elicitationId)}`, userToken, {
      query,
      signal: opts?.signal,
    });
    return toStatus(body);
  }

  /**
   * Blocks until the elicitation leaves pending (completed, declined, expired
   * or failed) and returns its final state. It long-polls connectd, which
   * answers as soon as the user finishes on any replica, and rides out
   * rate limiting, unavailability and network errors (Retry-After, else a
   * backoff from 250 ms to 5 s). It stops early only when the signal aborts
   * (throwing its reason), timeoutMs passes (WaitTimeoutError), or connectd
   * refuses the call.
   */
  async wait(userToken: string, elicitationId: string, opts: WaitOptions = {}): Promise<ElicitationStatus> {
    const signal = withTimeout(opts.signal, opts.timeoutMs);
    const waitSeconds = Math.max(Math.min(pollWaitSeconds, Math.floor(this.#timeoutMs / 1000) - 5), 1);
    let backoff = 250;
    try {
      for (;;) {
        let delay: number;
        try {
          const st = await this.status(userToken, elicitationId, waitSeconds, { signal });
          if (isFinal(st.status)) return st;
          backoff = 250;
          continue;
        } catch (err) {
          if (signal?.aborted) throw signal.reason;
          if (!retryable(err)) throw err;
          // connectd or the network is briefly unavailable: try again.
          delay = err instanceof ConnectdError && err.retryAfterMs ? err.retryAfterMs : backoff;
        }
        await sleep(delay, signal);
        backoff = Math.min(backoff * 2, 5000);
      }
    } finally {
      signal?.dispose();
    }
  }

  /**
   * Tells connectd that the user declined or cancelled opening the link in
   * the MCP client (DELETE /v1/elicitations/{id}): a pending elicitation ends
   * declined (reason client_declined), so the next requireConnection for the
   * request mints a new link at once instead of waiting on this one. Returns
   * the status after the call; one that already ended is returned as it is.
   */
  async cancel(userToken: string, elicitationId: string, opts?: CallOptions): Promise<ElicitationStatus> {
    if (!elicitationId) throw new TypeError("connectd client: empty elicitation id");
    const { body } = await this.#call<Schemas["Status"]>("DELETE", `/v1/elicitations/${enc(elicitationId)}`, userToken, {
      signal: opts?.signal,
    });
    return toStatus(body);
  }

  /**
   * Consumes a request_state the MCP client echoed back (POST
   * /v1/elicitations/resolve). While still pending, the answer's requestState
   * is a fresh one for the next round. requestDigest must repeat the one
   * given at mint time, if any.
   */
  async resolve(userToken: string, requestState: string, requestDigest?: string, opts?: CallOptions): Promise<ElicitationStatus> {
    type In = NonNullable<paths["/v1/elicitations/resolve"]["post"]["requestBody"]>["content"]["application/json"];
    const body: In = { request_state: requestState };
    if (requestDigest) body.request_digest = requestDigest;
    const r = await this.#call<Schemas["Status"]>("POST", "/v1/elicitations/resolve", userToken, { body, signal: opts?.signal });
    return toStatus(r.body);
  }

  /**
   * What an MCP server does when the client retries with the requestState it
   * was given (2026-07-28): resolve it and, while still pending, wait up to
   * maxWaitMs. The answer is final, or pending with a fresh requestState to
   * return with reissue. Refusals of the request_state: isRequestStateError.
   *
   * Resolving consumes the request_state, and the fresh one exists only in
   * this answer: keep maxWaitMs well inside the time the MCP client waits for
   * an answer (the TypeScript SDK's clients: 60 s by default; the example
   * servers hold 30 s), or the client gives up and the answer is lost. Its
   * next retry then echoes the spent state (isRequestStateError, code
   * request_state_replayed): start the request over (token, then
   * requireConnection), which finds the same pending link.
   */
  async resume(
    userToken: string,
    requestState: string,
    requestDigest: string | undefined,
    maxWaitMs: number,
    opts?: CallOptions,
  ): Promise<ElicitationStatus> {
    const st = await this.resolve(userToken, requestState, requestDigest, opts);
    if (isFinal(st.status) || maxWaitMs <= 0) return st;
    try {
      return await this.wait(userToken, st.id, { signal: opts?.signal, timeoutMs: maxWaitMs });
    } catch (err) {
      if (err instanceof WaitTimeoutError) return st; // still pending: hand back the fresh request_state
      throw err;
    }
  }

  /**
   * Deletes the user's connection to provider and revokes it at the provider
   * where supported (DELETE /v1/connections/{provider}). Every client's
   * consent to it is withdrawn. Without opts.account it is the one this
   * client is approved for (account_required when several); with an id that
   * one; with AccountAll every one this client is approved for there.
   */
  async unlink(userToken: string, provider: string, opts?: UnlinkOptions): Promise<Unlinked> {
    if (!provider) throw new TypeError("connectd client: empty provider");
    type B = Body<paths["/v1/connections/{provider}"]["delete"], 200>;
    const query = opts?.account ? { account: opts.account } : undefined;
    const { body } = await this.#call<B>("DELETE", `/v1/connections/${enc(provider)}`, userToken, { query, signal: opts?.signal });
    return {
      provider: body.provider,
      revokedAtProvider: body.revoked_at_provider,
      revocation: body.revocation,
      connections: (body.connections ?? []).map((c) => ({ id: c.id, revokedAtProvider: c.revoked_at_provider, revocation: c.revocation })),
    };
  }

  /**
   * Turns "this request needs provider X" into the MCP answer for what the
   * MCP client declared: it mints an elicitation and shapes it with
   * answerFor, or as the fallback tool result when the client did not
   * declare URL-mode elicitation (or speaks a protocol before 2025-11-25).
   * Call it when needsConnection(err) for a token call; for a token read of one
   * account, set req.account to it (its 2026-07-28 input key is then
   * connectKey(provider, account), so the retry knows the account). With fallback: false
   * such a client gets URLElicitationUnsupportedError and nothing is minted.
   *
   * A retry of a request whose link is still pending (connectd answers the
   * mint again; give the request a requestDigest so a retry is recognised)
   * waits on the long-poll for up to retryWaitMs: if the user finishes
   * meanwhile the answer is ready (look the token up again); if the link
   * ended otherwise a new one is minted; if it is still pending, the answer
   * carries the same link again.
   */
  async requireConnection(userToken: string, peer: Peer, req: MintRequest, opts?: CallOptions): Promise<Answer> {
    if (!canOpenURL(peer) && !this.#fallback) {
      throw new URLElicitationUnsupportedError(
        `connectd: the MCP client cannot do URL-mode elicitation: protocol version ${JSON.stringify(peer.protocolVersion)}, URL mode declared: ${peer.urlElicitation}`,
      );
    }
    let e = await this.mint(userToken, req, opts);
    if (e.again && this.#retryWaitMs > 0) {
      try {
        const st = await this.wait(userToken, e.id, { signal: opts?.signal, timeoutMs: this.#retryWaitMs });
        if (st.status === "completed") {
          return { generation: generationOf(peer.protocolVersion), elicitation: e, ready: true };
        }
        // declined, expired or failed while we waited: a new link
        e = await this.mint(userToken, req, opts);
      } catch (err) {
        if (!(err instanceof WaitTimeoutError)) throw err;
        // Still pending after retryWaitMs: the same link again.
      }
    }
    if (!canOpenURL(peer)) {
      return { generation: generationOf(peer.protocolVersion), elicitation: e, ready: false, fallback: fallbackResult(e) };
    }
    return answerFor(e, peer.protocolVersion, connectKey(req.provider, req.account));
  }

  /**
   * Turns a user_approval_required refusal of a proxied call (err, as
   * providerFetch or an SDK threw it) into the MCP answer for what the MCP
   * client declared, as requireConnection does for a connect link: the
   * approval shaped with answerFor (its 2026-07-28 input key is
   * approvalKey(provider, the approval's id); answer.approval is set), or the
   * fallback tool result (approvalFallbackResult) when the client did not
   * declare URL-mode elicitation. With fallback: false such a client gets
   * URLElicitationUnsupportedError. An err that is no such refusal is a
   * TypeError.
   *
   * Then wait for the user (wait on answer.elicitation.id; on a 2026-07-28
   * retry, status on the id approvalRetryOf reads from the key) and read the final status with approvalOutcome:
   * undefined → send exactly the same request again (it passes once);
   * ApprovalDeniedError → answer deniedResult and do not retry.
   *
   * connectd answers the same request asked again while its approval is
   * pending with the same approval. This client remembers each approval it
   * handed out until it expires: when one comes back (the MCP client retried
   * at once), it waits on the long-poll for up to retryWaitMs first. Approved
   * meanwhile, the answer is ready (send the request again); ended otherwise,
   * approvalOutcome's error is thrown; still pending, the answer carries the
   * same link again.
   */
  async requireApproval(userToken: string, peer: Peer, err: unknown, opts?: CallOptions): Promise<Answer> {
    const a = approvalRequired(err);
    if (!a) throw new TypeError("connectd client: requireApproval needs a user_approval_required refusal with its approval", { cause: err });
    if (!canOpenURL(peer) && !this.#fallback) {
      throw new URLElicitationUnsupportedError(
        `connectd: the MCP client cannot do URL-mode elicitation: protocol version ${JSON.stringify(peer.protocolVersion)}, URL mode declared: ${peer.urlElicitation}`,
      );
    }
    const generation = generationOf(peer.protocolVersion);
    const now = Date.now();
    if (this.#retryWaitMs > 0 && (this.#handedOut.get(a.id) ?? 0) > now) {
      try {
        const st = await this.wait(userToken, a.id, { signal: opts?.signal, timeoutMs: this.#retryWaitMs });
        const outcome = approvalOutcome(st);
        if (outcome) throw outcome;
        return { generation, elicitation: a, approval: a, ready: true };
      } catch (e) {
        if (!(e instanceof WaitTimeoutError)) throw e;
        // Still pending after retryWaitMs: the same link again.
      }
    }
    this.#remember(a, now);
    if (!canOpenURL(peer)) return { generation, elicitation: a, approval: a, ready: false, fallback: approvalFallbackResult(a) };
    return { ...answerFor(a, peer.protocolVersion, approvalKey(a.provider, a.id)), approval: a };
  }

  #remember(a: Approval, now: number): void {
    if (this.#handedOut.size >= maxHandedOut) {
      for (const [id, exp] of this.#handedOut) if (exp <= now) this.#handedOut.delete(id);
      // Still full: forget the oldest (a forgotten retry only waits no longer).
      for (const id of this.#handedOut.keys()) {
        if (this.#handedOut.size < maxHandedOut) break;
        this.#handedOut.delete(id);
      }
    }
    const exp = a.expiresAt.getTime();
    this.#handedOut.set(a.id, Number.isNaN(exp) ? now + 10 * 60_000 : exp);
  }

  /**
   * The InputRequiredResult that hands a still-pending elicitation back to
   * the MCP client (2026-07-28) with the fresh requestState from resolve or
   * resume. message is shown to the user; inputKey names the entry (default
   * inputKey(provider)).
   */
  reissue(status: ElicitationStatus, message: string, inputKey?: string): InputRequiredResult {
    if (status.status !== "pending" || !status.requestState || !status.id) {
      throw new TypeError("connectd client: reissue needs a pending status with a fresh requestState (from resolve or resume)");
    }
    const key = inputKey || defaultInputKey(status.provider);
    // The connect URL is connectd's origin and the opaque id (docs/api.md).
    const url = `${this.#base}/c/${enc(status.id)}`;
    return {
      resultType: "input_required",
      requestState: status.requestState,
      inputRequests: { [key]: { method: "elicitation/create", params: { mode: "url", url, message } } },
    };
  }

  /**
   * A fetch-compatible function for a provider's own SDK (Octokit's
   * request.fetch, …): every request it is given goes through connectd's
   * provider API proxy (GET, HEAD, POST, PUT, PATCH, DELETE
   * /v1/proxy/{provider}/{path}) for userToken's user
   * at provider, and connectd attaches the user's credential, so the MCP
   * server never holds it.
   *
   *     const octokit = new Octokit({ request: { fetch: cd.providerFetch(userToken, "github") } });
   *
   * Whatever origin the request names (the SDK's base URL), its path — less
   * opts.pathPrefix — is the API path below connectd's API base for the
   * provider, and its query is kept: GET https://api.github.com/user/repos?per_page=10
   * is sent as GET {connectd}/v1/proxy/github/user/repos?per_page=10. The
   * method, headers and body cross (a ReadableStream body is streamed, with
   * duplex "half"); Authorization is replaced by the client key, and
   * X-User-Token, Connectd-Account (opts.account) and, unless the request has
   * one, a fresh X-Request-Id are set. The provider's answer is returned as
   * connectd streams it (its url is connectd's). A redirect is followed only
   * within the request's origin (through connectd again; never by fetch
   * itself, which would carry the key elsewhere), as redirect: "follow" asks;
   * one to another origin is returned as it is.
   *
   * A refusal by connectd itself (not connected, no consent, the provider
   * refused the credential even refreshed, rate limited, …) is thrown as a
   * ConnectdError: needsConnection and the other helpers recognise it, also
   * as the cause of the SDK's own error. It is told apart from the provider's
   * JSON errors by its request_id, the request's X-Request-Id, which
   * connectd never forwards to the provider. Every other answer, the
   * provider's errors included, is returned untouched.
   *
   * connectd forwards only GET, HEAD, POST, PUT, PATCH and DELETE, as sent
   * (methods are case-sensitive, and fetch upper-cases every method but
   * "patch": write "PATCH"), and only a call the provider will act on
   * exactly as made. It refuses, before anything is looked up, with a
   * ConnectdError of the InvalidRequest family: another method (405
   * method_not_allowed, with Allow); a path that is not a plain path below
   * the API base — an empty, "." or ".." segment in any encoding, a ";", a
   * backslash (400 invalid_proxy_path); a method override or URL rewrite — a
   * header such as X-HTTP-Method-Override or X-Original-URL, a _method query
   * parameter or form-encoded field (400 proxy_override_refused). An SDK that
   * tunnels PATCH or DELETE through POST must be set to send the method
   * itself. providerFetch does not check these before sending: connectd's
   * answer is the one rule. A HEAD connectd refuses has no body to tell it
   * apart and comes back as a bare 400 or 405 response.
   *
   * No timeout of its own: connectd bounds each proxied call
   * (CONNECTD_PROXY_TIMEOUT, 5 minutes by default); pass a signal for less.
   */
  providerFetch(userToken: string, provider: string, opts?: ProviderFetchOptions): ProviderFetch {
    return providerFetch(
      { base: this.#base, key: this.#key, fetch: this.#fetch, userTokenHeader: UserTokenHeader, refusal: apiError },
      userToken,
      provider,
      opts,
    );
  }

  /** Makes one call and decodes an answer with one of the want statuses; any other status is a ConnectdError. */
  async #call<T>(
    method: string,
    path: string,
    userToken: string,
    o: { query?: Record<string, string>; body?: unknown; want?: number[]; signal?: AbortSignal | undefined },
  ): Promise<{ status: number; body: T }> {
    if (!userToken) {
      throw new ConnectdError({
        status: 0,
        code: "missing_user_token",
        description: `${method} ${path}: no user token given (the MCP access token of the user the call is for)`,
      });
    }
    let url = this.#base + path;
    if (o.query) url += "?" + new URLSearchParams(o.query).toString();
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.#key}`,
      [UserTokenHeader]: userToken,
      Accept: "application/json",
      "User-Agent": this.#userAgent,
    };
    if (o.body !== undefined) headers["Content-Type"] = "application/json";
    const signal = withTimeout(o.signal, this.#timeoutMs);
    try {
      let resp: Response;
      try {
        resp = await this.#fetch(url, {
          method,
          headers,
          body: o.body === undefined ? null : JSON.stringify(o.body),
          // Never follow: fetch would resend X-User-Token to wherever a redirect points.
          redirect: "manual",
          signal,
        });
      } catch (err) {
        if (o.signal?.aborted) throw o.signal.reason;
        // The URL holds no secret (the key and the token travel in headers).
        throw new ConnectdNetworkError(`connectd client: ${method} ${path}: ${signal.timedOut ? `no answer within ${this.#timeoutMs} ms` : errText(err)}`, { cause: err });
      }
      const raw = await readLimited(resp, method, path, o.signal);
      const want = o.want ?? [200];
      if (!want.includes(resp.status)) throw apiError(resp, raw);
      try {
        return { status: resp.status, body: JSON.parse(raw) as T };
      } catch {
        throw new ConnectdNetworkError(`connectd client: ${method} ${path}: answer is not the expected JSON`);
      }
    } finally {
      signal.dispose();
    }
  }
}

/** Validates baseUrl as Go's client.New does, and returns it without trailing slashes. */
function checkBaseUrl(raw: string, allowHttp: boolean): string {
  const bad = "connectd client: baseUrl must be an absolute https URL without user info, query or fragment";
  let u: URL;
  try {
    u = new URL(raw.replace(/\/+$/, ""));
  } catch {
    throw new TypeError(bad);
  }
  if (!u.host || u.username || u.password || u.search || u.hash || raw.includes("?") || raw.includes("#")) {
    throw new TypeError(bad);
  }
  if (u.protocol === "http:") {
    if (!allowHttp && !isLoopback(u.hostname)) {
      throw new TypeError("connectd client: baseUrl must use https (set allowHttp for a development http:// URL)");
    }
  } else if (u.protocol !== "https:") {
    throw new TypeError("connectd client: baseUrl must be an http(s) URL");
  }
  return u.href.replace(/\/+$/, "");
}

/** localhost, 127.0.0.0/8 or ::1 (as the WHATWG URL parser writes them). */
function isLoopback(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, "");
  return h === "localhost" || h === "::1" || /^127\.\d+\.\d+\.\d+$/.test(h) || /^::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}$/.test(h);
}

function enc(s: string): string {
  return encodeURIComponent(s);
}

function errText(err: unknown): string {
  const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : "";
  return (err instanceof Error ? err.message : String(err)) + cause;
}

/** Reads at most maxResponse bytes of the answer. */
async function readLimited(resp: Response, method: string, path: string, outer?: AbortSignal): Promise<string> {
  const chunks: Uint8Array[] = [];
  let n = 0;
  try {
    if (resp.body) {
      for await (const chunk of resp.body as unknown as AsyncIterable<Uint8Array>) {
        n += chunk.byteLength;
        if (n > maxResponse) {
          await resp.body.cancel().catch(() => {});
          throw new ConnectdNetworkError(`connectd client: ${method} ${path}: answer larger than ${maxResponse} bytes`);
        }
        chunks.push(chunk);
      }
    }
  } catch (err) {
    if (err instanceof ConnectdNetworkError) throw err;
    if (outer?.aborted) throw outer.reason;
    throw new ConnectdNetworkError(`connectd client: read ${method} ${path}: ${errText(err)}`, { cause: err });
  }
  const all = new Uint8Array(n);
  let off = 0;
  for (const c of chunks) {
    all.set(c, off);
    off += c.byteLength;
  }
  return new TextDecoder().decode(all);
}

function apiError(resp: Response, raw: string): ConnectdError {
  let b: Partial<Schemas["Error"]> = {};
  try {
    const parsed: unknown = JSON.parse(raw);
    if (parsed && typeof parsed === "object") b = parsed as Partial<Schemas["Error"]>;
  } catch {
    // not connectd's JSON
  }
  const init: ConstructorParameters<typeof ConnectdError>[0] = { status: resp.status };
  if (typeof b.error === "string" && b.error) {
    init.code = b.error;
    if (typeof b.error_description === "string") init.description = b.error_description;
    if (typeof b.request_id === "string") init.requestId = b.request_id;
    if (Array.isArray(b.missing_scopes)) init.missingScopes = b.missing_scopes;
    if (Array.isArray(b.unapproved_scopes)) init.unapprovedScopes = b.unapproved_scopes;
    init.accountChanged = b.account_changed === true;
    if (Array.isArray(b.accounts)) init.accounts = b.accounts.map(toAccount);
    const approval = (b as { approval?: unknown }).approval;
    if ((b.error as string) === "user_approval_required" && approval && typeof approval === "object") {
      try {
        init.approval = toApproval(approval as RawApproval);
      } catch {
        // not the approval document: the refusal without it
      }
    }
  } else {
    init.description = `unexpected answer: ${resp.statusText || resp.status}`;
  }
  const ra = resp.headers.get("Retry-After");
  if (ra) {
    if (/^\d+$/.test(ra.trim())) init.retryAfterMs = Number(ra.trim()) * 1000;
    else {
      const t = Date.parse(ra);
      if (!Number.isNaN(t)) init.retryAfterMs = Math.max(t - Date.now(), 0);
    }
  }
  return new ConnectdError(init);
}

/** Whether an error of a status poll is worth retrying: rate limiting, unavailability, network errors. */
function retryable(err: unknown): boolean {
  if (err instanceof ConnectdNetworkError) return true;
  return err instanceof ConnectdError && (err.is(ErrorFamily.Unavailable) || err.is(ErrorFamily.RateLimited));
}

function toAccount(a: Schemas["Account"]): Account {
  const out: Account = { id: String(a.id ?? ""), displayName: String(a.display_name ?? "") };
  if (a.label) out.label = String(a.label);
  return out;
}

function toStatus(s: Schemas["StatusFields"]): ElicitationStatus {
  const out: ElicitationStatus = {
    id: s.elicitation_id,
    status: s.status,
    provider: s.provider,
    scopes: s.scopes ?? [],
    expiresAt: new Date(s.expires_at),
  };
  const kind = (s as { kind?: unknown }).kind;
  if (typeof kind === "string" && kind) out.kind = kind;
  if (s.reason) out.reason = s.reason;
  if (s.completed_at) out.completedAt = new Date(s.completed_at);
  if (s.request_state) out.requestState = s.request_state;
  return out;
}

function toElicitation(m: Schemas["Minted"], again: boolean): Elicitation {
  const params = { ...m.elicitation, mode: "url" as const };
  const rpc = m.url_elicitation_required_error;
  return {
    ...toStatus(m),
    url: m.url,
    params,
    urlElicitationRequiredError: {
      code: rpc.code ?? -32042,
      message: rpc.message ?? "",
      data: { elicitations: (rpc.data?.elicitations ?? []).map((p) => ({ ...p, mode: "url" as const })) },
    },
    inputRequest: {
      method: "elicitation/create",
      params: { mode: "url", url: m.input_request.params.url, message: m.input_request.params.message },
    },
    again,
  };
}

/** The approval document of a user_approval_required envelope: a mint answer and the request. */
type RawApproval = Schemas["Minted"] & { method?: unknown; path?: unknown; rule?: unknown; message?: unknown };

function toApproval(r: RawApproval): Approval {
  const str = (v: unknown) => (typeof v === "string" ? v : "");
  return {
    ...toElicitation(r, false),
    method: str(r.method),
    path: str(r.path),
    rule: str(r.rule),
    message: str(r.message),
    account: "",
  };
}

/** A signal that aborts when outer does or after ms (if given), and reports which. */
interface TimedSignal extends AbortSignal {
  timedOut: boolean;
  dispose(): void;
}

function withTimeout(outer: AbortSignal | undefined, ms: number | undefined): TimedSignal {
  const ac = new AbortController();
  const s = ac.signal as TimedSignal;
  s.timedOut = false;
  const onAbort = () => ac.abort(outer?.reason);
  if (outer?.aborted) ac.abort(outer.reason);
  else outer?.addEventListener("abort", onAbort, { once: true });
  const timer =
    ms !== undefined && ms > 0
      ? setTimeout(() => {
          s.timedOut = true;
          ac.abort(new WaitTimeoutError());
        }, ms)
      : undefined;
  s.dispose = () => {
    if (timer) clearTimeout(timer);
    outer?.removeEventListener("abort", onAbort);
  };
  return s;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
