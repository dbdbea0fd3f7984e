"""connectd: the Python client of connectd's /v1 API, for MCP servers that need their users'
third-party credentials (GitHub, Google, Slack, …) without running an OAuth flow, storing a
refresh token or showing an API-key form themselves. The twin of the Go package
``github.com/connectd/connectd/client`` and the TypeScript ``@connectd/client``: the same calls,
the same error families, the same MCP answers (as plain dicts). Standard library only.

    from connectd import Client, MintRequest, Peer, needs_connection

    cd = Client("https://connect.example.com", os.environ["CONNECTD_CLIENT_KEY"])
    try:
        tok = cd.token(user_token, "github", "repo")
    except Exception as err:
        if not needs_connection(err):
            raise
        ans = cd.require_connection(user_token, Peer("2025-11-25", url_elicitation=True),
                                    MintRequest("github", ["repo"], "Connect GitHub to list your repositories."))
"""

from .client import Client, UserTokenHeader
from .digest import request_digest
from .errors import (
    GENERIC_CODES,
    KNOWN_CODES,
    AccountRequiredError,
    APIError,
    ApprovalDeniedError,
    ApprovalNotGivenError,
    ApprovalRequiredError,
    ConnectdError,
    ConnectdNetworkError,
    ConsentRequiredError,
    InsufficientScopeError,
    InvalidClientError,
    InvalidRequestError,
    NotConnectedError,
    NotFoundError,
    ProviderNotAllowedError,
    RateLimitedError,
    ReauthorizationRequiredError,
    RequestDigestMismatchError,
    RequestStateError,
    RequestStateExpiredError,
    RequestStateInvalidError,
    RequestStateReplayedError,
    RequestStateWrongClientError,
    RequestStateWrongUserError,
    UnavailableError,
    UnknownProviderError,
    URLElicitationUnsupportedError,
    UserTokenError,
    WaitTimeoutError,
    WebhookSignatureError,
    accounts_of,
    approval_outcome,
    approval_required,
    error_class,
    missing_scopes,
    needs_connection,
)
from .mcp import (
    AccountChoice,
    AccountField,
    Answer,
    DeniedText,
    Generation,
    GenerationInputRequired,
    GenerationNone,
    GenerationURLElicitation,
    Peer,
    ProtocolVersion20251125,
    ProtocolVersion20260728,
    ResultTypeInputRequired,
    URLElicitationRequiredCode,
    answer_for,
    approval_input_key,
    approval_key,
    can_open_url,
    choice_key,
    choose_account,
    chosen_account,
    connect_key,
    denied_result,
    elicitation_complete,
    fallback_result,
    generation_of,
    input_key,
    key_account,
    key_approval,
    tool_result_text,
)
from .proxy import AccountHeader, ProviderProxy, ProxyResponse, RequestIDHeader
from .types import (
    Account,
    AccountAll,
    AccountNew,
    Approval,
    Connection,
    Elicitation,
    ElicitationStatus,
    KIND_APPROVAL,
    KIND_CONNECT,
    MintRequest,
    REASON_CLIENT_DECLINED,
    REASON_USER_DENIED,
    Status,
    StatusCompleted,
    StatusDeclined,
    StatusExpired,
    StatusFailed,
    StatusPending,
    Token,
    Unlinked,
    UnlinkedConnection,
    is_final,
)
from .webhook import WebhookEvent, WebhookTolerance, verify_webhook

__version__ = "0.1.0"

__all__ = [
    "Client", "UserTokenHeader", "request_digest",
    "ConnectdError", "APIError", "NotConnectedError", "ConsentRequiredError", "InsufficientScopeError",
    "ReauthorizationRequiredError", "AccountRequiredError", "NotFoundError", "InvalidClientError", "UserTokenError",
    "UnknownProviderError", "ProviderNotAllowedError", "InvalidRequestError", "RequestStateError",
    "RequestStateInvalidError", "RequestStateExpiredError", "RequestStateReplayedError", "RequestStateWrongUserError",
    "RequestStateWrongClientError", "RequestDigestMismatchError", "RateLimitedError", "UnavailableError",
    "ConnectdNetworkError", "URLElicitationUnsupportedError", "WaitTimeoutError", "WebhookSignatureError",
    "KNOWN_CODES", "GENERIC_CODES", "error_class", "needs_connection", "accounts_of", "missing_scopes",
    "AccountChoice", "AccountField", "Answer", "Generation", "GenerationInputRequired", "GenerationNone",
    "GenerationURLElicitation", "Peer", "ProtocolVersion20251125", "ProtocolVersion20260728",
    "ResultTypeInputRequired", "URLElicitationRequiredCode", "answer_for", "can_open_url", "choice_key",
    "choose_account", "chosen_account", "connect_key", "elicitation_complete", "fallback_result", "generation_of",
    "input_key", "key_account", "tool_result_text",
    "AccountHeader", "ProviderProxy", "ProxyResponse", "RequestIDHeader",
    "Account", "AccountAll", "AccountNew", "Connection", "Elicitation", "ElicitationStatus", "MintRequest", "Status",
    "StatusCompleted", "StatusDeclined", "StatusExpired", "StatusFailed", "StatusPending", "Token", "Unlinked",
    "UnlinkedConnection", "is_final",
    "WebhookEvent", "WebhookTolerance", "verify_webhook",
    "ApprovalRequiredError", "ApprovalDeniedError", "ApprovalNotGivenError", "approval_required", "approval_outcome",
    "Approval", "KIND_APPROVAL", "KIND_CONNECT", "REASON_USER_DENIED", "REASON_CLIENT_DECLINED",
    "DeniedText", "denied_result", "approval_input_key", "approval_key", "key_approval",
]
