// @connectd/client: the client of connectd's /v1 API for MCP servers.
export { ConnectdClient, UserTokenHeader } from "./client.js";
export type { CallOptions, ConnectdClientOptions, UnlinkOptions, WaitOptions } from "./client.js";
export { AccountHeader, RequestIDHeader, ScopesHeader } from "./proxy.js";
export type { ProviderFetch, ProviderFetchOptions } from "./proxy.js";
export {
  ApprovalDeniedError,
  ApprovalNotGivenError,
  ConnectdError,
  ConnectdNetworkError,
  ErrorFamily,
  URLElicitationUnsupportedError,
  WaitTimeoutError,
  accountsOf,
  approvalOutcome,
  approvalRequired,
  connectdErrorOf,
  isAccountRequired,
  isApprovalRequired,
  isFamily,
  isInvalidClient,
  isRateLimited,
  isRequestStateError,
  isUnavailable,
  isUserTokenError,
  missingScopes,
  needsConnection,
} from "./errors.js";
export type { ConnectdErrorInit } from "./errors.js";
export {
  AccountChoice,
  AccountField,
  DeniedText,
  Generation,
  ProtocolVersion20251125,
  ProtocolVersion20260728,
  URLElicitationRequiredCode,
  answerFor,
  approvalFallbackResult,
  approvalInputKey,
  approvalKey,
  canOpenURL,
  chooseAccount,
  choiceKey,
  chosenAccount,
  connectKey,
  deniedResult,
  fallbackResult,
  generationOf,
  inputKey,
  keyAccount,
  keyApproval,
  toolResultText,
} from "./mcp.js";
export type { Answer, FormParams, Peer, TextContent, ToolResult } from "./mcp.js";
export { requestDigest } from "./digest.js";
export {
  AccountAll,
  AccountNew,
  KindApproval,
  KindConnect,
  ReasonClientDeclined,
  ReasonUserDenied,
  StatusCompleted,
  StatusDeclined,
  StatusExpired,
  StatusFailed,
  StatusPending,
  Token,
  accountTitle,
  isFinal,
} from "./types.js";
export type {
  Account,
  Approval,
  Connection,
  ElicitParams,
  Elicitation,
  ElicitationStatus,
  InputRequest,
  InputRequiredResult,
  MintRequest,
  RPCError,
  Reason,
  Status,
  URLElicitationData,
  Unlinked,
  UnlinkedConnection,
} from "./types.js";
export type { components as OpenAPIComponents, paths as OpenAPIPaths } from "./openapi.js";
export { WebhookSignatureError, WebhookToleranceSeconds, verifyWebhook } from "./webhook.js";
export type { WebhookEvent } from "./webhook.js";
