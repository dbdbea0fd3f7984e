// Errors of the connectd client. Every refusal connectd answers is a
// ConnectdError with the HTTP status and the stable code of its JSON error
// envelope (docs/api.md); ErrorFamily groups codes the way the Go client's
// sentinel errors do. No error ever carries the client key or a token: they
// travel in headers, and messages are built only from status, code and
// connectd's description (which never holds a secret).
import type { Account, Approval, ElicitationStatus } from "./types.js";

/** The families of refusals, as the Go client's sentinel errors (errors.go). */
export const ErrorFamily = {
  /** The user has no connection to the provider: mint an elicitation. */
  NotConnected: "not_connected",
  /** Connected, but this MCP server is not approved for all of it: mint an elicitation. */
  ConsentRequired: "consent_required",
  /** The connection lacks a required scope (missingScopes): mint an elicitation asking for them. */
  InsufficientScope: "insufficient_scope",
  /** The provider refused the stored grant: mint an elicitation (for a token read with an account, with that account). */
  ReauthorizationRequired: "reauthorization_required",
  /**
   * This client is approved for several of the user's accounts at the provider
   * and the call named none; accounts lists them: ask the user which
   * (chooseAccount), then call again with that id. A choice, not a missing
   * connection: needsConnection is false.
   */
  AccountRequired: "account_required",
  /** Unknown elicitation, or another client's or user's; or an account that is not one of the user's at the provider (connectd does not tell them apart). */
  NotFound: "not_found",
  /** The client key is missing, wrong, expired or the client is disabled. */
  InvalidClient: "invalid_client",
  /** The user's MCP access token was refused (code says which way). */
  UserToken: "user_token",
  UnknownProvider: "unknown_provider",
  ProviderNotAllowed: "provider_not_allowed",
  /**
   * Malformed input (bad scope, message too long, …), or a proxied call
   * connectd does not forward as made: a path that is not a plain path below
   * the provider's API (invalid_proxy_path), a method outside GET, HEAD, POST,
   * PUT, PATCH, DELETE (405 method_not_allowed), a method override or URL
   * rewrite (proxy_override_refused).
   */
  InvalidRequest: "invalid_request",
  /** Every refusal of a request_state; the families below say why. */
  RequestState: "request_state",
  RequestStateInvalid: "request_state_invalid",
  RequestStateExpired: "request_state_expired",
  RequestStateReplayed: "request_state_replayed",
  RequestStateWrongUser: "request_state_wrong_user",
  RequestStateWrongClient: "request_state_wrong_client",
  RequestDigestMismatch: "request_digest_mismatch",
  /** Too many requests; retryAfterMs says when to retry. */
  RateLimited: "rate_limited",
  /** connectd or a dependency is temporarily unavailable. */
  Unavailable: "unavailable",
  /**
   * A proxied call matched a request rule that asks the user first
   * (user_approval_required); the provider was not called. approval is the
   * approval elicitation: requireApproval, wait, then send exactly the same
   * request again.
   */
  ApprovalRequired: "approval_required",
} as const;
export type ErrorFamily = (typeof ErrorFamily)[keyof typeof ErrorFamily];

const F = ErrorFamily;

/** connectd's error codes and the families each stands for (errors.go's codeErrors). */
const codeFamilies: Readonly<Record<string, readonly ErrorFamily[]>> = {
  not_connected: [F.NotConnected],
  consent_required: [F.ConsentRequired],
  insufficient_scope: [F.InsufficientScope],
  reauthorization_required: [F.ReauthorizationRequired],
  account_required: [F.AccountRequired],
  not_found: [F.NotFound],
  invalid_client: [F.InvalidClient],
  invalid_dpop_proof: [F.InvalidClient], // a client that must prove its calls with DPoP
  missing_user_token: [F.UserToken],
  invalid_token: [F.UserToken],
  token_expired: [F.UserToken],
  token_not_yet_valid: [F.UserToken],
  untrusted_issuer: [F.UserToken],
  wrong_audience: [F.UserToken],
  unknown_provider: [F.UnknownProvider],
  provider_not_allowed: [F.ProviderNotAllowed],
  invalid_request: [F.InvalidRequest],
  invalid_scope: [F.InvalidRequest],
  request_too_large: [F.InvalidRequest],
  request_state_invalid: [F.RequestState, F.RequestStateInvalid],
  request_state_expired: [F.RequestState, F.RequestStateExpired],
  request_state_replayed: [F.RequestState, F.RequestStateReplayed],
  request_state_wrong_user: [F.RequestState, F.RequestStateWrongUser],
  request_state_wrong_client: [F.RequestState, F.RequestStateWrongClient],
  request_digest_mismatch: [F.RequestState, F.RequestDigestMismatch],
  rate_limited: [F.RateLimited],
  provider_unavailable: [F.Unavailable],
  provider_timeout: [F.Unavailable],
  jwks_unavailable: [F.Unavailable],
  // The provider API proxy (/v1/proxy).
  provider_unauthorized: [F.ReauthorizationRequired],
  provider_rate_limited: [F.RateLimited],
  provider_response_too_large: [F.InvalidRequest],
  proxy_not_supported: [F.ProviderNotAllowed],
  token_release_disabled: [F.ProviderNotAllowed], // a proxy-only client: call through the proxy
  proxy_not_allowed: [F.ProviderNotAllowed], // outside the client's request rules
  provider_app_required: [F.ProviderNotAllowed], // the client's organization has no OAuth app at the provider
  database_unavailable: [F.Unavailable],
  // The proxy's refusals of the call itself, before anything is looked up: a
  // path that is not a plain path below the API base, a method it does not
  // forward (405, with Allow), a method override or URL rewrite. The call is
  // wrong as made; sending it again will not help.
  invalid_proxy_path: [F.InvalidRequest],
  method_not_allowed: [F.InvalidRequest],
  proxy_override_refused: [F.InvalidRequest],
  // A request rule that asks: the user approves this call first.
  user_approval_required: [F.ApprovalRequired],
};

