"""Errors of the connectd client.

Every refusal connectd answers is an :class:`APIError` carrying the HTTP status
and the stable code of connectd's JSON error envelope (docs/api.md). The
subclasses are the error families of the Go client's sentinel errors
(client/errors.go) and the TypeScript client's ``ErrorFamily``: catch
:class:`NotConnectedError`, :class:`ConsentRequiredError`, … or test with
:func:`needs_connection`. A code that stands for two families (the
``request_state_*`` ones) is a subclass of both.

No error ever carries the client key or a token: they travel in headers, and
messages are built only from the status, the code and connectd's description,
which never holds a secret.
"""

from __future__ import annotations

import email.utils
import http
import json
import time
from typing import Any, Optional, Sequence

from .types import Account, Approval, ElicitationStatus  # types imports nothing of this package

__all__ = [
    "ConnectdError",
    "APIError",
    "NotConnectedError",
    "ConsentRequiredError",
    "InsufficientScopeError",
    "ReauthorizationRequiredError",
    "AccountRequiredError",
    "NotFoundError",
    "InvalidClientError",
    "UserTokenError",
    "UnknownProviderError",
    "ProviderNotAllowedError",
    "InvalidRequestError",
    "RequestStateError",
    "RequestStateInvalidError",
    "RequestStateExpiredError",
    "RequestStateReplayedError",
    "RequestStateWrongUserError",
    "RequestStateWrongClientError",
    "RequestDigestMismatchError",
    "RateLimitedError",
    "UnavailableError",
    "ApprovalRequiredError",
    "ApprovalDeniedError",
    "ApprovalNotGivenError",
    "ConnectdNetworkError",
    "URLElicitationUnsupportedError",
    "WaitTimeoutError",
    "WebhookSignatureError",
    "KNOWN_CODES",
    "GENERIC_CODES",
    "error_class",
    "needs_connection",
    "accounts_of",
    "missing_scopes",
    "approval_required",
    "approval_outcome",
]


class ConnectdError(Exception):
    """The base of every error this package raises."""


class APIError(ConnectdError):
    """A refusal from connectd: the HTTP status and the stable error code.

    ``status`` is 0 when the client refused to make the call (no user token).
    """

    status: int
    """HTTP status; 0 when the client refused to make the call."""
    code: str
    """Stable error code, e.g. ``"not_connected"``; empty if the answer was not connectd's JSON."""
    description: str
    """Human-readable explanation from connectd (never a secret)."""
    request_id: str
    """connectd's request id, for its logs."""
    missing_scopes: list[str]
    """The scopes the connection lacks (insufficient_scope)."""
    unapproved_scopes: list[str]
    """Scopes the credential carries that the user has not approved for this MCP server (consent_required)."""
    account_changed: bool
    """The connection is to another provider account than the approved one (consent_required)."""
    accounts: list["Account"]
    """The user's accounts at the provider this client may use (account_required)."""
    account: str
    """The connection concerned (reauthorization_required, insufficient_scope on a token read); mint with it."""
    approval: Optional["Approval"]
    """The approval elicitation of a user_approval_required refusal (:func:`approval_required`)."""
    retry_after: Optional[float]
    """The Retry-After delay of a 429 or 503 answer in seconds, if any."""

    def __init__(
        self,
        status: int,
        code: str = "",
        description: str = "",
        *,
        request_id: str = "",
        missing_scopes: Sequence[str] = (),
        unapproved_scopes: Sequence[str] = (),
        account_changed: bool = False,
        accounts: Sequence["Account"] = (),
        account: str = "",
        approval: Optional["Approval"] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        self.status = status
        self.code = code
        self.description = description
        self.request_id = request_id
        self.missing_scopes = list(missing_scopes)
        self.unapproved_scopes = list(unapproved_scopes)
        self.account_changed = account_changed
        self.accounts = list(accounts)
        self.account = account
        self.approval = approval
        self.retry_after = retry_after
        super().__init__(self._message())

    def _message(self) -> str:
        s = f"connectd: {self.status}"
        if self.code:
            s += " " + self.code
        if self.description:
            s += ": " + self.description
        if self.missing_scopes:
            s += " (missing scopes: " + " ".join(self.missing_scopes) + ")"
        return s

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, description={self.description!r})"

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), self.__dict__.copy()))


