// A scripted fetch for unit tests: each call is answered by the next
// function of the script, and recorded. (The real connectd is exercised by
// test/integration, run from the Go e2e test.)
export interface Recorded {
  url: string;
  method: string;
  headers: Headers;
  body: string | null;
}

export type Step = (req: Recorded) => Response | Promise<Response>;

export function scriptedFetch(steps: Step[]): { fetch: typeof fetch; calls: Recorded[] } {
  const calls: Recorded[] = [];
  const f = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const rec: Recorded = {
      url: String(input),
      method: init?.method ?? "GET",
      headers: new Headers(init?.headers),
      body: typeof init?.body === "string" ? init.body : null,
    };
    calls.push(rec);
    const step = steps.shift();
    if (!step) throw new Error(`unscripted call ${rec.method} ${rec.url}`);
    return step(rec);
  };
  return { fetch: f as typeof fetch, calls };
}

export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json", ...headers } });
}

export const key = "cks_test_secret_key";
export const userToken = "eyJ.user.token";

export function minted(over: Record<string, unknown> = {}): Record<string, unknown> {
  const id = "elic123";
  const url = `https://connect.example.com/c/${id}`;
  const p = { mode: "url", elicitationId: id, url, message: "Connect your files." };
  return {
    elicitation_id: id,
    status: "pending",
    provider: "demo-files",
    scopes: ["files.read"],
    expires_at: "2026-03-04T05:06:07Z",
    url,
    elicitation: p,
    url_elicitation_required_error: { code: -32042, message: "This request requires more information.", data: { elicitations: [p] } },
    input_request: { method: "elicitation/create", params: { mode: "url", message: p.message, url } },
    request_state: "rs1.abc",
    ...over,
  };
}