export interface ConnectdErrorInit {
  status: number;
  code?: string;
  description?: string;
  requestId?: string;
  missingScopes?: string[];
  unapprovedScopes?: string[];
  accountChanged?: boolean;
  accounts?: Account[];
  approval?: Approval;
  retryAfterMs?: number;
}

/** A refusal from connectd (or, with status 0, a call refused before it was made). */
export class ConnectdError extends Error {
  override readonly name = "ConnectdError";
  /** HTTP status; 0 when the client refused to make the call. */
  readonly status: number;
  /** Stable error code, e.g. "not_connected"; empty if the answer was not connectd's JSON. */
  readonly code: string;
  /** Human-readable explanation from connectd. */
  readonly description: string;
  /** connectd's request id, for its logs. */
  readonly requestId: string;
  /** The scopes the connection lacks (insufficient_scope). */
  readonly missingScopes: string[];
  /** Scopes the credential carries that the user has not approved for this MCP server (consent_required). */
  readonly unapprovedScopes: string[];
  /** The connection is to another provider account than the approved one (consent_required). */
  readonly accountChanged: boolean;
  /** The user's accounts at the provider this client may use (account_required): name one with its id. */
  readonly accounts: Account[];
  /** The approval elicitation of a user_approval_required refusal (approvalRequired). */
  readonly approval?: Approval;
  /** The Retry-After delay of a 429 or 503 answer, if any. */
  readonly retryAfterMs?: number;

  constructor(init: ConnectdErrorInit) {
    super(describe(init));
    this.status = init.status;
    this.code = init.code ?? "";
    this.description = init.description ?? "";
    this.requestId = init.requestId ?? "";
    this.missingScopes = init.missingScopes ?? [];
    this.unapprovedScopes = init.unapprovedScopes ?? [];
    this.accountChanged = init.accountChanged ?? false;
    this.accounts = init.accounts ?? [];
    if (init.approval !== undefined) this.approval = init.approval;
    if (init.retryAfterMs !== undefined) this.retryAfterMs = init.retryAfterMs;
  }

  /** Reports whether this error belongs to family (Go: errors.Is with a sentinel). */
  is(family: ErrorFamily): boolean {
    const known = codeFamilies[this.code];
    if (known) return known.includes(family);
    switch (this.status) {
      case 429:
        return family === F.RateLimited;
      case 502:
      case 503:
      case 504:
        return family === F.Unavailable;
      case 401:
        // An unknown 401 code from a newer connectd is still a credential
        // problem; which one the description says.
        return family === F.UserToken && this.code !== "";
    }
    return false;
  }
}

function describe(e: ConnectdErrorInit): string {
  let s = `connectd: ${e.status}`;
  if (e.code) s += ` ${e.code}`;
  if (e.description) s += `: ${e.description}`;
  if (e.missingScopes?.length) s += ` (missing scopes: ${e.missingScopes.join(" ")})`;
  return s;
}

/**
 * connectd could not be reached, or its answer could not be read: a network
 * error, a per-call timeout, or an answer that is not the expected JSON.
 * Wait retries these.
 */
export class ConnectdNetworkError extends Error {
  override readonly name = "ConnectdNetworkError";
}

/**
 * The MCP client cannot do URL-mode elicitation (a protocol before
 * 2025-11-25, or no "url" elicitation capability declared), so there is no way
 * to send the user to connectd; requireConnection throws it when the fallback
 * is off, answerFor for a protocol before 2025-11-25.
 */
export class URLElicitationUnsupportedError extends Error {
  override readonly name = "URLElicitationUnsupportedError";
}

/** Thrown by wait and resume when their own timeoutMs ran out (not the caller's signal). */
export class WaitTimeoutError extends Error {
  override readonly name = "WaitTimeoutError";
  constructor(message = "connectd client: timed out waiting for the elicitation") {
    super(message);
  }
}

/**
 * The ConnectdError err is or wraps: err itself, or the first one along its
 * cause chain (Go: errors.As). An SDK called with providerFetch throws its
 * own error with connectd's refusal as its cause (Octokit's RequestError).
 */
