"""request_digest: the same value as the Go client's client.RequestDigest (and the TypeScript
requestDigest) for the same name and JSON arguments, so servers in any language bind
request_states alike."""

from __future__ import annotations

import base64
import decimal
import hashlib
import json
import math
from typing import Any

__all__ = ["request_digest", "go_json"]


def request_digest(name: str, args: Any) -> str:
    """A value for MintRequest.request_digest and resolve that binds a request_state to the MCP
    request it was minted for: the base64url SHA-256 of ``f"{len(name)}:{name}\\n"`` (the length
    in UTF-8 bytes) followed by the JSON of args as Go's encoding/json writes it (object keys
    sorted, ``<``, ``>``, ``&``, U+2028 and U+2029 escaped). args must be plain JSON values (dict
    with str keys, list/tuple, str, int, float, bool, None); a float is written as Go writes a
    float64, an int exactly."""
    raw = name.encode("utf-8")
    h = hashlib.sha256()
    h.update(f"{len(raw)}:".encode("ascii") + raw + b"\n")
    h.update(go_json(args).encode("utf-8"))
    return base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode("ascii")


def go_json(v: Any) -> str:
    """v as Go's json.Marshal writes the same JSON value."""
    out = _write(v)
    for c in ("<", ">", "&", "\u2028", "\u2029"):
        out = out.replace(c, "\\u%04x" % ord(c))
    return out


def _string(s: str) -> str:
    # Go writes invalid UTF-8 (a lone surrogate here) as U+FFFD.
    s = s.encode("utf-8", "surrogatepass").decode("utf-8", "replace") if _has_surrogate(s) else s
    return json.dumps(s, ensure_ascii=False)


def _has_surrogate(s: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in s)


def _write(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, float):
        return _float(v)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_write(x) for x in v) + "]"
    if isinstance(v, dict):
        for k in v:
            if not isinstance(k, str):
                raise TypeError(f"connectd client: request digest: a key of type {type(k).__name__}")
        # Go sorts map keys by their UTF-8 bytes, which is code point order.
        keys = sorted(v)
        return "{" + ",".join(_string(k) + ":" + _write(v[k]) for k in keys) + "}"
    raise TypeError(f"connectd client: request digest: unsupported value of type {type(v).__name__}")


def _float(f: float) -> str:
    """A float64 as Go's encoding/json writes it: the shortest round-trip digits, in exponent form
    below 1e-6 and from 1e21 on (with a one-digit-minimum exponent, "1e-7", "1e+21")."""
    if not math.isfinite(f):
        raise TypeError(f"connectd client: request digest: unsupported value {f}")
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    d = decimal.Decimal(repr(f))
    sign, digits, exp = d.as_tuple()
    assert isinstance(exp, int)
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    # value = 0.ds × 10^point
    point = len(digits) + exp
    neg = "-" if sign else ""
    a = abs(f)
    if a < 1e-6 or a >= 1e21:
        mant = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        e = point - 1
        return f"{neg}{mant}e{'-' if e < 0 else '+'}{abs(e)}"
    if point <= 0:
        return f"{neg}0.{'0' * -point}{ds}"
    if point >= len(ds):
        return f"{neg}{ds}{'0' * (point - len(ds))}"
    return f"{neg}{ds[:point]}.{ds[point:]}"
