import assert from "node:assert/strict";
import { test } from "node:test";
import { randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { WebhookSignatureError, verifyWebhook } from "@connectd/client";

// verifyWebhook accepts exactly what the Standard Webhooks reference library
// signs (as connectd does), and refuses a tampered body, another secret, a
// stale or future timestamp and missing headers.
test("verifyWebhook against the Standard Webhooks library", async () => {
  const secret = "whsec_" + randomBytes(32).toString("base64");
  const wh = new Webhook(secret);
  const body = '{"type":"connection.revoked","timestamp":"2026-11-30T12:00:00Z","data":{"provider":"github","by":"admin"}}';
  const now = new Date();
  const signed = (at: Date, payload: string) => ({
    "webhook-id": "msg_1",
    "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    "webhook-signature": "v1,bm9wZQ== " + wh.sign("msg_1", at, payload),
  });
  const ev = await verifyWebhook(secret, signed(now, body), body, now);
  assert.equal(ev.id, "msg_1");
  assert.equal(ev.type, "connection.revoked");
  assert.equal(ev.data.by, "admin");
  // Fetch Headers and bytes work too.
  const ev2 = await verifyWebhook(secret, new Headers(signed(now, body)), new TextEncoder().encode(body), now);
  assert.equal(ev2.type, "connection.revoked");

  const other = "whsec_" + Buffer.alloc(32).toString("base64");
  const cases: [string, string, Record<string, string>, string][] = [
    ["tampered body", secret, signed(now, body), '{"type":"connection.created"}'],
    ["another secret", other, signed(now, body), body],
    ["stale", secret, signed(new Date(now.getTime() - 6 * 60_000), body), body],
    ["from the future", secret, signed(new Date(now.getTime() + 6 * 60_000), body), body],
    ["no signature", secret, { "webhook-id": "msg_1", "webhook-timestamp": "1" }, body],
    ["v2 only", secret, { "webhook-id": "msg_1", "webhook-timestamp": String(Math.floor(now.getTime() / 1000)), "webhook-signature": "v2,abc" }, body],
  ];
  for (const [name, s, h, b] of cases) {
    await assert.rejects(verifyWebhook(s, h, b, now), WebhookSignatureError, name);
  }
});
