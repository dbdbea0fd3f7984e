// requestDigest: the same value as the Go client's client.RequestDigest for
// the same name and plain JSON arguments, so servers in either language bind
// request_states alike.

/**
 * A value for MintRequest.requestDigest and resolve that binds a
 * request_state to the MCP request it was minted for: the base64url SHA-256
 * of `${name.length}:${name}\n` (length in UTF-8 bytes) followed by the JSON
 * of args, written as Go's encoding/json writes it (object keys sorted, <, >,
 * & and U+2028/U+2029 escaped). args must be plain JSON values.
 */
export async function requestDigest(name: string, args: unknown): Promise<string> {
  const enc = new TextEncoder();
  const nameBytes = enc.encode(name);
  const head = enc.encode(`${nameBytes.length}:`);
  const body = enc.encode(goJSON(args));
  const buf = new Uint8Array(head.length + nameBytes.length + 1 + body.length);
  buf.set(head, 0);
  buf.set(nameBytes, head.length);
  buf[head.length + nameBytes.length] = 0x0a;
  buf.set(body, head.length + nameBytes.length + 1);
  // WebCrypto, so this also runs on edge runtimes.
  const sum = new Uint8Array(await globalThis.crypto.subtle.digest("SHA-256", buf));
  return base64url(sum);
}

/** JSON as Go's json.Marshal writes a decoded JSON value (map[string]any, []any, string, float64, bool, nil). */
export function goJSON(v: unknown): string {
  return write(v).replace(/[<>&\u2028\u2029]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
}

function write(v: unknown): string {
  if (v === null || v === undefined) return "null";
  switch (typeof v) {
    case "string":
      // Go writes a lone surrogate (invalid UTF-8 once encoded) as U+FFFD.
      return JSON.stringify(wellFormed(v));
    case "boolean":
      return v ? "true" : "false";
    case "number":
      if (!Number.isFinite(v)) throw new TypeError(`connectd client: request digest: unsupported value ${v}`);
      // ECMAScript and Go switch to exponents at the same bounds (1e21, 1e-6) and both write the shortest form.
      return JSON.stringify(v);
    case "object": {
      const j = (v as { toJSON?: () => unknown }).toJSON;
      if (typeof j === "function") return write(j.call(v));
      if (Array.isArray(v)) return `[${v.map(write).join(",")}]`;
      const keys = Object.keys(v).filter((k) => (v as Record<string, unknown>)[k] !== undefined);
      keys.sort(compareUTF8);
      return `{${keys.map((k) => `${JSON.stringify(wellFormed(k))}:${write((v as Record<string, unknown>)[k])}`).join(",")}}`;
    }
    default:
      throw new TypeError(`connectd client: request digest: unsupported value of type ${typeof v}`);
  }
}

/** Replaces lone surrogates with U+FFFD (String.prototype.toWellFormed, which not every runtime has). */
function wellFormed(s: string): string {
  return s.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD");
}

/** Go sorts map keys by their UTF-8 bytes; UTF-16 order differs above U+E000. */
function compareUTF8(a: string, b: string): number {
  const enc = new TextEncoder();
  const x = enc.encode(a);
  const y = enc.encode(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) return x[i]! - y[i]!;
  }
  return x.length - y.length;
}

function base64url(b: Uint8Array): string {
  let s = "";
  for (const c of b) s += String.fromCharCode(c);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
