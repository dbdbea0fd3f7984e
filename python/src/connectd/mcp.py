"""MCP helpers: which shape a negotiated protocol version calls for, and connectd's elicitation
in that shape, as plain dicts ready to be serialised (the Go client's mcp.go).

- 2025-11-25: an ``elicitation/create`` request with URL-mode params (``mode: "url"``,
  ``elicitationId``), or the ``URLElicitationRequiredError`` JSON-RPC error (-32042) carrying
  them; then ``notifications/elicitation/complete``.
- 2026-07-28: an ``InputRequiredResult`` (``resultType: "input_required"``, ``inputRequests``,
  ``requestState``): no elicitationId, no ``content``.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from datetime import date, timezone
from typing import Any, Literal, Mapping, Optional, Sequence

from .errors import URLElicitationUnsupportedError, accounts_of
from .types import AccountNew, Account, Elicitation

__all__ = [
    "ProtocolVersion20251125",
    "ProtocolVersion20260728",
    "URLElicitationRequiredCode",
    "ResultTypeInputRequired",
    "Generation",
    "GenerationNone",
    "GenerationURLElicitation",
    "GenerationInputRequired",
    "generation_of",
    "Peer",
    "can_open_url",
    "Answer",
    "answer_for",
    "input_key",
    "connect_key",
    "key_account",
    "fallback_result",
    "tool_result_text",
    "elicitation_complete",
    "AccountField",
    "choice_key",
    "AccountChoice",
    "choose_account",
    "chosen_account",
]

ProtocolVersion20251125 = "2025-11-25"
"""Introduced URL-mode elicitation (elicitation/create mode "url", -32042, notifications/elicitation/complete)."""
ProtocolVersion20260728 = "2026-07-28"
"""Replaced server-to-client requests with InputRequiredResult and retries with requestState."""
URLElicitationRequiredCode = -32042
"""The JSON-RPC error code of URLElicitationRequiredError (2025-11-25)."""
ResultTypeInputRequired = "input_required"
"""InputRequiredResult's resultType."""

Generation = Literal["none", "url-elicitation", "input-required"]
"""How an MCP protocol version lets a server send the user to a URL."""
GenerationNone: Generation = "none"
"""Before 2025-11-25 there is no URL-mode elicitation."""
GenerationURLElicitation: Generation = "url-elicitation"
"""2025-11-25: elicitation/create or URLElicitationRequiredError, then notifications/elicitation/complete."""
GenerationInputRequired: Generation = "input-required"
"""2026-07-28 and later: InputRequiredResult."""

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def generation_of(protocol_version: str) -> Generation:
    """The generation of a negotiated protocol version. Versions are dates (YYYY-MM-DD), so they
    compare as strings."""
    if not _DATE.match(protocol_version or ""):
        return GenerationNone
    try:
        date.fromisoformat(protocol_version)
    except ValueError:
        return GenerationNone
    if protocol_version >= ProtocolVersion20260728:
        return GenerationInputRequired
    if protocol_version >= ProtocolVersion20251125:
        return GenerationURLElicitation
    return GenerationNone


@dataclass(frozen=True)
class Peer:
    """What the MCP client declared for the request being answered."""

    protocol_version: str
    """The negotiated MCP protocol version (2026-07-28 and later: the request's own)."""
    url_elicitation: bool = False
    """The client declared elicitation mode "url": capabilities.elicitation.url in initialize
    (2025-11-25), or in the request's _meta "io.modelcontextprotocol/clientCapabilities"
    (2026-07-28). An empty elicitation object declares form mode only."""
    form_elicitation: bool = False
    """The client declared form-mode elicitation (capabilities.elicitation.form, or an elicitation
    object with neither form nor url). It lets the server ask the user which account."""

    @classmethod
    def from_capabilities(cls, protocol_version: str, capabilities: Optional[Mapping[str, Any]]) -> "Peer":
        """The peer of a client whose capabilities (the JSON object of initialize's
        ``capabilities``, or of a 2026-07-28 request's _meta) are given."""
        el = (capabilities or {}).get("elicitation")
        if not isinstance(el, Mapping):
            return cls(protocol_version)
        url = el.get("url") is not None
        form = el.get("form") is not None or (not url and el.get("form") is None)
        return cls(protocol_version, url_elicitation=url, form_elicitation=form)


