"""verify_webhook accepts exactly what the Standard Webhooks reference library signs (as connectd
does), and refuses a tampered body, another secret, a stale or future timestamp, missing headers
and other signature versions. The fixed vector was signed by the Go reference library
(github.com/standard-webhooks/standard-webhooks/libraries/go); under go test ./e2e
(TestPythonClient) CONNECTD_WEBHOOK_VECTORS carries fresh ones it signed."""

import base64
import hashlib
import hmac
import json
import os
import time
import unittest

from connectd import WebhookSignatureError, verify_webhook

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
BODY = b'{"type":"connection.revoked","timestamp":"2026-11-30T12:00:00Z","data":{"provider":"github","by":"admin"}}'
MSG_ID = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"
TS = 1764504000
GO_SIGNATURE = "v1,U0al7Zq/hkk8Itxagv+mX5ryJCZeOcl9TFbkNnNm7Pg="  # standardwebhooks.Webhook.Sign, Go


def sign(secret: str, msg_id: str, ts: int, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    return "v1," + base64.b64encode(hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()).decode()


class VerifyWebhook(unittest.TestCase):
    def headers(self, ts: int = TS, sig: str = GO_SIGNATURE) -> dict[str, str]:
        return {"webhook-id": MSG_ID, "webhook-timestamp": str(ts), "webhook-signature": "v1,bm9wZQ== " + sig}

    def test_the_go_reference_signature(self) -> None:
        ev = verify_webhook(SECRET, self.headers(), BODY, now=TS + 10)
        self.assertEqual((ev.id, ev.type, ev.data["by"]), (MSG_ID, "connection.revoked", "admin"))
        self.assertEqual(sign(SECRET, MSG_ID, TS, BODY), GO_SIGNATURE)
        # Header names in any case; a str body; a list value (as some frameworks give).
        ev = verify_webhook(SECRET, {"Webhook-Id": MSG_ID, "WEBHOOK-TIMESTAMP": [str(TS)], "Webhook-Signature": GO_SIGNATURE},
                            BODY.decode(), now=TS)
        self.assertEqual(ev.type, "connection.revoked")

    def test_refusals(self) -> None:
        other = "whsec_" + base64.b64encode(bytes(32)).decode()
        now = TS
        cases = {
            "tampered body": (SECRET, self.headers(), b'{"type":"connection.created"}'),
            "another secret": (other, self.headers(), BODY),
            "stale": (SECRET, self.headers(), BODY, now + 301),
            "from the future": (SECRET, self.headers(), BODY, now - 301),
            "no signature": (SECRET, {"webhook-id": MSG_ID, "webhook-timestamp": str(TS)}, BODY),
            "no headers": (SECRET, {}, BODY),
            "v2 only": (SECRET, {"webhook-id": MSG_ID, "webhook-timestamp": str(TS), "webhook-signature": "v2,abc"}, BODY),
            "bad timestamp": (SECRET, {**self.headers(), "webhook-timestamp": "12e3"}, BODY),
            "another id": (SECRET, {**self.headers(), "webhook-id": "msg_other"}, BODY),
        }
        for name, c in cases.items():
            with self.subTest(name):
                with self.assertRaises(WebhookSignatureError):
                    verify_webhook(c[0], c[1], c[2], now=c[3] if len(c) > 3 else now)

    def test_tolerance_bounds(self) -> None:
        verify_webhook(SECRET, self.headers(), BODY, now=TS + 300)
        verify_webhook(SECRET, self.headers(), BODY, now=TS - 300)
        verify_webhook(SECRET, self.headers(), BODY, now=TS + 1000, tolerance=1000)

    def test_bad_secret_names_no_secret(self) -> None:
        with self.assertRaises(ValueError) as cm:
            verify_webhook("whsec_not base64!", self.headers(), BODY, now=TS)
        self.assertNotIn("not base64", str(cm.exception))

    def test_now_defaults_to_the_clock(self) -> None:
        ts = int(time.time())
        h = {"webhook-id": MSG_ID, "webhook-timestamp": str(ts), "webhook-signature": sign(SECRET, MSG_ID, ts, BODY)}
        self.assertEqual(verify_webhook(SECRET, h, BODY).id, MSG_ID)

    def test_vectors_of_the_go_reference_library(self) -> None:
        """Fresh signatures from the Go reference library, given by go test ./e2e."""
        raw = os.environ.get("CONNECTD_WEBHOOK_VECTORS")
        if not raw:
            self.skipTest("CONNECTD_WEBHOOK_VECTORS is set by go test ./e2e -run TestPythonClient")
        doc = json.loads(raw)
        self.assertGreaterEqual(len(doc["vectors"]), 3)
        for v in doc["vectors"]:
            with self.subTest(v["name"]):
                body = v["body"].encode()
                if v["valid"]:
                    ev = verify_webhook(doc["secret"], v["headers"], body, now=v["now"])
                    self.assertEqual(ev.id, v["headers"]["webhook-id"])
                    self.assertEqual(ev.type, json.loads(body)["type"])
                else:
                    with self.assertRaises(WebhookSignatureError):
                        verify_webhook(doc["secret"], v["headers"], body, now=v["now"])


if __name__ == "__main__":
    unittest.main()
