// providerFetch: a fetch that sends a provider SDK's requests through
// connectd's provider API proxy (GET, HEAD, POST, PUT, PATCH, DELETE
// /v1/proxy/{provider}/{path}), the Go client's proxy.go in TypeScript. It
// uses only the platform's fetch. What connectd refuses to forward (another
// method, a path that is not plain, a method override) is not checked here:
// connectd's answer is the one rule, thrown as a ConnectdError.
import { ConnectdError, ConnectdNetworkError } from "./errors.js";

/** Names the connection a proxied call is for (the token read's account=<id>); connectd does not forward it. */
export const AccountHeader = "Connectd-Account";

/** Names the scopes a proxied call needs (the token read's scopes=…); connectd does not forward it. */
export const ScopesHeader = "Connectd-Scopes";

/**
 * Carries a request id to connectd, which adopts it (1–64 characters of
 * [A-Za-z0-9._:-]), answers with it and writes it into its error envelope's
 * request_id. connectd never forwards it to the provider.
 */
export const RequestIDHeader = "X-Request-Id";

/** Bounds how much of an error answer is read to see whether it is connectd's envelope. */
const maxEnvelope = 64 << 10;
/** fetch's own limit on redirects followed. */
const maxRedirects = 20;

/** A fetch-compatible function (usable as Octokit's request.fetch). */
export type ProviderFetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export interface ProviderFetchOptions {
  /**
   * Call as one of the user's accounts at the provider: its connection id
   * (Account.id, Connection.id), sent as Connectd-Account. Without it connectd
   * uses the one account this client is approved for there (account_required
   * when several).
   */
  account?: string;
  /**
   * Scopes every call needs of the connection, as the token read's required
   * scopes: a connection without them is insufficient_scope (a client not
   * approved for them consent_required) before connectd calls the provider.
   */
  scopes?: string[];
  /**
   * Strip this prefix from every request's path: for an SDK whose base URL
   * has a path connectd's API base for the provider already has (GitLab's
   * https://gitlab.com/api/v4). A request whose path is not below it is
   * refused (TypeError) without being sent.
   */
  pathPrefix?: string;
}

/** What providerFetch needs of the ConnectdClient. */
export interface ProxyConnection {
  base: string;
  key: string;
  fetch: typeof fetch;
  userTokenHeader: string;
  /** Turns connectd's error answer (its raw body read) into a ConnectdError. */
  refusal: (resp: Response, raw: string) => ConnectdError;
}

type Init = RequestInit & { duplex?: "half" };

/** See ConnectdClient.providerFetch. */
export function providerFetch(c: ProxyConnection, userToken: string, provider: string, opts: ProviderFetchOptions = {}): ProviderFetch {
  const prefix = normalPrefix(opts.pathPrefix);
  const proxyBase = `${c.base}/v1/proxy/${encodeURIComponent(provider)}`;

  const target = (u: URL): string => {
    let p = u.pathname;
    if (prefix) {
      if (!p.startsWith(prefix) || (p.length > prefix.length && p[prefix.length] !== "/")) {
        throw new TypeError(`connectd client: proxy: the path ${p} is not below ${prefix}`);
      }
      p = p.slice(prefix.length);
    }
    if (!p.startsWith("/")) p = "/" + p;
    return proxyBase + p + u.search;
  };

  return async function connectdProviderFetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
    if (!userToken) {
      throw new ConnectdError({
        status: 0,
        code: "missing_user_token",
        description: `proxy ${provider}: no user token given (the MCP access token of the user the call is for)`,
      });
    }
    if (!provider) throw new TypeError("connectd client: proxy: empty provider");
    const req = isRequest(input) ? input : undefined;
    let url = new URL(req ? req.url : String(input));
    let method = init?.method ?? req?.method ?? "GET";
    // As fetch: init's headers replace the Request's.
    const headers = new Headers(init?.headers ?? req?.headers);
    let body: RequestInit["body"] = init?.body != null ? init.body : (req?.body ?? null);
    const signal = init?.signal ?? req?.signal ?? null;
    const redirect = init?.redirect ?? req?.redirect ?? "follow";
    headers.set("Authorization", `Bearer ${c.key}`);
    headers.set(c.userTokenHeader, userToken);
    if (opts.account) headers.set(AccountHeader, opts.account);
    if (opts.scopes && opts.scopes.length > 0) headers.set(ScopesHeader, opts.scopes.join(" "));
    let id = headers.get(RequestIDHeader);
    if (!id) {
      id = newRequestId();
      headers.set(RequestIDHeader, id);
    }
    const origin = url.origin;
    for (let hops = 0; ; hops++) {
      const to = target(url);
      // Never let fetch follow: it would send the key and the user token
      // to wherever the provider's Location points.
      const ri: Init = { method, headers, body, redirect: "manual", signal };
      if (isStream(body)) ri.duplex = "half"; // streamed where the runtime allows
      let resp: Response;
      try {
        resp = await c.fetch(to, ri);
      } catch (err) {
        if (signal?.aborted) throw err; // the caller's abort, as fetch throws it
        throw new ConnectdNetworkError(`connectd client: proxy ${method} ${provider}: ${errText(err)}`, { cause: err });
      }
      const refused = await refusalOf(resp, id, c);
      if (refused) {
        if (refused.approval) refused.approval.account = opts.account ?? ""; // the account this call named
        throw refused;
      }
      if (redirect === "manual" || !isRedirect(resp.status)) return resp;
      const loc = resp.headers.get("Location");
      let next: URL;
      try {
        if (!loc) return resp;
        next = new URL(loc, url);
      } catch {
        return resp;
      }
      if (redirect === "error") {
        cancel(resp);
        throw new TypeError(`connectd client: proxy: ${provider} answered a redirect (redirect: "error")`);
      }
      // Followed within the API's origin only (through connectd again);
      // a redirect elsewhere (a download link) is the caller's answer.
      if (next.origin !== origin) return resp;
      if (hops + 1 >= maxRedirects) {
        cancel(resp);
        throw new TypeError(`connectd client: proxy: more than ${maxRedirects} redirects`);
      }
      const m = method.toUpperCase();
      if (((resp.status === 301 || resp.status === 302) && m === "POST") || (resp.status === 303 && m !== "GET" && m !== "HEAD")) {
        method = "GET";
        body = null;
        for (const h of ["Content-Type", "Content-Length", "Content-Encoding", "Content-Language", "Content-Location"]) headers.delete(h);
      } else if (isStream(body)) {
        return resp; // a streamed body cannot be sent again
      }
      cancel(resp);
      url = next;
    }
  };
}