def _rebuild(cls: "type[APIError]", state: dict[str, Any]) -> APIError:
    e = cls.__new__(cls)
    e.__dict__.update(state)
    Exception.__init__(e, e._message())
    return e


class NotConnectedError(APIError):
    """The user has no connection to the provider: mint an elicitation."""


class ConsentRequiredError(APIError):
    """Connected, but this MCP server is not approved for all of it (``unapproved_scopes``,
    ``account_changed``): mint an elicitation; the user approves on connectd's consent page."""


class InsufficientScopeError(APIError):
    """The connection lacks a required scope (``missing_scopes``): mint an elicitation asking for them."""


class ReauthorizationRequiredError(APIError):
    """The provider refused the stored grant: mint an elicitation (for one account, with ``account``)."""


class AccountRequiredError(APIError):
    """This client is approved for several of the user's accounts at the provider and the call named
    none; ``accounts`` lists them. Ask the user which (:func:`connectd.choose_account`), then call
    again with that id. A choice, not a missing connection: :func:`needs_connection` is false."""


class NotFoundError(APIError):
    """Unknown elicitation, or another client's or user's; or an account that is not one of the
    user's at the provider (connectd does not tell them apart)."""


class InvalidClientError(APIError):
    """The client key is missing, wrong, expired or the client is disabled."""


class UserTokenError(APIError):
    """The user's MCP access token was refused (missing, expired, another audience, untrusted
    issuer, bad signature…); ``code`` says which."""


class UnknownProviderError(APIError):
    """The provider is not in connectd's catalog."""


class ProviderNotAllowedError(APIError):
    """This client may not use that provider (or not this way: a proxy-only client, a call outside
    its request rules, a provider without an API for the proxy)."""


class InvalidRequestError(APIError):
    """Malformed input (bad scope, message too long, …), or a proxied call connectd does not
    forward as made: a path that is not a plain path below the provider's API
    (invalid_proxy_path), a method outside GET, HEAD, POST, PUT, PATCH, DELETE (405
    method_not_allowed), a method override or URL rewrite (proxy_override_refused)."""


class RequestStateError(APIError):
    """Every refusal of a request_state; the subclasses say why."""


class RequestStateInvalidError(RequestStateError):
    """Tampered with or not issued by connectd."""


class RequestStateExpiredError(RequestStateError):
    """Past its lifetime; mint a new elicitation."""


class RequestStateReplayedError(RequestStateError):
    """Already resolved once (each is single-use)."""


class RequestStateWrongUserError(RequestStateError):
    """Minted for another user."""


class RequestStateWrongClientError(RequestStateError):
    """Minted for another client."""


class RequestDigestMismatchError(RequestStateError):
    """The request_digest differs from the one bound at mint time."""


class RateLimitedError(APIError):
    """Too many requests; ``retry_after`` says when to retry."""


class UnavailableError(APIError):
    """connectd or a dependency (the provider, the issuer's keys) is temporarily unavailable."""


class ApprovalRequiredError(APIError):
    """A proxied call matched a request rule that asks the user first (403 user_approval_required);
    the provider was not called. ``approval`` is the approval elicitation: hand it to the MCP
    client as a connect link (:func:`connectd.answer_for` with :func:`connectd.approval_key`), wait
    for it, and once it is completed send exactly the same request again."""


class ApprovalDeniedError(ConnectdError):
    """The user denied the request on connectd's approval page (status declined, reason
    user_denied; :func:`approval_outcome`). It was not made: do not send it again; tell the user
    and the model it was denied (:func:`connectd.denied_result`)."""

    def __init__(self, elicitation_id: str) -> None:
        self.elicitation_id = elicitation_id
        super().__init__(f"connectd: the user denied this request (approval {elicitation_id})")


class ApprovalNotGivenError(ConnectdError):
    """An approval that ended without a decision: the MCP client's user dismissed the link
    (reason client_declined), or nobody answered in time (status expired). Ask again."""

    def __init__(self, elicitation_id: str, status: str, reason: str) -> None:
        self.elicitation_id, self.status, self.reason = elicitation_id, status, reason
        super().__init__(f"connectd: the approval {elicitation_id} was not given ({status}{', ' + reason if reason else ''})")

    @property
    def expired(self) -> bool:
        """Nobody answered in time."""
        return self.status == "expired"


