// The example MCP server over streamable HTTP: bearer-token verification,
// RFC 9728 protected-resource metadata, and both protocol generations on one
// endpoint, like the Go example: 2026-07-28 requests (each carrying its _meta
// envelope, no initialize) go to SDK v2's createMcpHandler, a fresh server per
// request; 2025-era traffic goes to SDK v1's stateful sessions (2025-11-25's
// server-to-client requests and notifications need one), each bound to the
// user who opened it. SDK v2's own isLegacyRequest tells them apart.
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { createMcpHandler, isLegacyRequest, McpServer as McpServerV2, type AuthInfo, type McpHttpHandler } from "@modelcontextprotocol/server";
import { z } from "zod";
import type { Caller, Verifier } from "./auth.js";
import type { Logger } from "./log.js";
import { openIssue, openIssueModern } from "./issue.js";
import { listFiles, listFilesModern, type Background, type ToolConfig } from "./tool.js";

export interface ServerConfig extends ToolConfig {
  /** This MCP server's URL (its RFC 8707 resource URI); MCP is served at its path. */
  resource: string;
  /** The MCP authorization server whose access tokens are accepted. */
  issuer: string;
}

interface Session {
  transport: StreamableHTTPServerTransport;
  /** (issuer, sub) of the user who opened it: nobody else may use its id. */
  user: string;
}

const maxBody = 1 << 20;

const instructions =
  "list_files lists the user's files at the file service; the first call asks the user to connect it. " +
  "open_issue opens an issue; the user may be asked to approve it first.";
const openIssueTitle = "Open an issue";
const openIssueDescription =
  "Opens an issue in one of the user's repositories at the service. connectd may ask the user to approve the request first; a denied request is not made.";
const issueFields = {
  repo: z.string().describe("the repository, owner/name"),
  title: z.string().describe("the issue's title"),
  body: z.string().optional().describe("the issue's text"),
};

export class ExampleServer {
  readonly #cfg: ServerConfig;
  readonly #verifier: Verifier;
  readonly #log: Logger;
  readonly #sessions = new Map<string, Session>();
  readonly #path: string;
  readonly #origin: string;
  readonly #metaPath: string;
  readonly #closing = new AbortController();
  readonly #pending = new Set<Promise<unknown>>();
  readonly #modern: McpHttpHandler;

