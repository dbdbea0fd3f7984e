"""The provider API proxy: calls of a provider's API sent through connectd
(GET, HEAD, POST, PUT, PATCH, DELETE /v1/proxy/{provider}/{path}), which attaches the user's
credential, so the MCP server never holds it (the Go client's proxy.go, the TypeScript
providerFetch)."""

from __future__ import annotations

import email.message
import http.client
import json
import secrets
import urllib.parse
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Optional

from ._transport import TransportErrors
from .errors import APIError, ConnectdNetworkError, UserTokenError, api_error

if TYPE_CHECKING:
    from .client import Client

__all__ = ["AccountHeader", "RequestIDHeader", "ProviderProxy", "ProxyResponse"]

AccountHeader = "Connectd-Account"
"""Names the connection a proxied call is for (the token read's account=<id>); connectd does not forward it."""
RequestIDHeader = "X-Request-Id"
"""Carries a request id to connectd, which adopts it, answers with it and writes it into its error
envelope's request_id. connectd never forwards it to the provider."""

_MAX_ENVELOPE = 64 << 10  # how much of an error answer is read to see whether it is connectd's envelope
_OWN = {"authorization", "x-user-token", "connectd-account", "host", "content-length", "transfer-encoding", "connection"}


class ProxyResponse:
    """The provider's answer as connectd streams it: status, headers, body.

    Without stream=True the body is read at once (``content``, ``text``, ``json()``); with it,
    read it as it arrives (``iter_bytes``, ``iter_lines``, ``read``) and close the response (or
    use it as a context manager). Redirects are returned, not followed."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse, prefix: bytes,
                 release: Any) -> None:
        self.status: int = resp.status
        """The provider's HTTP status (or connectd's, for a redirect or an answer it passes on)."""
        self.reason: str = resp.reason
        self.headers: email.message.Message = resp.headers
        """The answer's headers (case-insensitive: ``headers["Content-Type"]``, ``headers.get_all(...)``)."""
        self._conn, self._resp, self._prefix, self._release = conn, resp, prefix, release
        self._content: Optional[bytes] = None
        self._pos = 0
        self._closed = False

    def __repr__(self) -> str:
        return f"<ProxyResponse {self.status}>"

    @property
    def ok(self) -> bool:
        """Whether the status is below 400."""
        return self.status < 400

    def read(self, n: int = -1) -> bytes:
        """Up to n bytes of the body (all that is left when n < 0); b"" at its end. With n > 0 it
        returns as soon as some bytes arrived (a streamed answer is not held back)."""
        if self._content is not None:
            end = len(self._content) if n < 0 else min(self._pos + n, len(self._content))
            out, self._pos = self._content[self._pos:end], end
            return out
        if self._prefix:
            out = self._prefix if n < 0 else self._prefix[:n]
            self._prefix = self._prefix[len(out):]
            if n < 0:
                out += self._read_rest()
            return out
        if self._closed:
            return b""
        try:
            data = self._read_rest() if n < 0 else self._resp.read1(n)
        except (OSError, http.client.HTTPException) as err:
            self.close()
            raise ConnectdNetworkError(f"connectd client: proxy: reading the answer: {type(err).__name__}") from None
        if not data:
            self._finish()
        return data

    def _read_rest(self) -> bytes:
        if self._closed:
            return b""
        try:
            data = self._resp.read()
        except (OSError, http.client.HTTPException) as err:
            self.close()
            raise ConnectdNetworkError(f"connectd client: proxy: reading the answer: {type(err).__name__}") from None
        self._finish()
        return data

    def iter_bytes(self, chunk_size: int = 65536) -> Iterator[bytes]:
        """The body in pieces as they arrive."""
        while True:
            b = self.read(chunk_size)
            if not b:
                return
            yield b

    def iter_lines(self) -> Iterator[bytes]:
        """The body line by line (with their line endings) as they arrive: server-sent events,
        NDJSON."""
        buf = b""
        for chunk in self.iter_bytes():
            buf += chunk
            while True:
                i = buf.find(b"\n")
                if i < 0:
                    break
                yield buf[: i + 1]
                buf = buf[i + 1:]
        if buf:
            yield buf

    @property
    def content(self) -> bytes:
        """The whole body (read now if it was not yet)."""
        if self._content is None:
            self._content = self.read()
            self._pos = len(self._content)
        return self._content

    @property
    def text(self) -> str:
        """The body decoded with its charset (default UTF-8)."""
        return self.content.decode(self.headers.get_content_charset() or "utf-8", "replace")

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.content)

    def _finish(self) -> None:
        if not self._closed:
            self._closed = True
            self._release(self._conn, self._resp)

    def close(self) -> None:
        """Ends the answer: what was not read is dropped (with the connection)."""
        if not self._closed:
            self._closed = True
            self._conn.close()

    def __enter__(self) -> "ProxyResponse":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ProviderProxy:
    """Calls a provider's API through connectd's proxy for one user, one provider and optionally
    one account. Make one with Client.provider; it is safe for concurrent use.

    A request names the API path below connectd's API base URL for the provider (``/user/repos``)
    or a full URL as a provider SDK builds it (``https://api.github.com/user/repos?per_page=10``):
    whatever the scheme and host, its path — less path_prefix — and query are sent as
    ``{connectd}/v1/proxy/github/user/repos?per_page=10``. The path is sent as written (an escaped
    slash stays escaped). An SDK whose base URL has a path connectd's API base already has
    (GitLab's ``https://gitlab.com/api/v4``) takes path_prefix="/api/v4"; a path outside it is
    refused unsent (ValueError).

    The method, the body (bytes, str, a file or an iterable of bytes, streamed) and the headers
    cross to connectd, which forwards them less Authorization, cookies and its own headers;
    Authorization carries the client key, and X-User-Token, Connectd-Account (account) and, unless
    given, a fresh X-Request-Id are set.

    connectd forwards only GET, HEAD, POST, PUT, PATCH and DELETE (the method is sent upper-cased)
    and only a call the provider will act on exactly as made. It refuses, before anything is looked
    up, with InvalidRequestError: another method (405 method_not_allowed, with Allow); a path that
    is not a plain path below the API base — an empty, "." or ".." segment in any encoding, a ";",
    a backslash (400 invalid_proxy_path); a method override or URL rewrite — a header such as
    X-HTTP-Method-Override or X-Original-URL, a _method query parameter or form-encoded field (400
    proxy_override_refused). These are not checked before sending: connectd's answer is the one
    rule. A HEAD connectd refuses has no body to tell it apart and comes back as a bare 400 or 405
    ProxyResponse.

    A refusal by connectd itself (not connected, no consent, the provider refused the credential
    even refreshed, rate limited, …) is raised as the APIError subclass of its code
    (needs_connection, AccountRequiredError, RateLimitedError, …). It is told apart from the
    provider's own JSON errors by its request_id, the request's X-Request-Id, which connectd never
    forwards to the provider; every other answer, the provider's errors included, is returned as
    a ProxyResponse.
    """

    def __init__(self, client: "Client", user_token: str, provider: str, *, account: str = "", path_prefix: str = "") -> None:
        self._client = client
        self._user_token = user_token
        self.provider = provider
        self.account = account
        p = "/" + path_prefix.strip("/")
        self._prefix = "" if p == "/" else urllib.parse.quote(p, safe="/%:@!$&'()*+,;=-._~")

    def __repr__(self) -> str:
        return f"<ProviderProxy {self.provider}{' account ' + self.account if self.account else ''}>"

    def target(self, url: str, params: Optional[Mapping[str, Any]] = None) -> str:
        """The path and query at connectd that a request for url goes to."""
        u = urllib.parse.urlsplit(url)
        if u.scheme and u.scheme not in ("http", "https"):
            raise ValueError("connectd client: proxy: only http(s) URLs or API paths")
        p = u.path
        if self._prefix:
            if not p.startswith(self._prefix) or (len(p) > len(self._prefix) and p[len(self._prefix)] != "/"):
                raise ValueError(f"connectd client: proxy: the path {p} is not below {self._prefix}")
            p = p[len(self._prefix):]
        if not p.startswith("/"):
            p = "/" + p
        _, base_path, _ = self._client._proxy_parts()
        out = f"{base_path}/v1/proxy/{urllib.parse.quote(self.provider, safe='')}{p}"
        query = u.query
        if params:
            extra = urllib.parse.urlencode(params, doseq=True)
            query = f"{query}&{extra}" if query else extra
        return f"{out}?{query}" if query else out

    def request(self, method: str, url: str, *, params: Optional[Mapping[str, Any]] = None,
                headers: Optional[Mapping[str, str]] = None, body: Any = None, json_body: Any = None,
                stream: bool = False, timeout: Optional[float] = None) -> ProxyResponse:
        """Sends one call (see the class). json_body is sent as JSON with its Content-Type. With
        stream=True the answer's body is left to be read as it arrives."""
        if not self._user_token:
            raise UserTokenError(0, "missing_user_token",
                                 f"proxy {self.provider}: no user token given (the MCP access token of the user the call is for)")
        if not self.provider:
            raise ValueError("connectd client: proxy: empty provider")
        target = self.target(url, params)
        transport, _, key = self._client._proxy_parts()
        out: dict[str, str] = {}
        rid = ""
        for k, v in (headers or {}).items():
            lk = k.lower()
            if lk == "x-request-id":
                rid = v
            elif lk not in _OWN:
                out[k] = v
        if json_body is not None:
            if body is not None:
                raise ValueError("connectd client: proxy: body and json_body both given")
            body = json.dumps(json_body, separators=(",", ":")).encode("utf-8")
            if not any(k.lower() == "content-type" for k in out):
                out["Content-Type"] = "application/json"
        if isinstance(body, str):
            body = body.encode("utf-8")
        rid = rid or secrets.token_hex(16)
        out["Authorization"] = f"Bearer {key}"
        out["X-User-Token"] = self._user_token
        if self.account:
            out[AccountHeader] = self.account
        out[RequestIDHeader] = rid
        m = method.upper()
        # A kept-alive connection found closed is retried only when nothing of a
        # non-idempotent call can have been processed twice: bytes bodies of
        # idempotent methods.
        retry = (body is None or isinstance(body, (bytes, bytearray))) and m in ("GET", "HEAD", "OPTIONS", "PUT", "DELETE")
        try:
            conn, resp = transport.request(m, target, out, body, timeout=timeout, retry_stale=retry)
        except TransportErrors as err:
            # The target holds no secret (the credentials travel in headers).
            raise ConnectdNetworkError(f"connectd client: proxy {m} {self.provider}: {type(err).__name__}: {err}") from None
        try:
            prefix = _refusal(resp, rid)
        except APIError as err:
            conn.close()
            if err.approval is not None:
                err.approval.account = self.account or ""  # the account this call named
            raise
        except (OSError, http.client.HTTPException) as err:
            conn.close()
            raise ConnectdNetworkError(f"connectd client: proxy {m} {self.provider}: reading the answer: {type(err).__name__}") from None
        r = ProxyResponse(conn, resp, prefix, transport.release)
        if m == "HEAD":
            r._finish()
        elif not stream:
            _ = r.content
        return r

    def get(self, url: str, **kw: Any) -> ProxyResponse:
        """request("GET", url, …)."""
        return self.request("GET", url, **kw)

    def post(self, url: str, **kw: Any) -> ProxyResponse:
        """request("POST", url, …)."""
        return self.request("POST", url, **kw)

    def put(self, url: str, **kw: Any) -> ProxyResponse:
        """request("PUT", url, …)."""
        return self.request("PUT", url, **kw)

    def patch(self, url: str, **kw: Any) -> ProxyResponse:
        """request("PATCH", url, …)."""
        return self.request("PATCH", url, **kw)

    def delete(self, url: str, **kw: Any) -> ProxyResponse:
        """request("DELETE", url, …)."""
        return self.request("DELETE", url, **kw)