class ConnectdNetworkError(ConnectdError):
    """connectd could not be reached, or its answer could not be read (a network error, a
    timeout, an answer that is not the expected JSON). :meth:`Client.wait` retries these."""


class URLElicitationUnsupportedError(ConnectdError):
    """The MCP client cannot do URL-mode elicitation (a protocol before 2025-11-25, or no "url"
    elicitation capability declared), so there is no way to send the user to connectd."""


class WaitTimeoutError(ConnectdError):
    """:meth:`Client.wait` or :meth:`Client.resume` ran out of its own timeout."""


class WebhookSignatureError(ConnectdError):
    """A webhook request that is not connectd's: no or a wrong signature, a timestamp too far from
    now, a missing header."""


# connectd's error codes and the class each stands for (client/errors.go's codeErrors).
_CODES: dict[str, type[APIError]] = {
    "not_connected": NotConnectedError,
    "consent_required": ConsentRequiredError,
    "insufficient_scope": InsufficientScopeError,
    "reauthorization_required": ReauthorizationRequiredError,
    "account_required": AccountRequiredError,
    "not_found": NotFoundError,
    "invalid_client": InvalidClientError,
    "invalid_dpop_proof": InvalidClientError,  # a client that must prove its calls with DPoP
    "missing_user_token": UserTokenError,
    "invalid_token": UserTokenError,
    "token_expired": UserTokenError,
    "token_not_yet_valid": UserTokenError,
    "untrusted_issuer": UserTokenError,
    "wrong_audience": UserTokenError,
    "unknown_provider": UnknownProviderError,
    "provider_not_allowed": ProviderNotAllowedError,
    "invalid_request": InvalidRequestError,
    "invalid_scope": InvalidRequestError,
    "request_too_large": InvalidRequestError,
    "request_state_invalid": RequestStateInvalidError,
    "request_state_expired": RequestStateExpiredError,
    "request_state_replayed": RequestStateReplayedError,
    "request_state_wrong_user": RequestStateWrongUserError,
    "request_state_wrong_client": RequestStateWrongClientError,
    "request_digest_mismatch": RequestDigestMismatchError,
    "rate_limited": RateLimitedError,
    "provider_unavailable": UnavailableError,
    "provider_timeout": UnavailableError,
    "jwks_unavailable": UnavailableError,
    "database_unavailable": UnavailableError,
    # The provider API proxy (/v1/proxy): the provider refused the credential
    # even refreshed (connect again), asked not to be called for now, answered
    # more than the proxy passes on; or connectd knows no API for the provider.
    "provider_unauthorized": ReauthorizationRequiredError,
    "provider_rate_limited": RateLimitedError,
    "provider_response_too_large": InvalidRequestError,
    "proxy_not_supported": ProviderNotAllowedError,
    "token_release_disabled": ProviderNotAllowedError,  # a proxy-only client: call through the proxy
    "proxy_not_allowed": ProviderNotAllowedError,  # outside the client's request rules
    "provider_app_required": ProviderNotAllowedError,  # the client's organization has no app at the provider
    # The proxy's refusals of the call itself, before anything is looked up: a
    # path that is not a plain path below the API base, a method it does not
    # forward (405, with Allow), a method override or URL rewrite. The call is
    # wrong as made; sending it again will not help.
    "invalid_proxy_path": InvalidRequestError,
    "method_not_allowed": InvalidRequestError,
    "proxy_override_refused": InvalidRequestError,
    # A request rule that asks: the user approves this call first.
    "user_approval_required": ApprovalRequiredError,
}

KNOWN_CODES: tuple[str, ...] = tuple(sorted(_CODES))
"""The error codes this client maps to a family; docs/openapi.yaml lists each of them."""

GENERIC_CODES: tuple[str, ...] = ("internal_error", "unsupported_media_type", "cross_origin_request")
"""Codes that need no action of their own from an MCP server: they map to no family (plain APIError)."""


