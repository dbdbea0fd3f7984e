// The client's public types. The wire shapes come from docs/openapi.yaml
// (openapi.ts, generated); these are their idiomatic TypeScript forms.
import type { components, paths } from "./openapi.js";

type Schemas = components["schemas"];

/** The JSON body of an operation's answer with status S. */
export type Body<O, S extends number> = O extends { responses: infer R }
  ? S extends keyof R
    ? R[S] extends { content: { "application/json": infer J } }
      ? J
      : never
    : never
  : never;

type UnlinkBody = Body<paths["/v1/connections/{provider}"]["delete"], 200>;

/** The body of POST /v1/elicitations. */
export interface MintRequest {
  /** The provider id in connectd's catalog, e.g. "github". */
  provider: string;
  /** Scopes to ask for; empty means the provider's default scopes. */
  scopes?: string[];
  /** Shown to the user by the MCP client (at most 500 characters); empty lets connectd write one. */
  message?: string;
  /** Binds the request_state to the original MCP request (see requestDigest). */
  requestDigest?: string;
  /**
   * Which of the user's accounts at the provider: a connection id (Account.id:
   * reauthorize or step up that one; not_found when it is not this user's),
   * AccountNew (connect another account; the provider is asked to let the user
   * choose), or left out (the user connects whichever account they sign in with).
   * A flow for a connection id ends on that connection or not at all: a user who
   * signs in at the provider as another account (one it names) gets connectd's
   * page saying so (account_mismatch), nothing is stored or approved, and the
   * elicitation stays pending, so the user may try again from the same link
   * (wait keeps waiting; no other connection appears).
   */
  account?: string;
}

/** MintRequest.account: connect another account at the provider. */
export const AccountNew = "new";
/** unlink's account: every connection at the provider this client is approved for. */
export const AccountAll = "all";

/**
 * One of the user's accounts (connections) at a provider, as connectd names it
 * to a client: never the provider's own account id. A user may have several at
 * one provider (work and personal GitHub); pass id as the account of
 * accountToken, unlink or mint to name one.
 */
export interface Account {
  /** The connection id, cn_ and 26 characters of [a-z2-7]: stable, not a secret. */
  id: string;
  /**
   * connectd's one name for the account, the same in every answer: the
   * provider's label for it (login, email, workspace), else the provider's own
   * id for it (a provider that names accounts only by an id, an ID token's
   * sub). "" only for an account the provider does not name — an API key, a
   * sign-in the provider said nothing about, which label or id tells apart —
   * and for a listed connection now to another provider account than this
   * client is approved for (Connection.consentRequired): not this client's to
   * know.
   */
  displayName: string;
  /** The user's own name for it ("work"), set on connectd's account page. */
  label?: string;
}

/** How an account is shown to its user: "work (octocat)", the label or display name alone, or the id (Go's Account.Title). */
export function accountTitle(a: Account): string {
  if (a.label && a.displayName && a.label !== a.displayName) return `${a.label} (${a.displayName})`;
  return a.label || a.displayName || a.id;
}

/** The state of an elicitation. */
export type Status = Schemas["StatusFields"]["status"];

/** Why an elicitation was declined or failed. */
export type Reason = NonNullable<Schemas["StatusFields"]["reason"]>;

export const StatusPending = "pending" satisfies Status;
export const StatusCompleted = "completed" satisfies Status;
export const StatusDeclined = "declined" satisfies Status;
export const StatusExpired = "expired" satisfies Status;
export const StatusFailed = "failed" satisfies Status;

/** Reports whether an elicitation in status will not change any more. */
export function isFinal(status: Status): boolean {
  return status !== "pending";
}

/** ElicitationStatus.kind of a connect link (connect the provider, or consent to this client). */
export const KindConnect = "connect";
/** ElicitationStatus.kind of an approval (approve one proxied call: a request rule that asks). */
export const KindApproval = "approval";
/** The reason of an approval the user denied on connectd's page: do not retry it (deniedResult). */
export const ReasonUserDenied = "user_denied";
/** The reason of a link the MCP client's user declined or dismissed (cancel). */
export const ReasonClientDeclined = "client_declined";

/** connectd's status document of an elicitation. */
export interface ElicitationStatus {
  id: string;
  status: Status;
  /**
   * What the user is asked: KindConnect (connect, or consent) or
   * KindApproval (approve one proxied call). An older connectd sends none: a
   * connect link.
   */
  kind?: string;
  /** Why it failed or was declined (provider_error, exchange_failed, user_denied, …). */
  reason?: Reason;
  provider: string;
  scopes: string[];
  expiresAt: Date;
  completedAt?: Date;
  /** Set by mint, and by resolve while still pending: a fresh single-use state for the MCP client. */
  requestState?: string;
}

/** The params of a URL-mode elicitation/create request, with MCP's field names. */
export interface ElicitParams {
  mode: "url";
  /** Required by 2025-11-25 (and echoed by notifications/elicitation/complete); 2026-07-28 input requests leave it out. */
  elicitationId?: string;
  url: string;
  message: string;
}

/** One entry of InputRequiredResult.inputRequests (2026-07-28). */
export interface InputRequest {
  method: "elicitation/create";
  params: ElicitParams;
}

