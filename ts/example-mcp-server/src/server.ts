// The example MCP server over streamable HTTP: bearer-token verification,
// RFC 9728 protected-resource metadata, and stateful sessions (2025-11-25's
// server-to-client requests and notifications need one), each bound to the
// user who opened it.
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import type { Caller, Verifier } from "./auth.js";
import type { Logger } from "./log.js";
import { listFiles, type Background, type ToolConfig } from "./tool.js";

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

  constructor(cfg: ServerConfig, verifier: Verifier, log: Logger) {
    this.#cfg = cfg;
    this.#verifier = verifier;
    this.#log = log;
    const u = new URL(cfg.resource);
    this.#path = u.pathname || "/";
    this.#origin = u.origin;
    this.#metaPath = "/.well-known/oauth-protected-resource" + this.#path.replace(/\/+$/, "");
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
    (req as IncomingMessage & { auth?: unknown }).auth = {
      token: caller.token,
      clientId: "",
      scopes: caller.scopes,
      expiresAt: caller.expiresAt,
      extra: { caller },
    };

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
      { instructions: "list_files lists the user's files at the file service; the first call asks the user to connect it." },
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
    return server;
  }

  /** Stops background work and closes every session. */
  async close(): Promise<void> {
    this.#closing.abort(new Error("server closing"));
    await Promise.allSettled([...this.#pending]);
    await Promise.allSettled([...this.#sessions.values()].map((s) => s.transport.close()));
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify(body));
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