def _refusal(resp: http.client.HTTPResponse, sent: str) -> bytes:
    """Raises connectd's refusal in resp, or returns what was read of the body (to be put back in
    front). A refusal is an error status whose JSON body is connectd's envelope naming this
    request's id (sent, or the one connectd answered with: the provider never sees it)."""
    if resp.status < 400:
        return b""
    ctype = (resp.getheader("Content-Type") or "").split(";")[0].strip().lower()
    if ctype != "application/json":
        return b""
    length = resp.getheader("Content-Length")
    if length is not None and length.strip().isdigit() and int(length) > _MAX_ENVELOPE:
        return b""
    raw = b""
    while len(raw) <= _MAX_ENVELOPE:
        chunk = resp.read1(_MAX_ENVELOPE + 1 - len(raw))
        if not chunk:
            break
        raw += chunk
    if len(raw) > _MAX_ENVELOPE:
        return raw
    try:
        b = json.loads(raw)
    except ValueError:
        return raw
    if not isinstance(b, dict):
        return raw
    code, rid = b.get("error"), b.get("request_id")
    if not isinstance(code, str) or not code or not isinstance(rid, str) or not rid:
        return raw
    if rid != sent and rid != resp.getheader(RequestIDHeader):
        return raw
    raise api_error(resp.status, raw, resp.getheader("Retry-After"))
