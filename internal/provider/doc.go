// Package provider owns connectd's catalog of third-party services: the
// providers file (strictly parsed, client secrets given only by reference),
// the built-in templates that encode each well-known provider's endpoints and
// quirks, discovery for generic providers (egress.Discover, plus the
// endpoints a provider needs), and the
// two provider kinds behind small capability interfaces: OAuth (authorize URL,
// code exchange, refresh, revocation, RFC 9207 issuer check) and APIKey
// (optional verification request). For connectd's proxy it says where each
// provider's API lives (Info.APIBaseURL: a template property or the
// providers file's api_base_url, per-customer hosts only through the host
// rules) and how a credential is attached to its requests (Info.APIAuth);
// it never sends those requests itself.
//
// Every failure of a provider call is an *Error classified by a sentinel
// (ErrInvalidGrant, ErrUnavailable, ErrRejected, …) so that callers decide
// without parsing text.
//
// It must never:
//   - put a token, code, verifier, API key or client secret into an error, a
//     log line or a fmt verb (Token and Secret redact themselves; provider
//     response bodies are never quoted);
//   - follow redirects blindly, read an unbounded response or wait without a
//     timeout on an outbound call: every call goes through a client bounded
//     by egress.Bound, which owns those rules;
//   - accept a URL that is not http(s) (https outside dev mode): the rule is
//     egress.CheckURL;
//   - import another leaf package (vault, session, mcpauth) or store anything:
//     it has no database.
package provider
