"""The client's data types: connectd's JSON answers as dataclasses."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Mapping, Optional

__all__ = [
    "AccountNew",
    "AccountAll",
    "Status",
    "StatusPending",
    "StatusCompleted",
    "StatusDeclined",
    "StatusExpired",
    "StatusFailed",
    "is_final",
    "MintRequest",
    "Account",
    "ElicitationStatus",
    "Elicitation",
    "Connection",
    "Token",
    "Unlinked",
    "UnlinkedConnection",
]

AccountNew = "new"
"""As MintRequest.account: connect another account at the provider."""
AccountAll = "all"
"""As unlink's account: every connection at the provider this client is approved for."""

Status = Literal["pending", "completed", "declined", "expired", "failed"]
"""The state of an elicitation."""
StatusPending: Status = "pending"
StatusCompleted: Status = "completed"
StatusDeclined: Status = "declined"
StatusExpired: Status = "expired"
StatusFailed: Status = "failed"


def is_final(status: str) -> bool:
    """Whether an elicitation in status will not change any more."""
    return status != StatusPending


_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|z|[+-]\d{2}:\d{2})$")


def parse_time(s: Optional[str]) -> Optional[datetime]:
    """An RFC 3339 time as connectd writes it (Go's, up to nanoseconds, Z) as an aware datetime."""
    if not s:
        return None
    m = _TIME.match(s)
    if not m:
        raise ValueError(f"not an RFC 3339 time: {s!r}")
    date, clock, frac, zone = m.groups()
    frac = ((frac or "") + "000000")[:6]
    zone = "+00:00" if zone in ("Z", "z") else zone
    return datetime.fromisoformat(f"{date}T{clock}.{frac}{zone}")


def _strs(v: Any) -> list[str]:
    return [str(x) for x in v] if isinstance(v, list) else []


@dataclass
class MintRequest:
    """The body of POST /v1/elicitations."""

    provider: str
    """The provider id in connectd's catalog, e.g. "github"."""
    scopes: list[str] = field(default_factory=list)
    """Scopes to ask for; empty means the provider's default scopes."""
    message: str = ""
    """Shown to the user by the MCP client (at most 500 characters); empty lets connectd write one."""
    request_digest: str = ""
    """Binds the request_state to the original MCP request (see request_digest())."""
    account: str = ""
    """A connection id (reauthorize or step up that one), AccountNew (connect another), or empty
    (whichever account the user signs in with). A flow for a connection id ends on that connection
    or not at all: a user who signs in at the provider as another account (one it names) gets
    connectd's page saying so (account_mismatch), nothing is stored or approved, and the
    elicitation stays pending, so the user may try again from the same link (wait keeps waiting;
    no other connection appears)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"provider": self.provider}
        if self.scopes:
            out["scopes"] = list(self.scopes)
        if self.message:
            out["message"] = self.message
        if self.request_digest:
            out["request_digest"] = self.request_digest
        if self.account:
            out["account"] = self.account
        return out


@dataclass(frozen=True)
class Account:
    """One of the user's accounts (connections) at a provider, as connectd names it to a client:
    addressed by connection id, never by the provider's own account id (which display_name is only
    when the provider gives the account no other name)."""

    id: str
    """The connection id, cn_ and 26 characters of [a-z2-7]: stable, not a secret."""
    display_name: str = ""
    """connectd's one name for the account, the same in every answer: the provider's label for it
    (login, email, workspace), else the provider's own id for it (a provider that names accounts
    only by an id, an ID token's sub). "" only for an account the provider does not name — an API
    key, a sign-in the provider said nothing about, which label or id tells apart — and for a
    listed connection now to another provider account than this client is approved for
    (Connection.consent_required): not this client's to know."""
    label: str = ""
    """The user's own name for it ("work"), set on connectd's account page; often empty."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Account":
        return cls(id=str(d.get("id") or ""), display_name=str(d.get("display_name") or ""), label=str(d.get("label") or ""))

    def title(self) -> str:
        """How the account is shown to its user: "work (octocat)", either alone, or the id."""
        if self.label and self.display_name and self.label != self.display_name:
            return f"{self.label} ({self.display_name})"
        return self.label or self.display_name or self.id


@dataclass
class ElicitationStatus:
    """connectd's status document of an elicitation."""

    id: str
    status: str
    """pending, completed, declined, expired or failed."""
    provider: str
    scopes: list[str]
    expires_at: Optional[datetime]
    reason: str = ""
    """Why it failed or was declined (user_denied, provider_access_denied, client_declined, …)."""
    completed_at: Optional[datetime] = None
    request_state: str = ""
    """Set by mint, and by resolve while still pending: a fresh single-use state for the MCP client."""
    kind: str = ""
    """What the user is asked: ``connect`` (connect, or consent) or ``approval`` (approve one proxied
    call); an older connectd sends none (a connect link)."""

    @property
    def final(self) -> bool:
        """Whether the elicitation will not change any more."""
        return is_final(self.status)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ElicitationStatus":
        return cls(**_status_fields(d))


