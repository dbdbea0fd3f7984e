// Verifies the MCP access tokens of this server's callers: RFC 9068 JWTs
// from one issuer, for this server's resource. jose does the JWT and JWKS
// work (signature, key rotation); this file only says what is accepted.
import { createRemoteJWKSet, jwtVerify, type JWTVerifyGetKey } from "jose";

/** Never "none" and never HMAC (a shared secret would let any holder mint tokens). */
const allowedAlgs = ["ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA"];

/** The verified user of a request. */
export interface Caller {
  /** The raw MCP access token, forwarded to connectd as X-User-Token. */
  token: string;
  issuer: string;
  subject: string;
  scopes: string[];
  expiresAt: number;
}

export class Verifier {
  readonly #issuer: string;
  readonly #resource: string;
  readonly #keys: JWTVerifyGetKey;

  private constructor(issuer: string, resource: string, keys: JWTVerifyGetKey) {
    this.#issuer = issuer;
    this.#resource = resource;
    this.#keys = keys;
  }

  /** Builds a verifier; without jwksUrl it reads the issuer's discovery document. */
  static async create(issuer: string, resource: string, jwksUrl?: string): Promise<Verifier> {
    const u = jwksUrl || (await discoverJWKS(issuer));
    return new Verifier(issuer, resource, createRemoteJWKSet(new URL(u), { timeoutDuration: 10_000, cooldownDuration: 30_000 }));
  }

  /** Verifies raw; throws with a reason (never the token) when it is not acceptable. */
  async verify(raw: string): Promise<Caller> {
    const { payload } = await jwtVerify(raw, this.#keys, {
      algorithms: allowedAlgs,
      issuer: this.#issuer,
      audience: this.#resource, // no token passthrough: only tokens issued for this server
      // RFC 9068: an access token says so, so that an ID token never passes for one.
      typ: "at+jwt",
      requiredClaims: ["exp", "sub"],
      clockTolerance: 30,
    });
    if (!payload.sub) throw new Error("no sub");
    return {
      token: raw,
      issuer: this.#issuer,
      subject: payload.sub,
      scopes: typeof payload.scope === "string" ? payload.scope.split(" ").filter(Boolean) : [],
      expiresAt: payload.exp ?? 0,
    };
  }
}

/**
 * Reads the issuer's OIDC discovery document (falling back to RFC 8414
 * metadata) and returns its jwks_uri, after checking that the document names
 * exactly this issuer.
 */
async function discoverJWKS(issuer: string): Promise<string> {
  const base = issuer.replace(/\/+$/, "");
  let last = "";
  for (const u of [`${base}/.well-known/openid-configuration`, `${base}/.well-known/oauth-authorization-server`]) {
    let resp: Response;
    try {
      resp = await fetch(u, { signal: AbortSignal.timeout(10_000) });
    } catch (err) {
      last = `${u}: ${err instanceof Error ? err.message : String(err)}`;
      continue;
    }
    if (resp.status !== 200) {
      last = `${u} answered ${resp.status}`;
      continue;
    }
    const m = (await resp.json()) as { issuer?: string; jwks_uri?: string };
    if (m.issuer !== issuer) throw new Error(`discovery document at ${u} names another issuer`);
    if (!m.jwks_uri) throw new Error(`discovery document at ${u} has no jwks_uri`);
    return m.jwks_uri;
  }
  throw new Error(`discover issuer ${issuer}: ${last}`);
}
