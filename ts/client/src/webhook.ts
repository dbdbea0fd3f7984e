// Verifying the webhooks connectd sends to an MCP server's endpoints
// (docs/webhooks.md): Standard Webhooks signatures, HMAC-SHA256 with the
// endpoint's "whsec_" secret, checked with WebCrypto. The Go client's
// VerifyWebhook; any published Standard Webhooks library verifies the same
// requests.

/** How far a webhook's timestamp may be from now, in seconds. */
export const WebhookToleranceSeconds = 5 * 60;

/** A verified webhook delivery. */
export interface WebhookEvent {
  /** The webhook-id header: the same on every retry of one delivery; deduplicate on it. */
  id: string;
  /** elicitation.completed, connection.revoked, … */
  type: string;
  timestamp: string;
  /** Ids and names, never a credential. */
  data: Record<string, unknown>;
}

/** A webhook request that is not connectd's: no or a wrong signature, a stale timestamp, a missing header. */
export class WebhookSignatureError extends Error {
  constructor(message: string) {
    super(`connectd: webhook signature does not verify: ${message}`);
    this.name = "WebhookSignatureError";
  }
}

type HeaderSource = Headers | Record<string, string | string[] | undefined>;

function header(h: HeaderSource, name: string): string {
  if (typeof (h as Headers).get === "function") return (h as Headers).get(name) ?? "";
  const rec = h as Record<string, string | string[] | undefined>;
  const key = Object.keys(rec).find((k) => k.toLowerCase() === name);
  const v = key === undefined ? undefined : rec[key];
  return Array.isArray(v) ? (v[0] ?? "") : (v ?? "");
}

function fromBase64(s: string): Uint8Array {
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}

/** Constant-time comparison of two byte strings. */
function equal(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a[i]! ^ b[i]!;
  return d === 0;
}

/**
 * Checks a webhook request connectd sent — its signature and a timestamp
 * within WebhookToleranceSeconds of now — and returns the event. Pass the raw
 * body exactly as received (a string or bytes) and the request's headers
 * (fetch Headers or Node's IncomingHttpHeaders).
 */
export async function verifyWebhook(
  secret: string,
  headers: HeaderSource,
  body: string | Uint8Array,
  now: Date = new Date(),
): Promise<WebhookEvent> {
  let key: Uint8Array;
  try {
    key = fromBase64(secret.replace(/^whsec_/, ""));
  } catch {
    throw new Error("connectd: the webhook secret must be the whsec_… value connectd showed");
  }
  const id = header(headers, "webhook-id");
  const ts = header(headers, "webhook-timestamp");
  const sigs = header(headers, "webhook-signature");
  if (!id || !ts || !sigs) throw new WebhookSignatureError("missing webhook-id, webhook-timestamp or webhook-signature");
  const sec = Number(ts);
  if (!/^\d+$/.test(ts) || !Number.isSafeInteger(sec)) throw new WebhookSignatureError("bad webhook-timestamp");
  if (Math.abs(now.getTime() / 1000 - sec) > WebhookToleranceSeconds) {
    throw new WebhookSignatureError("timestamp outside the tolerance");
  }
  const raw = typeof body === "string" ? new TextEncoder().encode(body) : body;
  const prefix = new TextEncoder().encode(`${id}.${ts}.`);
  const signed = new Uint8Array(prefix.length + raw.length);
  signed.set(prefix);
  signed.set(raw, prefix.length);
  const k = await globalThis.crypto.subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const want = new Uint8Array(await globalThis.crypto.subtle.sign("HMAC", k, signed));
  const ok = sigs.split(" ").some((s) => {
    const [version, sig] = s.split(",", 2);
    if (version !== "v1" || !sig) return false;
    try {
      return equal(fromBase64(sig), want);
    } catch {
      return false;
    }
  });
  if (!ok) throw new WebhookSignatureError("no v1 signature matches");
  const parsed = JSON.parse(new TextDecoder().decode(raw)) as Omit<WebhookEvent, "id">;
  return { id, type: parsed.type, timestamp: parsed.timestamp, data: parsed.data ?? {} };
}