/** URLElicitationRequiredError's data. */
export interface URLElicitationData {
  elicitations: ElicitParams[];
}

/** A JSON-RPC error object; connectd fills it as URLElicitationRequiredError (-32042). */
export interface RPCError {
  code: number;
  message: string;
  data: URLElicitationData;
}

/** The 2026-07-28 answer to a request that needs the user first. */
export interface InputRequiredResult {
  resultType: "input_required";
  inputRequests: Record<string, InputRequest>;
  requestState: string;
}

/** A freshly minted elicitation: the connect URL and the MCP shapes that carry it. */
export interface Elicitation extends ElicitationStatus {
  /** The connect URL: https://<connectd>/c/<opaque id>. It carries nothing about the user and authenticates nothing. */
  url: string;
  /** The params of a 2025-11-25 elicitation/create request (mode "url", with elicitationId). */
  params: ElicitParams;
  /** The 2025-11-25 JSON-RPC error (-32042). */
  urlElicitationRequiredError: RPCError;
  /** The 2026-07-28 entry of InputRequiredResult.inputRequests. */
  inputRequest: InputRequest;
  /** connectd answered with an elicitation already pending for the same request (a retry): the same link as before. */
  again: boolean;
}

/**
 * The approval elicitation of a user_approval_required refusal of a proxied
 * call (approvalRequired): the same document a mint answers (kind
 * KindApproval; url is connectd's approval page), and what the user is asked
 * to approve.
 */
export interface Approval extends Elicitation {
  /** The request as connectd received it: its method, and its path below the provider's API base with its query. */
  method: string;
  path: string;
  /** The request rule that asks (METHOD PATTERN). */
  rule: string;
  /** The operator's words for the rule, shown to the user. */
  message: string;
  /** The connection id the refused call named (providerFetch's account), "" for none. */
  account: string;
}

/**
 * One of the user's connections this client may use. It never carries a
 * credential. A user may have several at one provider: id tells them apart,
 * displayName and label say which is which.
 */
export interface Connection {
  provider: string;
  id: string;
  displayName: string;
  label?: string;
  status: NonNullable<Schemas["Connection"]["status"]>;
  scopes: string[];
  accountLabel?: string;
  createdAt?: Date;
  updatedAt?: Date;
  expiresAt?: Date;
  /**
   * The connection grants more than this client is approved for — scopes it
   * gained since, or another provider account connected since (then
   * displayName is "" and there is no label) — so its token answers
   * consent_required.
   */
  consentRequired?: boolean;
}

/** The answer of unlink. */
export interface Unlinked {
  provider: string;
  /** The provider confirmed revocation (RFC 7009); with several unlinked (AccountAll), the first one's. */
  revokedAtProvider: boolean;
  /** What happened at the provider: revoked, not_supported, failed or skipped; with several, the first one's. */
  revocation: UnlinkBody["revocation"];
  /** Every connection unlinked: one, or with AccountAll each this client was approved for. */
  connections: UnlinkedConnection[];
}

/** One connection an unlink ended. */
export interface UnlinkedConnection {
  id: string;
  revokedAtProvider: boolean;
  revocation: NonNullable<UnlinkBody["revocation"]>;
}

const inspect = Symbol.for("nodejs.util.inspect.custom");

/**
 * A currently valid credential for a provider. Keep it for the call that
 * needs it; connectd refreshes it when it is about to expire, so ask again
 * rather than caching it. Its secret is held in a private field: toString,
 * JSON.stringify and console.log/util.inspect show everything but it.
 */
export class Token {
  readonly provider: string;
  /** The connection this token is of (its id and display name). */
  readonly account: Account;
  /** oauth2 or api_key */
  readonly kind: Schemas["Token"]["kind"];
  /** usually Bearer */
  readonly tokenType: string;
  readonly expiresAt?: Date;
  readonly scopes: string[];
  readonly #accessToken: string;

  constructor(t: Schemas["Token"]) {
    this.provider = t.provider;
    // An older connectd sends no account.
    this.account = { id: t.account?.id ?? "", displayName: t.account?.display_name ?? "" };
    this.kind = t.kind;
    this.tokenType = t.token_type ?? "";
    if (t.expires_at) this.expiresAt = new Date(t.expires_at);
    this.scopes = t.scopes ?? [];
    this.#accessToken = t.access_token;
  }

  /** The secret: send it to the provider, nowhere else. */
  get accessToken(): string {
    return this.#accessToken;
  }

  /** Describes the token without its secret. */
  toString(): string {
    return `Token{provider:${this.provider} account:${this.account.id} kind:${this.kind} scopes:[${this.scopes.join(" ")}] accessToken:[redacted]}`;
  }

  /** JSON without the secret, so a logged or serialised Token never leaks it. */
  toJSON(): Record<string, unknown> {
    return {
      provider: this.provider,
      account: this.account,
      kind: this.kind,
      tokenType: this.tokenType,
      expiresAt: this.expiresAt,
      scopes: this.scopes,
      accessToken: "[redacted]",
    };
  }

  [inspect](): string {
    return this.toString();
  }
}