  constructor(cfg: ServerConfig, verifier: Verifier, log: Logger) {
    this.#cfg = cfg;
    this.#verifier = verifier;
    this.#log = log;
    const u = new URL(cfg.resource);
    this.#path = u.pathname || "/";
    this.#origin = u.origin;
    this.#metaPath = "/.well-known/oauth-protected-resource" + this.#path.replace(/\/+$/, "");
    // Modern only: 2025-era requests never reach it (see #serve).
    this.#modern = createMcpHandler(({ authInfo }) => this.#newModernServer(authInfo), {
      legacy: "reject",
      onerror: (err) => this.#log.info("2026-07-28 request refused", { error: err.message }),
    });
  }

  /** The node:http request listener. */
  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    this.#serve(req, res).catch((err: unknown) => {
      this.#log.warn("request failed", { error: err instanceof Error ? err.message : String(err) });
      if (!res.headersSent) send(res, 500, { error: "internal error" });
      else res.end();
    });
  };

  async #serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? "/", this.#origin).pathname;
    if (req.method === "GET" && (path === this.#metaPath || path === "/.well-known/oauth-protected-resource")) {
      return send(res, 200, {
        resource: this.#cfg.resource,
        authorization_servers: [this.#cfg.issuer],
        bearer_methods_supported: ["header"],
        resource_name: "connectd example: files (TypeScript)",
      });
    }
    if (path !== this.#path) return send(res, 404, { error: "not found" });
    // A browser page on another origin must not drive this endpoint.
    const origin = req.headers.origin;
    if (origin && origin !== this.#origin) return send(res, 403, { error: "cross-origin request refused" });

    const caller = await this.#authenticate(req, res);
    if (!caller) return;
    const user = `${caller.issuer} ${caller.subject}`;
    const sid = req.headers["mcp-session-id"];
    const body = req.method === "POST" ? await readJSON(req, res) : undefined;
    if (body === null) return;
    // The SDK hands this to tool handlers as extra.authInfo.
    const auth: AuthInfo = { token: caller.token, clientId: "", scopes: caller.scopes, expiresAt: caller.expiresAt, extra: { caller } };
    (req as IncomingMessage & { auth?: unknown }).auth = auth;

    if (req.method === "POST") {
      const web = webRequest(req, res, this.#origin, body);
      if (!(await isLegacyRequest(web, body))) return pipe(res, await this.#modern.fetch(web, { authInfo: auth, parsedBody: body }));
    }

    if (typeof sid === "string") {
      const s = this.#sessions.get(sid);
      if (!s || s.user !== user) return send(res, 404, { jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null });
      return s.transport.handleRequest(req, res, body);
    }
    if (req.method !== "POST" || !isInitializeRequest(body)) {
      return send(res, 400, { jsonrpc: "2.0", error: { code: -32000, message: "Bad Request: no session; initialize first" }, id: null });
    }
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        this.#sessions.set(id, { transport, user });
      },
    });
    transport.onclose = () => {
      if (transport.sessionId) this.#sessions.delete(transport.sessionId);
    };
    await this.#newMcpServer().connect(transport);
    await transport.handleRequest(req, res, body);
  }

  /** Verifies the bearer token, or answers 401 pointing at the metadata. */
  async #authenticate(req: IncomingMessage, res: ServerResponse): Promise<Caller | undefined> {
    const meta = `resource_metadata="${this.#origin}${this.#metaPath}"`;
    const m = /^Bearer ([^\s]+)$/i.exec(req.headers.authorization ?? "");
    if (!m) {
      res.setHeader("WWW-Authenticate", `Bearer ${meta}`);
      send(res, 401, { error: "invalid_token", error_description: "a bearer token is required" });
      return undefined;
    }
    try {
      return await this.#verifier.verify(m[1]!);
    } catch (err) {
      // The reason (expired, wrong audience, …) goes to the log; the token never does.
      this.#log.info("access token refused", { reason: err instanceof Error ? err.message : String(err) });
      res.setHeader("WWW-Authenticate", `Bearer error="invalid_token", ${meta}`);
      send(res, 401, { error: "invalid_token" });
      return undefined;
    }
  }

  /** One McpServer per session: the SDK connects a server to one transport. */
  #newMcpServer(): McpServer {
    const server = new McpServer(
      { name: "connectd-example-files-ts", version: "1.0.0" },
      { instructions },
    );
    const bg: Background = {
      signal: this.#closing.signal,
      track: (p) => {
        this.#pending.add(p);
        void p.finally(() => this.#pending.delete(p));
      },
    };
    server.registerTool(
      "list_files",
      {
        title: "List my files",
        description: "Lists the files in the user's file-service account. The first time, the user is asked to connect that account in the browser.",
        inputSchema: {
          account: z
            .string()
            .optional()
            .describe("which of your file-service accounts to use: its id (cn_…); leave it out unless list_files asked for it"),
        },
        outputSchema: {
          owner: z.string().describe("the account at the file service"),
          files: z.array(z.object({ name: z.string(), size: z.number() })),
        },
      },
      async (args, extra) => {
        const caller = (extra.authInfo?.extra as { caller?: Caller } | undefined)?.caller;
        if (!caller) throw new Error("no verified caller: the MCP endpoint must sit behind bearer authentication");
        return listFiles(this.#cfg, server, bg, this.#log, caller, args, extra);
      },
    );
    server.registerTool("open_issue", { title: openIssueTitle, description: openIssueDescription, inputSchema: issueFields }, async (args, extra) => {
      const caller = (extra.authInfo?.extra as { caller?: Caller } | undefined)?.caller;
      if (!caller) throw new Error("no verified caller: the MCP endpoint must sit behind bearer authentication");
      return openIssue(this.#cfg, server, bg, this.#log, caller, args, extra);
    });
    return server;
  }

  /** The SDK v2 server of one 2026-07-28 request (createMcpHandler builds one per request). */
  #newModernServer(authInfo: AuthInfo | undefined): McpServerV2 {
    const server = new McpServerV2(
      { name: "connectd-example-files-ts", version: "1.0.0" },
      { instructions },
    );
    server.registerTool(
      "list_files",
      {
        title: "List my files",
        description: "Lists the files in the user's file-service account. The first time, the user is asked to connect that account in the browser.",
        inputSchema: z.object({
          account: z
            .string()
            .optional()
            .describe("which of your file-service accounts to use: its id (cn_…); leave it out unless list_files asked for it"),
        }),
        outputSchema: z.object({
          owner: z.string().describe("the account at the file service"),
          files: z.array(z.object({ name: z.string(), size: z.number() })),
        }),
      },
      async (args, ctx) => {
        const caller = (authInfo?.extra as { caller?: Caller } | undefined)?.caller;
        if (!caller) throw new Error("no verified caller: the MCP endpoint must sit behind bearer authentication");
        return listFilesModern(this.#cfg, this.#log, caller, args, ctx);
      },
    );
    server.registerTool("open_issue", { title: openIssueTitle, description: openIssueDescription, inputSchema: z.object(issueFields) }, async (args, ctx) => {
      const caller = (authInfo?.extra as { caller?: Caller } | undefined)?.caller;
      if (!caller) throw new Error("no verified caller: the MCP endpoint must sit behind bearer authentication");
      return openIssueModern(this.#cfg, this.#log, caller, args, ctx);
    });
    return server;
  }

  /** Stops background work and closes every session. */
  async close(): Promise<void> {
    this.#closing.abort(new Error("server closing"));
    await this.#modern.close();
    await Promise.allSettled([...this.#pending]);
    await Promise.allSettled([...this.#sessions.values()].map((s) => s.transport.close()));
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify(body));
}

/**
 * The node:http request as the web Request SDK v2 takes, with the body
 * already read; it is aborted when the client goes away, which ends a held
 * retry.
 */
function webRequest(req: IncomingMessage, res: ServerResponse, origin: string, body: unknown): Request {
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (v === undefined) continue;
    for (const one of Array.isArray(v) ? v : [v]) headers.append(k, one);
  }
  const ac = new AbortController();
  res.once("close", () => ac.abort());
  return new Request(new URL(req.url ?? "/", origin), { method: req.method, headers, body: JSON.stringify(body), signal: ac.signal });
}

/** Sends a web Response (JSON or an SSE stream) on res. */
async function pipe(res: ServerResponse, resp: Response): Promise<void> {
  const headers: Record<string, string> = {};
  resp.headers.forEach((v, k) => (headers[k] = v));
  res.writeHead(resp.status, headers);
  if (!resp.body) {
    res.end();
    return;
  }
  for await (const chunk of resp.body as unknown as AsyncIterable<Uint8Array>) {
    if (!res.write(chunk)) await new Promise((r) => res.once("drain", r));
  }
  res.end();
}

/** Reads a JSON body of at most maxBody bytes; null when it answered an error. */
async function readJSON(req: IncomingMessage, res: ServerResponse): Promise<unknown> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    n += c.length;
    if (n > maxBody) {
      send(res, 413, { jsonrpc: "2.0", error: { code: -32000, message: "request too large" }, id: null });
      return null;
    }
    chunks.push(c);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    send(res, 400, { jsonrpc: "2.0", error: { code: -32700, message: "Parse error" }, id: null });
    return null;
  }
}