export function connectdErrorOf(err: unknown): ConnectdError | undefined {
  for (let e = err, depth = 0; e !== null && e !== undefined && depth < 16; depth++) {
    if (e instanceof ConnectdError) return e;
    if (typeof e !== "object") return undefined;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Reports whether err is, or wraps (connectdErrorOf), a ConnectdError of family. */
export function isFamily(err: unknown, family: ErrorFamily): boolean {
  return connectdErrorOf(err)?.is(family) ?? false;
}

/**
 * Reports whether err means the user must go through connectd's connect flow
 * before the provider can be used: not connected, no consent for this MCP
 * server, missing scopes, or a dead grant. The answer to all four is the
 * same: requireConnection.
 */
export function needsConnection(err: unknown): boolean {
  return (
    isFamily(err, F.NotConnected) ||
    isFamily(err, F.ConsentRequired) ||
    isFamily(err, F.InsufficientScope) ||
    isFamily(err, F.ReauthorizationRequired)
  );
}

/** Reports whether err is any refusal of a request_state (Go: ErrRequestState). */
export function isRequestStateError(err: unknown): boolean {
  return isFamily(err, F.RequestState);
}

/** Reports whether err is a refusal of the user's MCP access token (Go: ErrUserToken). */
export function isUserTokenError(err: unknown): boolean {
  return isFamily(err, F.UserToken);
}

/** Reports whether err is a refusal of the client key (Go: ErrInvalidClient). */
export function isInvalidClient(err: unknown): boolean {
  return isFamily(err, F.InvalidClient);
}

/** Reports whether err is connectd asking to slow down (Go: ErrRateLimited). */
export function isRateLimited(err: unknown): boolean {
  return isFamily(err, F.RateLimited);
}

/** Reports whether err is a temporary unavailability (Go: ErrUnavailable). */
export function isUnavailable(err: unknown): boolean {
  return isFamily(err, F.Unavailable);
}

/** Reports whether err asks which of the user's accounts to use (Go: ErrAccountRequired). */
export function isAccountRequired(err: unknown): boolean {
  return isFamily(err, F.AccountRequired);
}

/** The accounts an account_required refusal lists, or [] (Go: client.Accounts). */
export function accountsOf(err: unknown): Account[] {
  const e = connectdErrorOf(err);
  return e?.code === "account_required" ? e.accounts : [];
}

/** The scopes an insufficient_scope refusal lists, or []. */
export function missingScopes(err: unknown): string[] {
  return connectdErrorOf(err)?.missingScopes ?? [];
}

/** Reports whether err is a proxied call that needs the user's approval first (Go: ErrApprovalRequired). */
export function isApprovalRequired(err: unknown): boolean {
  return isFamily(err, F.ApprovalRequired);
}

/**
 * The approval a user_approval_required refusal carries, or undefined when
 * err is not one (Go: client.ApprovalRequired). It reads through SDK errors
 * that carry connectd's refusal as their cause (connectdErrorOf).
 */
export function approvalRequired(err: unknown): Approval | undefined {
  const e = connectdErrorOf(err);
  return e?.code === "user_approval_required" ? e.approval : undefined;
}

/**
 * The user denied the request on connectd's approval page (status
 * declined, reason user_denied). It was not made: do not send it again; tell
 * the user and the model it was denied (deniedResult). Go: ErrApprovalDenied.
 */
export class ApprovalDeniedError extends Error {
  override readonly name = "ApprovalDeniedError";
  constructor(readonly elicitationId: string) {
    super(`connectd: the user denied this request (approval ${elicitationId})`);
  }
}

/**
 * An approval that ended without a decision: the MCP client's user dismissed
 * the link (reason client_declined; Go: ErrApprovalDismissed), or nobody
 * answered in time (status expired; Go: ErrApprovalExpired). The next
 * attempt asks again.
 */
export class ApprovalNotGivenError extends Error {
  override readonly name = "ApprovalNotGivenError";
  constructor(
    readonly elicitationId: string,
    readonly status: string,
    readonly reason: string,
  ) {
    super(`connectd: the approval ${elicitationId} was not given (${status}${reason ? `, ${reason}` : ""})`);
  }
  /** Nobody answered in time. */
  get expired(): boolean {
    return this.status === "expired";
  }
}

/**
 * What a final status of an approval means (Go: client.ApprovalOutcome):
 * undefined when the user approved (completed: send exactly the same request
 * again), ApprovalDeniedError when they denied it, ApprovalNotGivenError when
 * the link was dismissed or expired, another Error for any other state.
 */
export function approvalOutcome(st: ElicitationStatus): Error | undefined {
  if (st.status === "completed") return undefined;
  if (st.status === "declined" && st.reason === "user_denied") return new ApprovalDeniedError(st.id);
  if (st.status === "declined" || st.status === "expired") return new ApprovalNotGivenError(st.id, st.status, st.reason ?? "");
  return new Error(`connectd client: approval ${st.id} is ${st.status} (${st.reason ?? ""})`);
}