def _status_fields(d: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": str(d.get("elicitation_id") or ""),
        "status": str(d.get("status") or ""),
        "provider": str(d.get("provider") or ""),
        "scopes": _strs(d.get("scopes")),
        "expires_at": parse_time(d.get("expires_at")),
        "reason": str(d.get("reason") or ""),
        "completed_at": parse_time(d.get("completed_at")),
        "request_state": str(d.get("request_state") or ""),
        "kind": str(d.get("kind") or ""),
    }


def _elicit_params(p: Mapping[str, Any], with_id: bool) -> dict[str, Any]:
    """URL-mode elicitation/create params in the Go client's field order (mode, elicitationId, url, message)."""
    out: dict[str, Any] = {"mode": "url"}
    if with_id and p.get("elicitationId"):
        out["elicitationId"] = str(p["elicitationId"])
    out["url"] = str(p.get("url") or "")
    out["message"] = str(p.get("message") or "")
    return out


@dataclass
class Elicitation(ElicitationStatus):
    """A freshly minted elicitation: the connect URL and the MCP shapes (plain dicts) that carry it."""

    url: str = ""
    """The connect URL: https://<connectd>/c/<opaque id>. It carries nothing about the user and authenticates nothing."""
    params: dict[str, Any] = field(default_factory=dict)
    """The params of a 2025-11-25 elicitation/create request (mode "url", with elicitationId)."""
    url_elicitation_required_error: dict[str, Any] = field(default_factory=dict)
    """The 2025-11-25 JSON-RPC error object (-32042)."""
    input_request: dict[str, Any] = field(default_factory=dict)
    """The 2026-07-28 entry of InputRequiredResult.inputRequests (no elicitationId)."""
    again: bool = False
    """connectd answered with an elicitation already pending for the same request (a retry): the same link."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any], again: bool = False) -> "Elicitation":
        rpc = d.get("url_elicitation_required_error") or {}
        data = rpc.get("data") or {}
        ir = d.get("input_request") or {}
        return cls(
            **_status_fields(d),
            url=str(d.get("url") or ""),
            params=_elicit_params(d.get("elicitation") or {}, True),
            url_elicitation_required_error={
                "code": int(rpc.get("code", -32042)),
                "message": str(rpc.get("message") or ""),
                "data": {"elicitations": [_elicit_params(p, True) for p in data.get("elicitations") or []]},
            },
            input_request={"method": "elicitation/create", "params": _elicit_params(ir.get("params") or {}, False)},
            again=again,
        )


@dataclass
class Approval(Elicitation):
    """The approval elicitation of a user_approval_required refusal of a proxied call
    (:func:`connectd.approval_required`): the document a mint answers (kind ``approval``; ``url`` is
    connectd's approval page, and :func:`connectd.answer_for` shapes it as a connect link), and the
    request the user is asked to approve."""

    method: str = ""
    """The request's method, as connectd received it."""
    path: str = ""
    """The request's path below the provider's API base, with its query."""
    rule: str = ""
    """The request rule that asks (METHOD PATTERN)."""
    message: str = ""
    """The operator's words for the rule, shown to the user."""
    account: str = ""
    """The connection id the refused proxied call named (ProviderProxy's account), "" for none."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any], again: bool = False) -> "Approval":
        e = Elicitation.from_json(d, again)
        return cls(
            **{f: getattr(e, f) for f in e.__dataclass_fields__},
            method=str(d.get("method") or ""),
            path=str(d.get("path") or ""),
            rule=str(d.get("rule") or ""),
            message=str(d.get("message") or ""),
        )


KIND_CONNECT = "connect"
"""ElicitationStatus.kind of a connect link."""
KIND_APPROVAL = "approval"
"""ElicitationStatus.kind of an approval of one proxied call."""
REASON_USER_DENIED = "user_denied"
"""The reason of an approval the user denied on connectd's page: do not retry the request."""
REASON_CLIENT_DECLINED = "client_declined"
"""The reason of a link the MCP client's user declined or dismissed (cancel)."""


@dataclass
class Connection:
    """One of the user's connections this client may use. It never carries a credential."""

    provider: str
    id: str
    display_name: str
    """As Account.display_name."""
    status: str
    """active or reauthorization_required."""
    scopes: list[str] = field(default_factory=list)
    label: str = ""
    account_label: str = ""
    created_at: Optional[datetime] = None
    updated_at: Optional[datetime] = None
    expires_at: Optional[datetime] = None
    consent_required: bool = False
    """The connection grants more than this client is approved for — scopes it gained since, or
    another provider account connected since (then display_name and label are "") — so its token
    answers consent_required."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Connection":
        return cls(
            provider=str(d.get("provider") or ""),
            id=str(d.get("id") or ""),
            display_name=str(d.get("display_name") or ""),
            status=str(d.get("status") or "active"),
            scopes=_strs(d.get("scopes")),
            label=str(d.get("label") or ""),
            account_label=str(d.get("account_label") or ""),
            created_at=parse_time(d.get("created_at")),
            updated_at=parse_time(d.get("updated_at")),
            expires_at=parse_time(d.get("expires_at")),
            consent_required=d.get("consent_required") is True,
        )

    @property
    def account(self) -> Account:
        """The connection as an Account (its id, display name and label)."""
        return Account(self.id, self.display_name, self.label)


@dataclass(repr=False, eq=False)
class Token:
    """A currently valid credential for a provider. Keep it in memory for the call that needs it;
    connectd refreshes it when it is about to expire, so ask again rather than caching it.
    Its repr and str never show the secret."""

    provider: str
    account: Account
    """The connection the token is of (its id and display name)."""
    kind: str
    """oauth2 or api_key."""
    access_token: str
    token_type: str = ""
    expires_at: Optional[datetime] = None
    scopes: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Token":
        return cls(
            provider=str(d.get("provider") or ""),
            account=Account.from_json(d.get("account") or {}),
            kind=str(d.get("kind") or ""),
            access_token=str(d.get("access_token") or ""),
            token_type=str(d.get("token_type") or ""),
            expires_at=parse_time(d.get("expires_at")),
            scopes=_strs(d.get("scopes")),
        )

    def __repr__(self) -> str:
        return (
            f"Token(provider={self.provider!r}, account={self.account.id!r}, kind={self.kind!r}, "
            f"scopes={self.scopes!r}, access_token=[redacted])"
        )

    __str__ = __repr__


@dataclass
class UnlinkedConnection:
    """One connection an unlink ended."""

    id: str
    revoked_at_provider: bool
    revocation: str


@dataclass
class Unlinked:
    """The answer of unlink."""

    provider: str
    revoked_at_provider: bool
    """Whether the provider confirmed revocation (RFC 7009); with several unlinked, the first one's."""
    revocation: str = ""
    """revoked, skipped, not_supported or failed."""
    connections: list[UnlinkedConnection] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Unlinked":
        return cls(
            provider=str(d.get("provider") or ""),
            revoked_at_provider=d.get("revoked_at_provider") is True,
            revocation=str(d.get("revocation") or ""),
            connections=[
                UnlinkedConnection(str(c.get("id") or ""), c.get("revoked_at_provider") is True, str(c.get("revocation") or ""))
                for c in d.get("connections") or []
            ],
        )