/**
 * connectd's refusal in resp as a ConnectdError, or undefined with resp
 * untouched (its body read from a clone). A refusal is an error status
 * whose JSON body is connectd's envelope naming this request's id (sent, or
 * the one connectd answered with): connectd never forwards it to the
 * provider, so the provider's own errors cannot name it.
 */
async function refusalOf(resp: Response, id: string, c: ProxyConnection): Promise<ConnectdError | undefined> {
  if (resp.status < 400 || !resp.body) return undefined;
  const mt = (resp.headers.get("Content-Type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (mt !== "application/json") return undefined;
  const len = Number(resp.headers.get("Content-Length") ?? "");
  if (Number.isFinite(len) && len > maxEnvelope) return undefined;
  const raw = await readUpTo(resp.clone(), maxEnvelope);
  if (raw === undefined) return undefined;
  let b: unknown;
  try {
    b = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (!b || typeof b !== "object") return undefined;
  const { error, request_id: rid } = b as { error?: unknown; request_id?: unknown };
  if (typeof error !== "string" || !error || typeof rid !== "string" || !rid) return undefined;
  if (rid !== id && rid !== resp.headers.get(RequestIDHeader)) return undefined;
  cancel(resp);
  return c.refusal(resp, raw);
}

/** The body of r as text when it is at most max bytes, else (or when it fails) undefined. */
async function readUpTo(r: Response, max: number): Promise<string | undefined> {
  const body = r.body;
  if (!body) return "";
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let n = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      n += value.byteLength;
      if (n > max) {
        // Not awaited: a branch of a clone's tee settles its cancel only
        // when the other branch (the caller's) ends too.
        reader.cancel().catch(() => {});
        return undefined;
      }
      chunks.push(value);
    }
  } catch {
    return undefined; // the caller reads the same failure from the original
  }
  const all = new Uint8Array(n);
  let off = 0;
  for (const ch of chunks) {
    all.set(ch, off);
    off += ch.byteLength;
  }
  return new TextDecoder().decode(all);
}

function normalPrefix(p: string | undefined): string {
  const t = (p ?? "").replace(/^\/+|\/+$/g, "");
  return t ? new URL(`/${t}`, "http://x").pathname : "";
}

function isRequest(x: unknown): x is Request {
  return typeof x === "object" && x !== null && !(x instanceof URL) && typeof (x as Request).url === "string" && "headers" in x;
}

function isStream(b: unknown): b is ReadableStream {
  return typeof b === "object" && b !== null && typeof (b as ReadableStream).getReader === "function";
}

function isRedirect(status: number): boolean {
  return status === 301 || status === 302 || status === 303 || status === 307 || status === 308;
}

/** Discards resp's body (not awaited: see readUpTo). */
function cancel(resp: Response): void {
  resp.body?.cancel().catch(() => {});
}

function newRequestId(): string {
  const b = new Uint8Array(16);
  globalThis.crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

function errText(err: unknown): string {
  const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : "";
  return (err instanceof Error ? err.message : String(err)) + cause;
}
