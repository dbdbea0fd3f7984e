"""Verifying the webhooks connectd sends to an MCP server's endpoints (docs/webhooks.md):
Standard Webhooks signatures (webhook-id, webhook-timestamp, webhook-signature: v1, HMAC-SHA256
with the endpoint's ``whsec_`` secret). Any published Standard Webhooks library verifies the same
requests; this is the Go client's VerifyWebhook."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Union

from .errors import WebhookSignatureError

__all__ = ["WebhookTolerance", "WebhookEvent", "verify_webhook"]

WebhookTolerance = 5 * 60
"""How far a webhook's timestamp may be from now, in seconds."""


@dataclass
class WebhookEvent:
    """A verified webhook delivery."""

    id: str
    """The webhook-id header: the same on every retry of one delivery; deduplicate on it."""
    type: str
    """elicitation.completed, connection.revoked, …"""
    timestamp: str
    data: dict[str, Any] = field(default_factory=dict)
    """Ids and names, never a credential."""


def _header(headers: Any, name: str) -> str:
    get = getattr(headers, "get", None)
    if get is not None:
        # Case-insensitive mappings (http.client.HTTPMessage, email.message.Message,
        # Starlette's Headers, wsgiref) answer any spelling.
        v = get(name)
        if v is None and hasattr(headers, "keys"):
            for k in headers.keys():
                if isinstance(k, str) and k.lower() == name:
                    v = headers[k]
                    break
        if isinstance(v, (list, tuple)):
            v = v[0] if v else None
        if isinstance(v, bytes):
            v = v.decode("latin-1")
        return v or ""
    return ""


def _secret_key(secret: str) -> bytes:
    s = secret[len("whsec_"):] if secret.startswith("whsec_") else secret
    try:
        key = base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if not key:
        # Never the secret itself in the message.
        raise ValueError("connectd client: the webhook secret must be the whsec_… value connectd showed")
    return key


def verify_webhook(
    secret: str,
    headers: Mapping[str, Any],
    body: Union[bytes, bytearray, memoryview, str],
    now: Optional[float] = None,
    tolerance: float = WebhookTolerance,
) -> WebhookEvent:
    """Checks a webhook request connectd sent to one of this MCP server's endpoints — its
    Standard Webhooks signature and a timestamp within tolerance seconds of now (a Unix time,
    default time.time()) — and returns the event. Pass the raw body exactly as received (bytes;
    a str is encoded as UTF-8) and the request's headers (any mapping; looked up
    case-insensitively). Raises WebhookSignatureError when it does not verify, ValueError for a
    malformed secret (or a signed body that is not a JSON object)."""
    key = _secret_key(secret)
    msg_id, ts, sigs = _header(headers, "webhook-id"), _header(headers, "webhook-timestamp"), _header(headers, "webhook-signature")
    if not msg_id or not ts or not sigs:
        raise WebhookSignatureError("connectd: webhook signature does not verify: missing webhook-id, webhook-timestamp or webhook-signature")
    if not ts.isascii() or not ts.isdigit() or len(ts) > 18:
        raise WebhookSignatureError("connectd: webhook signature does not verify: bad webhook-timestamp")
    current = time.time() if now is None else now
    if abs(current - int(ts)) > tolerance:
        raise WebhookSignatureError("connectd: webhook signature does not verify: timestamp outside the tolerance")
    raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    want = hmac.new(key, f"{msg_id}.{ts}.".encode("utf-8") + raw, hashlib.sha256).digest()
    ok = False
    for s in sigs.split():
        version, sep, sig = s.partition(",")
        if not sep or version != "v1":
            continue
        try:
            got = base64.b64decode(sig, validate=True)
        except (binascii.Error, ValueError):
            continue
        # Every candidate is compared in constant time; none short-circuits the others.
        if hmac.compare_digest(got, want):
            ok = True
    if not ok:
        raise WebhookSignatureError("connectd: webhook signature does not verify: no v1 signature matches")
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        # Signed, so connectd's, yet not an event: not a forgery, a bug to report.
        raise ValueError("connectd client: the webhook body is not a JSON object")
    data = parsed.get("data")
    return WebhookEvent(
        id=msg_id, type=str(parsed.get("type") or ""), timestamp=str(parsed.get("timestamp") or ""),
        data=data if isinstance(data, dict) else {},
    )
