"""The error families: every code connectd documents maps to one (client/errors.go, codes_test.go)."""

import os
import pickle
import re
import unittest

import connectd
from connectd import errors
from connectd.errors import api_error

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def spec_codes() -> list[str]:
    """The Error schema's enum in docs/openapi.yaml (components.schemas.Error.properties.error.enum),
    read with a small indentation walk: the standard library has no YAML parser."""
    with open(os.path.join(ROOT, "docs", "openapi.yaml"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    path = ["components", "schemas", "Error", "properties", "error", "enum"]
    depth, indent, i = 0, -1, 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip(" ")
        ind = len(line) - len(stripped)
        if stripped and not stripped.startswith("#") and ind <= indent:
            raise AssertionError(f"docs/openapi.yaml: {'.'.join(path[:depth])} has no {path[depth]}")
        if stripped.startswith(path[depth] + ":") and ind > indent:
            depth, indent = depth + 1, ind
            if depth == len(path):
                rest = stripped[len("enum:"):].strip()
                if rest.startswith("["):
                    while "]" not in rest:
                        i += 1
                        rest += " " + lines[i].strip()
                    return [c.strip() for c in rest[1: rest.index("]")].split(",") if c.strip()]
                out = []
                for nxt in lines[i + 1:]:
                    m = re.match(r"^\s*-\s*(\S+)\s*$", nxt)
                    if not m:
                        break
                    out.append(m.group(1))
                return out
        i += 1
    raise AssertionError("docs/openapi.yaml: no Error enum")


FAMILIES = (
    connectd.NotConnectedError, connectd.ConsentRequiredError, connectd.InsufficientScopeError,
    connectd.ReauthorizationRequiredError, connectd.NotFoundError, connectd.InvalidClientError,
    connectd.UserTokenError, connectd.UnknownProviderError, connectd.ProviderNotAllowedError,
    connectd.InvalidRequestError, connectd.RequestStateError, connectd.RateLimitedError,
    connectd.UnavailableError, connectd.AccountRequiredError, connectd.ApprovalRequiredError,
)


class CodesMatchTheSpec(unittest.TestCase):
    def test_every_spec_code_has_a_family(self) -> None:
        spec = spec_codes()
        self.assertGreaterEqual(len(spec), 20)
        for code in spec:
            # A 400 status matches no family by itself: only the code can.
            e = api_error(400, ('{"error":"%s"}' % code).encode(), None)
            mapped = isinstance(e, FAMILIES)
            generic = code in connectd.GENERIC_CODES
            self.assertNotEqual(mapped, generic, f"code {code}: mapped {mapped}, generic {generic}")
            self.assertEqual(e.code, code)

    def test_the_client_knows_no_code_the_spec_does_not_list(self) -> None:
        spec = set(spec_codes())
        for code in connectd.KNOWN_CODES:
            self.assertIn(code, spec)
        for code in connectd.GENERIC_CODES:
            self.assertIn(code, spec)


# (status, code, body, retry-after, classes wanted, classes not wanted, needs_connection, missing scopes, retry)
CASES = [
    (404, "not_connected", None, None, [connectd.NotConnectedError], [], True, [], None),
    (403, "consent_required", None, None, [connectd.ConsentRequiredError], [], True, [], None),
    (403, "insufficient_scope", '{"error":"insufficient_scope","error_description":"lacks scopes","missing_scopes":["write","admin"]}',
     None, [connectd.InsufficientScopeError], [], True, ["write", "admin"], None),
    (409, "reauthorization_required", None, None, [connectd.ReauthorizationRequiredError], [], True, [], None),
    (409, "account_required", None, None, [connectd.AccountRequiredError],
     [connectd.ReauthorizationRequiredError, connectd.NotConnectedError], False, [], None),
    (404, "not_found", None, None, [connectd.NotFoundError], [connectd.NotConnectedError], False, [], None),
    (401, "invalid_client", None, None, [connectd.InvalidClientError], [connectd.UserTokenError], False, [], None),
    (401, "wrong_audience", None, None, [connectd.UserTokenError], [], False, [], None),
    (401, "token_expired", None, None, [connectd.UserTokenError], [], False, [], None),
    (401, "missing_user_token", None, None, [connectd.UserTokenError], [], False, [], None),
    (400, "unknown_provider", None, None, [connectd.UnknownProviderError], [], False, [], None),
    (403, "provider_not_allowed", None, None, [connectd.ProviderNotAllowedError], [], False, [], None),
    (400, "invalid_scope", None, None, [connectd.InvalidRequestError], [], False, [], None),
    (400, "request_state_invalid", None, None, [connectd.RequestStateError, connectd.RequestStateInvalidError], [], False, [], None),
    (400, "request_state_expired", None, None, [connectd.RequestStateError, connectd.RequestStateExpiredError], [], False, [], None),
    (409, "request_state_replayed", None, None, [connectd.RequestStateError, connectd.RequestStateReplayedError],
     [connectd.ReauthorizationRequiredError], False, [], None),
    (403, "request_state_wrong_user", None, None, [connectd.RequestStateError, connectd.RequestStateWrongUserError], [], False, [], None),
    (403, "request_state_wrong_client", None, None, [connectd.RequestStateError, connectd.RequestStateWrongClientError], [], False, [], None),
    (400, "request_digest_mismatch", None, None, [connectd.RequestStateError, connectd.RequestDigestMismatchError], [], False, [], None),
    (429, "rate_limited", None, "7", [connectd.RateLimitedError], [], False, [], 7.0),
    (503, "provider_unavailable", None, "5", [connectd.UnavailableError], [], False, [], 5.0),
    (503, "jwks_unavailable", None, None, [connectd.UnavailableError], [], False, [], None),
    (503, "database_unavailable", None, None, [connectd.UnavailableError], [], False, [], None),
    (401, "provider_unauthorized", None, None, [connectd.ReauthorizationRequiredError], [], True, [], None),
    (429, "provider_rate_limited", None, "3", [connectd.RateLimitedError], [], False, [], 3.0),
    (403, "token_release_disabled", None, None, [connectd.ProviderNotAllowedError], [], False, [], None),
    (502, "", "<html>bad gateway</html>", None, [connectd.UnavailableError], [connectd.UserTokenError], False, [], None),
    (429, "", "slow down", None, [connectd.RateLimitedError], [], False, [], None),
    (401, "some_future_token_code", None, None, [connectd.UserTokenError], [], False, [], None),
    (418, "teapot", None, None, [], [connectd.NotConnectedError, connectd.UnavailableError, connectd.UserTokenError], False, [], None),
]


class ErrorFamilies(unittest.TestCase):
    def test_cases(self) -> None:
        for status, code, body, ra, want, not_want, needs, missing, retry in CASES:
            with self.subTest(code=code or status):
                raw = body if body is not None else '{"error":"%s","error_description":"described","request_id":"rid-1"}' % code
                e = api_error(status, raw.encode(), ra)
                self.assertIsInstance(e, connectd.APIError)
                self.assertIsInstance(e, connectd.ConnectdError)
                self.assertEqual((e.status, e.code), (status, code))
                for cls in want:
                    self.assertIsInstance(e, cls)
                for cls in not_want:
                    self.assertNotIsInstance(e, cls)
                self.assertEqual(connectd.needs_connection(e), needs)
                self.assertEqual(connectd.missing_scopes(e), missing)
                self.assertEqual(e.retry_after, retry)
                if body is None:
                    self.assertEqual((e.description, e.request_id), ("described", "rid-1"))
                elif not code:
                    self.assertTrue(e.description.startswith("unexpected answer"), e.description)

    def test_details(self) -> None:
        e = api_error(409, b'{"error":"account_required","error_description":"which one","accounts":['
                           b'{"id":"cn_aaaaaaaaaaaaaaaaaaaaaaaaaa","display_name":"octocat","label":"work"},'
                           b'{"id":"cn_bbbbbbbbbbbbbbbbbbbbbbbbbb","display_name":"octo-home"}]}', None)
        self.assertIsInstance(e, connectd.AccountRequiredError)
        self.assertEqual([a.id for a in connectd.accounts_of(e)], ["cn_aaaaaaaaaaaaaaaaaaaaaaaaaa", "cn_bbbbbbbbbbbbbbbbbbbbbbbbbb"])
        self.assertEqual(e.accounts[0].title(), "work (octocat)")
        c = api_error(403, b'{"error":"consent_required","unapproved_scopes":["admin"],"account_changed":true}', None)
        self.assertEqual((c.unapproved_scopes, c.account_changed), (["admin"], True))
        r = api_error(409, b'{"error":"reauthorization_required","account":{"id":"cn_x"}}', None)
        self.assertEqual(r.account, "cn_x")
        self.assertEqual(connectd.accounts_of(r), [])
        d = api_error(503, b'{"error":"provider_unavailable"}', "Wed, 21 Oct 2015 07:28:00 GMT")
        self.assertEqual(d.retry_after, 0.0)

    def test_message_and_repr_and_pickle(self) -> None:
        e = api_error(403, b'{"error":"insufficient_scope","error_description":"lacks","missing_scopes":["a","b"]}', None)
        self.assertEqual(str(e), "connectd: 403 insufficient_scope: lacks (missing scopes: a b)")
        self.assertIn("InsufficientScopeError", repr(e))
        back = pickle.loads(pickle.dumps(e))
        self.assertIsInstance(back, connectd.InsufficientScopeError)
        self.assertEqual((back.code, back.missing_scopes, str(back)), (e.code, e.missing_scopes, str(e)))

    def test_error_class(self) -> None:
        self.assertIs(errors.error_class(400, "request_state_invalid"), connectd.RequestStateInvalidError)
        self.assertIs(errors.error_class(500, "internal_error"), connectd.APIError)


if __name__ == "__main__":
    unittest.main()
