#!/usr/bin/env node
// The example MCP server's command: flags (or environment variables) in,
// an HTTP(S) server out. The connectd client key comes only from the
// environment (CONNECTD_CLIENT_KEY), never from a flag that ps would show.
import { readFileSync } from "node:fs";
import { createServer as createHTTP, type Server } from "node:http";
import { createServer as createHTTPS } from "node:https";
import { parseArgs } from "node:util";
import { ConnectdClient } from "@connectd/client";
import { Verifier } from "./auth.js";
import { stderrLogger } from "./log.js";
import { ExampleServer } from "./server.js";

const env = process.env;
const { values: f } = parseArgs({
  options: {
    resource: { type: "string", default: env.MCP_RESOURCE ?? "http://127.0.0.1:8090/mcp" },
    listen: { type: "string", default: env.MCP_LISTEN ?? "" },
    issuer: { type: "string", default: env.MCP_ISSUER ?? "" },
    "jwks-url": { type: "string", default: env.MCP_JWKS_URL ?? "" },
    connectd: { type: "string", default: env.CONNECTD_URL ?? "http://127.0.0.1:8080" },
    "allow-http": { type: "boolean", default: env.CONNECTD_ALLOW_HTTP === "true" },
    provider: { type: "string", default: env.MCP_PROVIDER ?? "demo-files" },
    scopes: { type: "string", default: env.MCP_SCOPES ?? "files.read" },
    credential: { type: "string", default: env.MCP_CREDENTIAL ?? "proxy" },
    "files-path": { type: "string", default: env.MCP_FILES_PATH ?? "/files" },
    "files-api": { type: "string", default: env.MCP_FILES_API ?? "" },
    "issues-path": { type: "string", default: env.MCP_ISSUES_PATH ?? "/repos/{repo}/issues" },
    style: { type: "string", default: env.MCP_LEGACY_STYLE ?? "elicit" },
    "wait-timeout": { type: "string", default: env.MCP_WAIT_TIMEOUT ?? "300" },
    "retry-wait": { type: "string", default: env.CONNECTD_RETRY_WAIT ?? "20" },
    "retry-hold": { type: "string", default: env.MCP_RETRY_HOLD ?? "30" },
    "tls-cert": { type: "string", default: env.MCP_TLS_CERT ?? "" },
    "tls-key": { type: "string", default: env.MCP_TLS_KEY ?? "" },
    help: { type: "boolean", short: "h", default: false },
  },
});

const usage = `usage: connectd-example-mcp-server [flags]  (each flag also reads the environment variable named)
  --resource URL     this server's resource URI; MCP is served at its path (MCP_RESOURCE)
  --listen HOST:PORT where to listen (MCP_LISTEN; default: the resource's host and port)
  --issuer URL       the MCP authorization server whose access tokens are accepted (MCP_ISSUER)
  --jwks-url URL     its key set (MCP_JWKS_URL; default: from its discovery document)
  --connectd URL     connectd's public URL (CONNECTD_URL); the client key is CONNECTD_CLIENT_KEY
  --allow-http       allow an http:// connectd URL that is not loopback (CONNECTD_ALLOW_HTTP=true)
  --provider ID      connectd's provider id of the file service (MCP_PROVIDER)
  --scopes LIST      comma-separated scopes list_files needs (MCP_SCOPES)
  --credential C     proxy (default: call the file service through connectd, never holding a token)
                     or token (read the user's token and call it) (MCP_CREDENTIAL)
  --files-path PATH  proxy: the list endpoint below the provider's API base URL at connectd (MCP_FILES_PATH)
  --files-api URL    token: the file service's list endpoint URL (MCP_FILES_API)
  --issues-path P    open_issue's POST below the provider's API base URL at connectd, {repo} the tool's owner/name;
                     always through connectd's proxy (MCP_ISSUES_PATH)
  --style S          2025-11-25 shape: elicit (elicitation/create) or error (-32042) (MCP_LEGACY_STYLE)
  --wait-timeout S   seconds a 2025-11-25 call waits for the user in the browser after elicitation/create (MCP_WAIT_TIMEOUT)
  --retry-hold S     seconds a 2026-07-28 retry with a pending requestState is held before it gets the link
                     again; keep it well below your clients' request timeout, the SDKs' 60 (MCP_RETRY_HOLD)
  --retry-wait S     seconds a repeated call waits on a pending link (CONNECTD_RETRY_WAIT)
  --tls-cert FILE, --tls-key FILE   serve HTTPS with this PEM certificate and key (MCP_TLS_CERT, MCP_TLS_KEY)`;

function fail(msg: string): never {
  process.stderr.write(`connectd-example-mcp-server: ${msg}\n${usage}\n`);
  process.exit(2);
}

async function main(): Promise<void> {
  if (f.help) {
    process.stdout.write(usage + "\n");
    return;
  }
  const key = env.CONNECTD_CLIENT_KEY ?? "";
  if (!f.issuer || !key) fail("--issuer and CONNECTD_CLIENT_KEY are required");
  if (f.credential !== "proxy" && f.credential !== "token") fail("--credential must be proxy or token");
  if (f.credential === "token" && !f["files-api"]) fail("--files-api is required with --credential token");
  if (f.style !== "elicit" && f.style !== "error") fail("--style must be elicit or error");
  const resource = new URL(f.resource);
  const log = stderrLogger();
  const connectd = new ConnectdClient({
    baseUrl: f.connectd,
    key,
    allowHttp: f["allow-http"],
    retryWaitMs: Number(f["retry-wait"]) * 1000 || -1,
    userAgent: "connectd-example-mcp-server-ts",
  });
  const verifier = await Verifier.create(f.issuer, f.resource, f["jwks-url"] || undefined);
  const app = new ExampleServer(
    {
      resource: f.resource,
      issuer: f.issuer,
      connectd,
      provider: f.provider,
      scopes: f.scopes.split(",").filter(Boolean),
      credential: f.credential,
      filesPath: f["files-path"],
      filesApi: f["files-api"],
      issuesPath: f["issues-path"],
      style: f.style,
      waitTimeoutMs: Number(f["wait-timeout"]) * 1000 || 300_000,
      retryHoldMs: Number(f["retry-hold"]) * 1000 || 30_000,
    },
    verifier,
    log,
  );
  let srv: Server;
  if (f["tls-cert"] || f["tls-key"]) {
    srv = createHTTPS({ cert: readFileSync(f["tls-cert"]), key: readFileSync(f["tls-key"]) }, app.handle);
  } else {
    srv = createHTTP(app.handle);
  }
  const listen = f.listen || resource.host;
  const i = listen.lastIndexOf(":");
  const host = listen.slice(0, i).replace(/^\[|\]$/g, "");
  const port = Number(listen.slice(i + 1)) || (resource.protocol === "https:" ? 443 : 80);
  srv.listen(port, host, () => log.info("listening", { resource: f.resource, listen: `${host}:${port}` }));
  const shutdown = () => {
    log.info("shutting down");
    void app.close().finally(() => srv.close(() => process.exit(0)));
    srv.closeAllConnections();
  };
  process.once("SIGTERM", shutdown);
  process.once("SIGINT", shutdown);
}

main().catch((err: unknown) => {
  process.stderr.write(`connectd-example-mcp-server: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