def can_open_url(peer: Peer) -> bool:
    """Whether connectd's link may be sent to the peer as a URL-mode elicitation: the spec forbids a
    mode the client did not declare."""
    return peer.url_elicitation and generation_of(peer.protocol_version) != GenerationNone


@dataclass
class Answer:
    """What an MCP server sends back for a request that needs the user to connect a provider, in
    the shape its protocol calls for. Exactly the fields of ``generation`` are set, or
    ``fallback`` alone, or ``ready`` alone."""

    generation: Generation
    elicitation: Elicitation
    """The minted elicitation (its id to wait on, its URL)."""
    ready: bool = False
    """The user finished connecting while require_connection waited on a retry: read the token again."""
    fallback: Optional[dict[str, Any]] = None
    """The client has no URL mode: answer the tools/call with this CallToolResult (the link, in plain words)."""
    elicit_request: Optional[dict[str, Any]] = None
    """2025-11-25: the params of an elicitation/create request (then wait, then notify completion)…"""
    error: Optional[dict[str, Any]] = None
    """…or the -32042 JSON-RPC error object to answer the request with."""
    result: Optional[dict[str, Any]] = None
    """2026-07-28: the InputRequiredResult to answer the request with."""
    input_key: str = ""
    """2026-07-28: the key of result's inputRequests entry; the retry's inputResponses carries it."""


def input_key(provider: str) -> str:
    """The default inputRequests key for a provider's connect request."""
    return f"connect-{provider}"


def connect_key(provider: str, account: str = "") -> str:
    """The inputRequests key require_connection gives a connect request for one of the user's
    accounts: input_key(provider) and, for a connection id, ":" and the id (key_account reads it)."""
    if not account or account == AccountNew:
        return input_key(provider)
    return f"{input_key(provider)}:{account}"


def key_account(provider: str, key: str) -> Optional[str]:
    """Reads a connect_key: None when key is no connect request for provider, else the connection
    id it was for ("" for none)."""
    if key == input_key(provider):
        return ""
    prefix = input_key(provider) + ":"
    if key.startswith(prefix) and len(key) > len(prefix):
        return key[len(prefix):]
    return None


def answer_for(e: Elicitation, protocol_version: str, key: str = "") -> Answer:
    """Shapes a minted elicitation as the answer for protocol_version. key names its
    inputRequests entry (2026-07-28; default input_key(provider)). Raises
    URLElicitationUnsupportedError before 2025-11-25."""
    gen = generation_of(protocol_version)
    if gen == GenerationURLElicitation:
        return Answer(gen, e, elicit_request=copy.deepcopy(e.params), error=copy.deepcopy(e.url_elicitation_required_error))
    if gen == GenerationInputRequired:
        k = key or input_key(e.provider)
        result = {
            "resultType": ResultTypeInputRequired,
            "inputRequests": {k: copy.deepcopy(e.input_request)},
            "requestState": e.request_state,
        }
        return Answer(gen, e, result=result, input_key=k)
    raise URLElicitationUnsupportedError(
        f"connectd: the MCP client cannot do URL-mode elicitation: protocol version {protocol_version!r}"
    )


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def fallback_result(e: Elicitation) -> dict[str, Any]:
    """The CallToolResult that hands the connect link to a user whose MCP client cannot open
    URL-mode elicitations: the message, the link as plain text, and what to do after. An error
    result, since the tool did not do its job yet. Byte for byte the Go client's FallbackResult."""
    msg = str(e.params.get("message") or "").strip() or f"This needs your {e.provider} account, which is not connected yet."
    expiry = ""
    if e.expires_at is not None:
        t = e.expires_at.astimezone(timezone.utc)
        expiry = f"{t.hour:02d}:{t.minute:02d} UTC on {t.day} {_MONTHS[t.month - 1]}"
    text = (
        f"{msg}\n\nThis app cannot open the connect link for you. Open it in your browser:\n{e.url}\n\n"
        f"Sign in, approve, then try again. The link works only for you, grants nothing by itself, and expires at {expiry}."
    )
    return {"content": [{"type": "text", "text": text}], "isError": True}


def approval_input_key(provider: str) -> str:
    """The prefix of a provider's approval inputRequests keys (approval_key)."""
    return f"approve-{provider}"