def error_class(status: int, code: str) -> type[APIError]:
    """The class connectd's answer with status and code is raised as."""
    cls = _CODES.get(code)
    if cls is not None:
        return cls
    if status == 429:
        return RateLimitedError
    if status in (502, 503, 504):
        return UnavailableError
    if status == 401 and code:
        # An unknown 401 code from a newer connectd is still a credential
        # problem; which one the description says.
        return UserTokenError
    return APIError


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Retry-After as seconds (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    v = value.strip()
    if v.isdigit():
        return float(int(v))
    try:
        t = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError):
        return None
    if t is None:
        return None
    return max(t.timestamp() - (time.time() if now is None else now), 0.0)


def api_error(status: int, raw: bytes, retry_after: Optional[str]) -> APIError:
    """connectd's error answer (status, body, Retry-After) as the APIError subclass of its code:
    the one reading of the JSON error envelope, for the client's calls and the proxy's alike."""
    b: Any = None
    try:
        b = json.loads(raw)
    except ValueError:
        pass
    ra = parse_retry_after(retry_after)
    if isinstance(b, dict) and isinstance(b.get("error"), str) and b["error"]:
        code = b["error"]
        acct = b.get("account")
        return error_class(status, code)(
            status,
            code,
            str(b.get("error_description") or ""),
            request_id=str(b.get("request_id") or ""),
            missing_scopes=_strs(b.get("missing_scopes")),
            unapproved_scopes=_strs(b.get("unapproved_scopes")),
            account_changed=b.get("account_changed") is True,
            accounts=[Account.from_json(a) for a in b.get("accounts") or [] if isinstance(a, dict)],
            account=str(acct.get("id") or "") if isinstance(acct, dict) else "",
            approval=_approval(code, b.get("approval")),
            retry_after=ra,
        )
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = str(status)
    return error_class(status, "")(status, "", f"unexpected answer: {phrase}", retry_after=ra)


def _strs(v: Any) -> list[str]:
    return [str(x) for x in v] if isinstance(v, list) else []


def _approval(code: str, v: Any) -> Optional["Approval"]:
    if code != "user_approval_required" or not isinstance(v, dict):
        return None
    try:
        return Approval.from_json(v)
    except (TypeError, ValueError, AttributeError):
        return None  # not the approval document: the refusal without it


def needs_connection(err: BaseException) -> bool:
    """Whether err means the user must go through connectd's connect flow first: not connected,
    no consent for this MCP server, missing scopes, or a dead grant. The answer to all four is
    the same: :meth:`Client.require_connection`."""
    return isinstance(err, (NotConnectedError, ConsentRequiredError, InsufficientScopeError, ReauthorizationRequiredError))


def accounts_of(err: BaseException) -> list["Account"]:
    """The accounts an account_required refusal lists, or []."""
    if isinstance(err, APIError) and err.code == "account_required":
        return list(err.accounts)
    return []


def missing_scopes(err: BaseException) -> list[str]:
    """The scopes an insufficient_scope refusal lists, or []."""
    return list(err.missing_scopes) if isinstance(err, APIError) else []


def approval_required(err: BaseException) -> Optional["Approval"]:
    """The approval a user_approval_required refusal carries, or None when err is not one (the Go
    client's ApprovalRequired). It reads through an SDK's exception chained from connectd's
    (``raise … from err``: ``__cause__``)."""
    e: Optional[BaseException] = err
    for _ in range(16):
        if e is None:
            return None
        if isinstance(e, APIError):
            return e.approval if e.code == "user_approval_required" else None
        e = e.__cause__ or e.__context__
    return None


def approval_outcome(st: "ElicitationStatus") -> Optional[ConnectdError]:
    """What a final status of an approval means (the Go client's ApprovalOutcome): None when the user
    approved (completed: send exactly the same request again), :class:`ApprovalDeniedError` when
    they denied it, :class:`ApprovalNotGivenError` when the link was dismissed or expired, a
    :class:`ConnectdError` naming any other state."""
    if st.status == "completed":
        return None
    if st.status == "declined" and st.reason == "user_denied":
        return ApprovalDeniedError(st.id)
    if st.status in ("declined", "expired"):
        return ApprovalNotGivenError(st.id, st.status, st.reason)
    return ConnectdError(f"connectd client: approval {st.id} is {st.status} ({st.reason})")
