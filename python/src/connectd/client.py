"""Client: connectd's /v1 API for one MCP server (the Go client's client.go and wait.go)."""

from __future__ import annotations

import json
import math
import ssl
import time
import urllib.parse
from typing import Any, Mapping, Optional, Sequence, Union

from ._transport import Transport, TransportErrors, is_loopback
from .errors import (
    APIError,
    ConnectdNetworkError,
    RateLimitedError,
    URLElicitationUnsupportedError,
    UnavailableError,
    UserTokenError,
    WaitTimeoutError,
    api_error,
)
from .mcp import Answer, Peer, answer_for, can_open_url, connect_key, fallback_result, generation_of, input_key
from .proxy import ProviderProxy, ProxyResponse
from .types import Connection, Elicitation, ElicitationStatus, MintRequest, Token, Unlinked, is_final

__all__ = ["Client", "UserTokenHeader"]

UserTokenHeader = "X-User-Token"
"""Carries the user's MCP access token on every /v1 call."""

_MAX_RESPONSE = 1 << 20  # bounds what is read from connectd
_MAX_WAIT = 60  # connectd's longest long-poll, in seconds
_POLL_WAIT = 30  # how long each long-poll of wait asks connectd to hold


class Client:
    """The client of connectd's /v1 API for one MCP server. It is safe for concurrent use (one
    per process is enough). Every call acts for the user whose MCP access token it is given: the
    bare JWT the MCP server received from its MCP client (and verified), which connectd verifies
    again.

    :param base_url: connectd's public origin, e.g. ``https://connect.example.com`` (a path
        prefix is allowed). Must be https, except loopback or with ``allow_http``.
    :param key: this MCP server's client key (``cks_…``). Keep it secret: it is sent on every
        call, and never shows in a repr or an error.
    :param timeout: bounds each HTTP call in seconds (default 90, more than connectd's longest
        long-poll). A shorter one makes wait poll with shorter waits.
    :param allow_http: permits an http:// base_url whose host is not a loopback address
        (development only: the key and the users' tokens would cross the network in clear).
    :param user_agent: sent with every call; default ``connectd-client-python``.
    :param retry_wait: how long require_connection waits, in seconds, when the MCP client retries
        a request whose connect link is still pending (default 20; negative: no wait).
    :param fallback: by default require_connection answers an MCP client that did not declare
        URL-mode elicitation with a tool result that asks the user to open the link (Answer.fallback);
        False raises URLElicitationUnsupportedError instead, without minting anything.
    :param ssl_context: the TLS context for https (default ssl.create_default_context()).
    """

    def __init__(
        self,
        base_url: str,
        key: str,
        *,
        timeout: float = 90.0,
        allow_http: bool = False,
        user_agent: str = "connectd-client-python",
        retry_wait: float = 20.0,
        fallback: bool = True,
        ssl_context: Optional[ssl.SSLContext] = None,
    ) -> None:
        self._base, parts = _check_base_url(base_url, allow_http)
        if not key or any(c <= " " or c == "\x7f" for c in key):
            raise ValueError("connectd client: key must be the client key (cks_…)")
        self._key = key
        self._timeout = timeout if timeout and timeout > 0 else 90.0
        self._user_agent = user_agent or "connectd-client-python"
        self._retry_wait = 20.0 if retry_wait == 0 else max(retry_wait, 0.0)
        self._fallback = fallback
        self._path = parts.path.rstrip("/")
        self._transport = Transport(parts, self._timeout, ssl_context)

    @property
    def base_url(self) -> str:
        """connectd's base URL, as normalised (no trailing slash)."""
        return self._base

    def __repr__(self) -> str:
        return f"connectd.Client({self._base!r})"

    def close(self) -> None:
        """Closes the kept-alive connections (new calls open new ones)."""
        self._transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- elicitations -------------------------------------------------------

    def mint(self, user_token: str, req: Union[MintRequest, str], *, scopes: Sequence[str] = (), message: str = "",
             request_digest: str = "", account: str = "") -> Elicitation:
        """Creates an elicitation (POST /v1/elicitations): a connect URL bound to this client, the
        user and the provider, with the MCP shapes that carry it. Pass a MintRequest, or the
        provider and the fields as keywords. A 200 answer is the same request, still pending,
        answered again (``again``: the same link)."""
        if isinstance(req, str):
            req = MintRequest(req, list(scopes), message, request_digest, account)
        status, body = self._call("POST", "/v1/elicitations", user_token, body=req.to_json(), want=(201, 200))
        return Elicitation.from_json(body, again=status == 200)

    def status(self, user_token: str, elicitation_id: str, wait: float = 0) -> ElicitationStatus:
        """An elicitation's state (GET /v1/elicitations/{id}). With wait > 0 (seconds) connectd
        holds the answer until the elicitation leaves pending or the wait ends (at most 60 s)."""
        if not elicitation_id:
            raise ValueError("connectd client: empty elicitation id")
        query = None
        if wait > 0:
            query = {"wait": f"{math.ceil(min(wait, _MAX_WAIT))}s"}
        _, body = self._call("GET", "/v1/elicitations/" + _seg(elicitation_id), user_token, query=query)
        return ElicitationStatus.from_json(body)

    def wait(self, user_token: str, elicitation_id: str, timeout: Optional[float] = None) -> ElicitationStatus:
        """Blocks until the elicitation leaves pending (completed, declined, expired or failed) and
        returns its final state. It long-polls connectd, which answers as soon as the user finishes
        on any replica, and rides out rate limiting, unavailability and network errors (Retry-After,
        else a backoff from 0.25 s to 5 s). It stops early only when timeout (seconds) passes
        (WaitTimeoutError) or connectd refuses the call (connectd ends the wait itself when the
        elicitation expires)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        per_poll = max(min(_POLL_WAIT, int(self._timeout) - 5), 1)
        backoff = 0.25
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise WaitTimeoutError("connectd client: timed out waiting for the elicitation")
            poll = per_poll if left is None else max(min(per_poll, math.ceil(left)), 1)
            try:
                st = self.status(user_token, elicitation_id, wait=poll)
                if st.final:
                    return st
                backoff = 0.25
                continue
            except (UnavailableError, RateLimitedError, ConnectdNetworkError) as err:
                # connectd or the network is briefly unavailable: try again.
                delay = err.retry_after if isinstance(err, APIError) and err.retry_after else backoff
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and delay >= left:
                time.sleep(max(left, 0))
                raise WaitTimeoutError("connectd client: timed out waiting for the elicitation")
            time.sleep(delay)
            backoff = min(backoff * 2, 5.0)

    def cancel(self, user_token: str, elicitation_id: str) -> ElicitationStatus:
        """Tells connectd that the user declined or cancelled opening the link in the MCP client
        (DELETE /v1/elicitations/{id}): a pending elicitation ends declined (client_declined), so
        the next require_connection mints a new link at once. One that already ended is returned
        as it is."""
        if not elicitation_id:
            raise ValueError("connectd client: empty elicitation id")
        _, body = self._call("DELETE", "/v1/elicitations/" + _seg(elicitation_id), user_token)
        return ElicitationStatus.from_json(body)

    def resolve(self, user_token: str, request_state: str, request_digest: str = "") -> ElicitationStatus:
        """Consumes a request_state the MCP client echoed back (POST /v1/elicitations/resolve).
        While still pending, the answer's request_state is a fresh one for the next round.
        request_digest must repeat the one given at mint time, if any."""
        body: dict[str, Any] = {"request_state": request_state}
        if request_digest:
            body["request_digest"] = request_digest
        _, out = self._call("POST", "/v1/elicitations/resolve", user_token, body=body)
        return ElicitationStatus.from_json(out)

    def resume(self, user_token: str, request_state: str, request_digest: str = "", max_wait: float = 30.0) -> ElicitationStatus:
        """What an MCP server does when the client retries with the requestState it was given
        (2026-07-28): resolve it and, while still pending, wait up to max_wait seconds. The answer
        is final, or pending with a fresh request_state to hand back with reissue. Refusals of
        the request_state raise RequestStateError."""
        st = self.resolve(user_token, request_state, request_digest)
        if st.final or max_wait <= 0:
            return st
        try:
            return self.wait(user_token, st.id, timeout=max_wait)
        except WaitTimeoutError:
            return st  # still pending: hand back the fresh request_state

    def reissue(self, status: ElicitationStatus, message: str, key: str = "") -> dict[str, Any]:
        """The InputRequiredResult that hands a still-pending elicitation back to the MCP client
        (2026-07-28) with the fresh request_state from resolve or resume."""
        if status.status != "pending" or not status.request_state or not status.id:
            raise ValueError("connectd client: reissue needs a pending status with a fresh request_state (from resolve or resume)")
        k = key or input_key(status.provider)
        # The connect URL is connectd's origin and the opaque id (docs/api.md).
        url = f"{self._base}/c/{_seg(status.id)}"
        return {
            "resultType": "input_required",
            "inputRequests": {k: {"method": "elicitation/create", "params": {"mode": "url", "url": url, "message": message}}},
            "requestState": status.request_state,
        }

    def require_connection(self, user_token: str, peer: Peer, req: MintRequest) -> Answer:
        """Turns "this request needs provider X" into the MCP answer for what the MCP client
        declared: it mints an elicitation and shapes it with answer_for (its 2026-07-28 input key
        is connect_key(provider, account)), or as the fallback tool result when the client did not
        declare URL-mode elicitation. Call it when needs_connection(err) for a token read.

        A retry of a request whose link is still pending (give the request a request_digest so a
        retry is recognised) waits on the long-poll for up to retry_wait: if the user finishes
        meanwhile the answer is ready (read the token again); if the link ended otherwise a new
        one is minted; if it is still pending, the answer carries the same link again."""
        if not can_open_url(peer) and not self._fallback:
            raise URLElicitationUnsupportedError(
                f"connectd: the MCP client cannot do URL-mode elicitation: protocol version {peer.protocol_version!r}, "
                f"URL mode declared: {peer.url_elicitation}"
            )
        e = self.mint(user_token, req)
        if e.again and self._retry_wait > 0:
            try:
                st = self.wait(user_token, e.id, timeout=self._retry_wait)
                if st.status == "completed":
                    return Answer(generation_of(peer.protocol_version), e, ready=True)
                e = self.mint(user_token, req)  # declined, expired or failed while we waited: a new link
            except WaitTimeoutError:
                pass  # still pending: the same link again
        if not can_open_url(peer):
            return Answer(generation_of(peer.protocol_version), e, fallback=fallback_result(e))
        return answer_for(e, peer.protocol_version, connect_key(req.provider, req.account))

    # --- connections and tokens ---------------------------------------------

    def connections(self, user_token: str) -> list[Connection]:
        """The user's connections this client was allowed to use (GET /v1/connections). No
        credential is included."""
        _, body = self._call("GET", "/v1/connections", user_token)
        return [Connection.from_json(c) for c in body.get("connections") or []]

    def token(self, user_token: str, provider: str, *required_scopes: str) -> Token:
        """A currently valid credential for provider (GET /v1/connections/{provider}/token),
        refreshed by connectd first if it was about to expire. Every scope in required_scopes must
        have been granted, else InsufficientScopeError with missing_scopes. When
        needs_connection(err), call require_connection. Approved for several accounts there, it
        raises AccountRequiredError with the accounts: ask the user which, then account_token."""
        return self.account_token(user_token, provider, "", *required_scopes)

    def account_token(self, user_token: str, provider: str, account: str, *required_scopes: str) -> Token:
        """token for one of the user's accounts at provider: its connection id; "" is token's
        choice. An id that is not one of the user's there is NotFoundError; one this client is not
        approved for is ConsentRequiredError (mint with that account)."""
        if not provider:
            raise ValueError("connectd client: empty provider")
        query: dict[str, str] = {}
        if required_scopes:
            query["scopes"] = ",".join(required_scopes)
        if account:
            query["account"] = account
        _, body = self._call("GET", f"/v1/connections/{_seg(provider)}/token", user_token, query=query or None)
        return Token.from_json(body)

    def unlink(self, user_token: str, provider: str, account: str = "") -> Unlinked:
        """Deletes the user's connection to provider and revokes it at the provider where
        supported (DELETE /v1/connections/{provider}); every client's consent to it is withdrawn.
        Without account it is the one this client is approved for (AccountRequiredError when
        several); with an id that one; with AccountAll every one this client is approved for."""
        if not provider:
            raise ValueError("connectd client: empty provider")
        query = {"account": account} if account else None
        _, body = self._call("DELETE", f"/v1/connections/{_seg(provider)}", user_token, query=query)
        return Unlinked.from_json(body)

    # --- the provider API proxy ---------------------------------------------

    def provider(self, user_token: str, provider: str, *, account: str = "", path_prefix: str = "") -> ProviderProxy:
        """A caller of connectd's provider API proxy (GET, HEAD, POST, PUT, PATCH, DELETE
        /v1/proxy/{provider}/{path}) for user_token's user at provider: connectd attaches the
        user's credential and forwards the call to the provider's API, so the MCP server never
        holds it. See ProviderProxy."""
        return ProviderProxy(self, user_token, provider, account=account, path_prefix=path_prefix)

    def proxy(self, user_token: str, provider: str, method: str, path: str, *, account: str = "",
              headers: Optional[Mapping[str, str]] = None, body: Any = None, json_body: Any = None,
              stream: bool = False, timeout: Optional[float] = None) -> ProxyResponse:
        """One provider API call through connectd's proxy: ``client.proxy(tok, "github", "GET",
        "/user/repos?per_page=10")``. See ProviderProxy.request."""
        return self.provider(user_token, provider, account=account).request(
            method, path, headers=headers, body=body, json_body=json_body, stream=stream, timeout=timeout)

    # --- plumbing -------------------------------------------------------------

    def _call(self, method: str, path: str, user_token: str, *, query: Optional[Mapping[str, str]] = None,
              body: Any = None, want: Sequence[int] = (200,), timeout: Optional[float] = None) -> tuple[int, dict[str, Any]]:
        """Makes one call and decodes an answer with one of the want statuses; any other status
        raises the APIError subclass of its code."""
        if not user_token:
            raise UserTokenError(0, "missing_user_token",
                                 f"{method} {path}: no user token given (the MCP access token of the user the call is for)")
        target = self._path + path
        if query:
            target += "?" + urllib.parse.urlencode(query)
        headers = {
            "Authorization": f"Bearer {self._key}",
            UserTokenHeader: user_token,
            "Accept": "application/json",
            "User-Agent": self._user_agent,
        }
        data = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode("utf-8")
            headers["Content-Type"] = "application/json"
        try:
            conn, resp = self._transport.request(method, target, headers, data, timeout=timeout,
                                                 retry_stale=method in ("GET", "HEAD", "DELETE"))
        except TransportErrors as err:
            # The path holds no secret (the key and the token travel in headers).
            raise ConnectdNetworkError(f"connectd client: {method} {path}: {_describe(err)}") from None
        try:
            raw = resp.read(_MAX_RESPONSE + 1)
            if len(raw) > _MAX_RESPONSE:
                conn.close()
                raise ConnectdNetworkError(f"connectd client: {method} {path}: answer larger than {_MAX_RESPONSE} bytes")
            # Drain to the end so the connection can be kept.
            resp.read()
        except TransportErrors as err:
            conn.close()
            raise ConnectdNetworkError(f"connectd client: read {method} {path}: {_describe(err)}") from None
        self._transport.release(conn, resp)
        if resp.status not in want:
            raise api_error(resp.status, raw, resp.getheader("Retry-After"))
        try:
            out = json.loads(raw)
        except ValueError:
            raise ConnectdNetworkError(f"connectd client: {method} {path}: answer is not the expected JSON") from None
        if not isinstance(out, dict):
            raise ConnectdNetworkError(f"connectd client: {method} {path}: answer is not the expected JSON")
        return resp.status, out

    def _proxy_parts(self) -> tuple[Transport, str, str]:
        return self._transport, self._path, self._key


def _seg(s: str) -> str:
    """A path segment, escaped."""
    return urllib.parse.quote(s, safe="")


def _describe(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


def _check_base_url(raw: str, allow_http: bool) -> tuple[str, urllib.parse.SplitResult]:
    bad = "connectd client: base_url must be an absolute https URL without user info, query or fragment"
    s = (raw or "").rstrip("/")
    try:
        u = urllib.parse.urlsplit(s)
        u.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise ValueError(bad) from None
    if not u.hostname or u.username is not None or u.password is not None or u.query or u.fragment or "?" in raw or "#" in raw:
        raise ValueError(bad)
    if u.scheme == "http":
        if not allow_http and not is_loopback(u.hostname):
            raise ValueError("connectd client: base_url must use https (set allow_http for a development http:// URL)")
    elif u.scheme != "https":
        raise ValueError("connectd client: base_url must be an http(s) URL")
    return urllib.parse.urlunsplit(u), u

