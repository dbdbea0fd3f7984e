"""The HTTP connections to connectd: http.client over TLS, kept alive in a small pool."""

from __future__ import annotations

import http.client
import ipaddress
import select
import socket
import ssl
import threading
import urllib.parse
from typing import Any, Iterable, Optional, Union

Body = Union[bytes, bytearray, memoryview, str, Iterable[bytes], Any, None]

# The errors a kept-alive connection the server closed meanwhile fails with
# before any answer was read. The request is sent once more on a fresh
# connection only when that is harmless (an idempotent method): the server may
# have closed it after processing the request.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


def is_loopback(host: str) -> bool:
    """localhost, 127.0.0.0/8 or ::1."""
    h = host.strip("[]").lower()
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


class Transport:
    """Connections to one origin (scheme, host, port), pooled for reuse. Safe for concurrent use:
    each request takes a connection of its own."""

    def __init__(self, base: urllib.parse.SplitResult, timeout: float, ssl_context: Optional[ssl.SSLContext],
                 max_idle: int = 8) -> None:
        self._https = base.scheme == "https"
        self._host = base.hostname or ""
        self._port = base.port
        self._timeout = timeout
        self._ctx = ssl_context if ssl_context is not None else (ssl.create_default_context() if self._https else None)
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._max_idle = max_idle

    def _new(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        t = self._timeout if timeout is None else timeout
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=t, context=self._ctx)
        return http.client.HTTPConnection(self._host, self._port, timeout=t)

    def _take(self, timeout: Optional[float]) -> tuple[http.client.HTTPConnection, bool]:
        t = self._timeout if timeout is None else timeout
        while True:
            with self._lock:
                if not self._idle:
                    break
                conn = self._idle.pop()
            # An idle connection that is readable was closed by the server (or
            # sent something unasked): it is not reused.
            if conn.sock is None or _readable(conn.sock):
                conn.close()
                continue
            conn.timeout = t
            conn.sock.settimeout(t)
            return conn, True
        return self._new(timeout), False

    def release(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        """Returns conn to the pool once resp was read to its end (and may be kept alive)."""
        if resp.will_close or not resp.isclosed():
            conn.close()
            return
        with self._lock:
            if len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def request(self, method: str, target: str, headers: dict[str, str], body: Body = None, *,
                timeout: Optional[float] = None, retry_stale: bool = True,
                ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Sends one request; the caller reads the answer and calls release (or closes conn)."""
        chunked = body is not None and not isinstance(body, (bytes, bytearray, memoryview, str)) and not _has_length(headers)
        while True:
            conn, reused = self._take(timeout)
            try:
                conn.request(method, target, body=body, headers=headers, encode_chunked=chunked)
                return conn, conn.getresponse()
            except _STALE:
                conn.close()
                if reused and retry_stale:
                    continue
                raise
            except BaseException:
                conn.close()
                raise

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()


def _readable(sock: socket.socket) -> bool:
    try:
        r, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(r)


def _has_length(headers: dict[str, str]) -> bool:
    return any(k.lower() == "content-length" for k in headers)


# Re-exported for the client's error handling.
TransportErrors = (OSError, http.client.HTTPException, socket.timeout, ssl.SSLError)