def approval_key(provider: str, elicitation_id: str) -> str:
    """The inputRequests key of an approval request (2026-07-28): approval_input_key(provider),
    ":" and the approval's elicitation id, which the MCP client echoes, so the retry knows which
    approval it answers (key_approval) and reads its status; the Go client's ApprovalKey."""
    return f"{approval_input_key(provider)}:{elicitation_id}"


def key_approval(provider: str, key: str) -> Optional[str]:
    """Reads an approval_key: None when key is no approval request for provider, else the
    approval's elicitation id."""
    prefix = approval_input_key(provider) + ":"
    if key.startswith(prefix) and len(key) > len(prefix):
        return key[len(prefix):]
    return None


DeniedText = "The user denied this request"
"""What the tool result of a denied request opens with (denied_result)."""


def denied_result(approval: Any = None) -> dict[str, Any]:
    """The CallToolResult for a request the user denied: it says so, what the request was (when
    approval, an :class:`Approval`, is given), that it was not made, and not to try it again unless
    the user asks. An error result; byte for byte the Go client's DeniedResult."""
    text = DeniedText + "."
    if approval is not None:
        what = f"{approval.method} {approval.path}".strip()
        if approval.message:
            what += f" ({approval.message})"
        text = f"{DeniedText}: {what}."
    text += " It was not made. Do not try it again unless the user asks for it."
    return {"content": [{"type": "text", "text": text}], "isError": True}


def tool_result_text(r: Mapping[str, Any]) -> str:
    """Joins a tool result's text content."""
    return "\n".join(str(c.get("text", "")) for c in r.get("content") or [])


def elicitation_complete(elicitation_id: str) -> dict[str, Any]:
    """notifications/elicitation/complete for an elicitation (2025-11-25), as a JSON-RPC notification."""
    return {"jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": {"elicitationId": elicitation_id}}


AccountField = "account"
"""The field of the account form, and the tool argument AccountChoice.fallback asks for: a connection id."""


def choice_key(provider: str) -> str:
    """The inputRequests key of the account form for provider."""
    return f"account-{provider}"


@dataclass
class AccountChoice:
    """An account_required refusal put to the user: which of their accounts at provider the
    request is for. Which accounts a user has is no secret from them, so the choice goes through
    the MCP client: a form-mode elicitation (form) or a tool result asking for the tool's account
    argument (fallback). The answer is a connection id: read with Client.account_token."""

    provider: str
    accounts: Sequence[Account] = field(default_factory=list)

    def _titles(self) -> list[str]:
        titles = [a.title() for a in self.accounts]
        return [
            f"{t} [{a.id}]" if titles.count(t) > 1 and t != a.id else t for t, a in zip(titles, self.accounts)
        ]

    def form(self, message: str = "") -> dict[str, Any]:
        """The params of the form-mode elicitation/create that asks the user: one required field,
        AccountField, a titled single-select enum of the accounts (value the id)."""
        one_of = [{"const": a.id, "title": t} for a, t in zip(self.accounts, self._titles())]
        return {
            "mode": "form",
            "message": message or f"You have several {self.provider} accounts this app may use. Which one should it use?",
            "requestedSchema": {
                "type": "object",
                "properties": {AccountField: {"type": "string", "title": f"{self.provider} account", "oneOf": one_of}},
                "required": [AccountField],
            },
        }

    def fallback(self, tool: str) -> dict[str, Any]:
        """The CallToolResult for a client without form-mode elicitation: the accounts with their
        ids, and to call tool again with AccountField set to one."""
        text = (
            f"You have several {self.provider} accounts this app may use, and it needs to know which one. "
            f"Ask which, then call {tool} again with {AccountField} set to its id:"
        )
        for a, t in zip(self.accounts, self._titles()):
            text += f"\n- {t}: {a.id}"
        return {"content": [{"type": "text", "text": text}], "isError": True}


def choose_account(err: BaseException, provider: str) -> Optional[AccountChoice]:
    """The choice an account_required refusal of provider asks for, or None."""
    accounts = accounts_of(err)
    return AccountChoice(provider, accounts) if accounts else None


def chosen_account(content: Optional[Mapping[str, Any]]) -> Optional[str]:
    """The connection id an accepted account form answered (the elicitation result's content)."""
    v = (content or {}).get(AccountField)
    return v if isinstance(v, str) and v else None
