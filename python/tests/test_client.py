"""The client against a stand-in connectd on 127.0.0.1 (http.server): what goes on the wire,
what comes back. The same calls against a real connectd are in test_integration."""

import http.server
import json
import threading
import time
import unittest
from typing import Any, Callable, Optional

import connectd
from connectd import Client, MintRequest, Peer

KEY = "cks_test-key-0123456789"
TOKEN = "eyJ.user-token.sig"

Handler = Callable[["Fake.Req"], tuple[int, dict[str, str], Any]]


class Fake:
    """A stand-in connectd: it records each request and answers from a per-route function."""

    class Req:
        def __init__(self, h: http.server.BaseHTTPRequestHandler, body: bytes) -> None:
            self.method, self.target, self.headers, self.body = h.command, h.path, h.headers, body
            self.path, _, self.query = h.path.partition("?")

    def __init__(self, idle_timeout: Optional[float] = None) -> None:
        self.routes: dict[str, Handler] = {}
        self.seen: list[Fake.Req] = []
        fake = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = idle_timeout  # the server closes a connection idle this long

            def log_message(self, *a: Any) -> None:
                pass

            def handle_one(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                if self.headers.get("Transfer-Encoding") == "chunked":
                    body = b""
                    while True:
                        size = int(self.rfile.readline().strip(), 16)
                        chunk = self.rfile.read(size + 2)[:size]
                        if not size:
                            break
                        body += chunk
                r = Fake.Req(self, body)
                fake.seen.append(r)
                h = fake.routes.get(f"{self.command} {r.path}")
                if h is None:
                    status, headers, out = 404, {}, {"error": "not_found", "error_description": "no such API endpoint"}
                else:
                    status, headers, out = h(r)
                if callable(out):  # a streamed answer: chunks written as they come
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for chunk in out():
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    return
                raw = out if isinstance(out, bytes) else json.dumps(out).encode()
                self.send_response(status)
                headers.setdefault("Content-Type", "application/json")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = do_DELETE = do_PUT = do_HEAD = do_PATCH = do_PROPFIND = do_TRACE = handle_one

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def answer(self, route: str, status: int, body: Any, headers: Optional[dict[str, str]] = None) -> None:
        self.routes[route] = lambda r: (status, dict(headers or {}), body)

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


def minted(base: str) -> dict:
    u = base + "/c/EID"
    el = {"mode": "url", "elicitationId": "EID", "url": u, "message": "Connect it."}
    return {"elicitation_id": "EID", "status": "pending", "provider": "github", "scopes": ["repo"],
            "expires_at": "2026-11-30T12:10:00Z", "url": u, "request_state": "rs1.STATE", "elicitation": el,
            "url_elicitation_required_error": {"code": -32042, "message": "m", "data": {"elicitations": [el]}},
            "input_request": {"method": "elicitation/create", "params": {"mode": "url", "message": "Connect it.", "url": u}}}


def status(st: str, **kw: Any) -> dict:
    return {"elicitation_id": "EID", "status": st, "provider": "github", "scopes": ["repo"],
            "expires_at": "2026-11-30T12:10:00Z", **kw}


TOKEN_ANSWER = {"provider": "github", "account": {"id": "cn_aaaaaaaaaaaaaaaaaaaaaaaaaa", "display_name": "octocat"},
                "kind": "oauth2", "token_type": "Bearer", "access_token": "gho_SECRET", "scopes": ["repo"],
                "expires_at": "2026-11-30T13:00:00.123456789Z"}


class ClientTest(unittest.TestCase):
    def setUp(self) -> None:
        self.fake = Fake()
        self.addCleanup(self.fake.close)
        self.c = Client(self.fake.url + "/prefix/", KEY, retry_wait=0.3)
        self.addCleanup(self.c.close)

    def test_base_url_and_key(self) -> None:
        for bad in ("ftp://x.example", "https://u:p@x.example", "https://x.example/?q", "https://x.example/#f", "x.example",
                    "http://x.example"):
            with self.assertRaises(ValueError, msg=bad):
                Client(bad, KEY)
        Client("http://x.example", KEY, allow_http=True)
        Client("http://localhost:8080", KEY)
        Client("http://[::1]:8080", KEY)
        for bad_key in ("", "cks_ with space", "cks_\n"):
            with self.assertRaises(ValueError):
                Client("https://x.example", bad_key)
        self.assertNotIn(KEY, repr(self.c))
        self.assertEqual(self.c.base_url, self.fake.url + "/prefix")

    def test_token_on_the_wire(self) -> None:
        self.fake.answer("GET /prefix/v1/connections/github/token", 200, TOKEN_ANSWER)
        tok = self.c.token(TOKEN, "github", "repo", "read:org")
        r = self.fake.seen[-1]
        self.assertEqual(r.headers["Authorization"], "Bearer " + KEY)
        self.assertEqual(r.headers["X-User-Token"], TOKEN)
        self.assertEqual(r.headers["Accept"], "application/json")
        self.assertEqual(r.headers["User-Agent"], "connectd-client-python")
        self.assertEqual(r.query, "scopes=repo%2Cread%3Aorg")
        self.assertEqual((tok.access_token, tok.account.id, tok.kind), ("gho_SECRET", "cn_aaaaaaaaaaaaaaaaaaaaaaaaaa", "oauth2"))
        self.assertEqual(tok.expires_at.microsecond, 123456)
        for s in (repr(tok), str(tok), f"{tok}", repr([tok])):
            self.assertNotIn("gho_SECRET", s)
        self.c.account_token(TOKEN, "github", "cn_x")
        self.assertEqual(self.fake.seen[-1].query, "account=cn_x")
        # The connection was kept alive and reused.
        self.c.account_token(TOKEN, "github", "cn_x")

    def test_no_user_token_no_call(self) -> None:
        with self.assertRaises(connectd.UserTokenError) as cm:
            self.c.token("", "github")
        self.assertEqual((cm.exception.status, cm.exception.code), (0, "missing_user_token"))
        self.assertEqual(self.fake.seen, [])

    def test_refusals_carry_no_secret(self) -> None:
        self.fake.answer("GET /prefix/v1/connections/github/token", 403,
                         {"error": "insufficient_scope", "error_description": "lacks", "missing_scopes": ["admin"], "request_id": "r1"})
        with self.assertRaises(connectd.InsufficientScopeError) as cm:
            self.c.token(TOKEN, "github", "admin")
        e = cm.exception
        self.assertTrue(connectd.needs_connection(e))
        self.assertEqual((e.missing_scopes, e.request_id), (["admin"], "r1"))
        for s in (str(e), repr(e)):
            self.assertNotIn(KEY, s)
            self.assertNotIn(TOKEN, s)

    def test_redirects_are_not_followed(self) -> None:
        self.fake.answer("GET /prefix/v1/connections", 302, b"", {"Location": "https://elsewhere.example/steal"})
        with self.assertRaises(connectd.APIError) as cm:
            self.c.connections(TOKEN)
        self.assertEqual(cm.exception.status, 302)
        self.assertEqual(len(self.fake.seen), 1)

    def test_unreachable(self) -> None:
        c = Client("http://127.0.0.1:9", KEY)
        with self.assertRaises(connectd.ConnectdNetworkError) as cm:
            c.connections(TOKEN)
        self.assertNotIn(TOKEN, str(cm.exception))

    def test_mint_status_cancel_resolve(self) -> None:
        self.fake.answer("POST /prefix/v1/elicitations", 201, minted(self.fake.url))
        e = self.c.mint(TOKEN, "github", scopes=["repo"], message="m", request_digest="d1")
        self.assertEqual(json.loads(self.fake.seen[-1].body),
                         {"provider": "github", "scopes": ["repo"], "message": "m", "request_digest": "d1"})
        self.assertEqual(self.fake.seen[-1].headers["Content-Type"], "application/json")
        self.assertEqual((e.id, e.again, e.request_state, e.url), ("EID", False, "rs1.STATE", self.fake.url + "/c/EID"))
        self.fake.answer("POST /prefix/v1/elicitations", 200, minted(self.fake.url))
        self.assertTrue(self.c.mint(TOKEN, MintRequest("github", ["repo"])).again)
        self.fake.answer("GET /prefix/v1/elicitations/EID", 200, status("pending"))
        self.assertEqual(self.c.status(TOKEN, "EID", wait=2.5).status, "pending")
        self.assertEqual(self.fake.seen[-1].query, "wait=3s")
        self.c.status(TOKEN, "EID", wait=600)
        self.assertEqual(self.fake.seen[-1].query, "wait=60s")
        self.fake.answer("DELETE /prefix/v1/elicitations/EID", 200, status("declined", reason="client_declined"))
        self.assertEqual(self.c.cancel(TOKEN, "EID").reason, "client_declined")
        self.fake.answer("POST /prefix/v1/elicitations/resolve", 200, status("pending", request_state="rs1.NEXT"))
        st = self.c.resolve(TOKEN, "rs1.STATE", "d1")
        self.assertEqual(json.loads(self.fake.seen[-1].body), {"request_state": "rs1.STATE", "request_digest": "d1"})
        self.assertEqual(st.request_state, "rs1.NEXT")

    def test_wait_rides_out_outages(self) -> None:
        answers = [(503, {"Retry-After": "0"}, {"error": "database_unavailable"}), (429, {}, {"error": "rate_limited"}),
                   (200, {}, status("pending")), (200, {}, status("completed", completed_at="2026-11-30T12:01:00Z"))]
        self.fake.routes["GET /prefix/v1/elicitations/EID"] = lambda r: answers.pop(0)
        st = self.c.wait(TOKEN, "EID", timeout=10)
        self.assertEqual(st.status, "completed")
        self.assertIsNotNone(st.completed_at)
        self.fake.answer("GET /prefix/v1/elicitations/EID", 404, {"error": "not_found"})
        with self.assertRaises(connectd.NotFoundError):
            self.c.wait(TOKEN, "EID", timeout=5)
        self.fake.routes["GET /prefix/v1/elicitations/EID"] = lambda r: (time.sleep(0.2), (200, {}, status("pending")))[1]
        t0 = time.monotonic()
        with self.assertRaises(connectd.WaitTimeoutError):
            self.c.wait(TOKEN, "EID", timeout=0.5)
        self.assertLess(time.monotonic() - t0, 3)

    def test_require_connection(self) -> None:
        self.fake.answer("POST /prefix/v1/elicitations", 201, minted(self.fake.url))
        req = MintRequest("github", ["repo"])
        a = self.c.require_connection(TOKEN, Peer("2025-11-25", url_elicitation=True), req)
        self.assertEqual((a.generation, a.elicit_request["elicitationId"]), ("url-elicitation", "EID"))
        a = self.c.require_connection(TOKEN, Peer("2026-07-28", url_elicitation=True), MintRequest("github", account="cn_x"))
        self.assertEqual(a.input_key, "connect-github:cn_x")
        a = self.c.require_connection(TOKEN, Peer("2025-11-25"), req)
        self.assertIn(self.fake.url + "/c/EID", connectd.tool_result_text(a.fallback))
        strict = Client(self.fake.url + "/prefix", KEY, fallback=False)
        self.addCleanup(strict.close)
        n = len(self.fake.seen)
        with self.assertRaises(connectd.URLElicitationUnsupportedError):
            strict.require_connection(TOKEN, Peer("2025-06-18", url_elicitation=True), req)
        self.assertEqual(len(self.fake.seen), n, "minted for a client that cannot carry the link")
        # A retry (200) waits retry_wait: completed meanwhile is ready.
        self.fake.answer("POST /prefix/v1/elicitations", 200, minted(self.fake.url))
        self.fake.answer("GET /prefix/v1/elicitations/EID", 200, status("completed"))
        self.assertTrue(self.c.require_connection(TOKEN, Peer("2025-11-25", url_elicitation=True), req).ready)

    def test_connections_and_unlink(self) -> None:
        self.fake.answer("GET /prefix/v1/connections", 200, {"connections": [
            {"provider": "github", "id": "cn_a", "display_name": "octocat", "status": "active", "scopes": ["repo"],
             "created_at": "2026-11-30T12:00:00Z", "consent_required": True}]})
        (conn,) = self.c.connections(TOKEN)
        self.assertEqual((conn.id, conn.consent_required, conn.account.display_name), ("cn_a", True, "octocat"))
        self.fake.answer("DELETE /prefix/v1/connections/github", 200, {
            "provider": "github", "revoked_at_provider": True, "revocation": "revoked",
            "connections": [{"id": "cn_a", "revoked_at_provider": True, "revocation": "revoked"}]})
        u = self.c.unlink(TOKEN, "github", connectd.AccountAll)
        self.assertEqual(self.fake.seen[-1].query, "account=all")
        self.assertEqual([c.id for c in u.connections], ["cn_a"])


class KeptAlive(unittest.TestCase):
    def test_a_connection_the_server_closed_is_not_reused(self) -> None:
        fake = Fake(idle_timeout=0.2)
        self.addCleanup(fake.close)
        c = Client(fake.url, KEY)
        self.addCleanup(c.close)
        fake.answer("POST /v1/elicitations/resolve", 200, status("pending", request_state="rs1.NEXT"))
        for _ in range(3):
            self.assertEqual(c.resolve(TOKEN, "rs1.STATE").request_state, "rs1.NEXT")
            time.sleep(0.4)  # the server drops the idle connection meanwhile
        # Each POST was sent once: none was resent after a failure.
        self.assertEqual(len(fake.seen), 3)


class ProxyTest(unittest.TestCase):
    def setUp(self) -> None:
        self.fake = Fake()
        self.addCleanup(self.fake.close)
        self.c = Client(self.fake.url, KEY)
        self.addCleanup(self.c.close)

    def test_paths_headers_and_the_answer(self) -> None:
        self.fake.answer("POST /v1/proxy/github/user/repos", 201, {"id": 1}, {"X-RateLimit-Remaining": "10"})
        gh = self.c.provider(TOKEN, "github", account="cn_a")
        r = gh.post("https://api.github.com/user/repos?per_page=10", json_body={"name": "x"},
                    headers={"Authorization": "token SDK", "X-User-Token": "forged", "Accept": "application/vnd.github+json"})
        seen = self.fake.seen[-1]
        self.assertEqual(seen.target, "/v1/proxy/github/user/repos?per_page=10")
        self.assertEqual(seen.headers["Authorization"], "Bearer " + KEY)
        self.assertEqual(seen.headers["X-User-Token"], TOKEN)
        self.assertEqual(seen.headers["Connectd-Account"], "cn_a")
        self.assertEqual(seen.headers["Accept"], "application/vnd.github+json")
        self.assertEqual(len(seen.headers["X-Request-Id"]), 32)
        self.assertEqual(json.loads(seen.body), {"name": "x"})
        self.assertEqual((r.status, r.json(), r.headers["x-ratelimit-remaining"]), (201, {"id": 1}, "10"))
        self.assertEqual(gh.target("/a%2Fb", {"q": "1 2"}), "/v1/proxy/github/a%2Fb?q=1+2")
        gl = self.c.provider(TOKEN, "gitlab", path_prefix="/api/v4/")
        self.assertEqual(gl.target("https://gitlab.com/api/v4/projects?x=1"), "/v1/proxy/gitlab/projects?x=1")
        with self.assertRaises(ValueError):
            gl.target("https://gitlab.com/api/v4x/projects")

    def test_refusal_or_the_providers_own_error(self) -> None:
        def refuse(r: Fake.Req) -> tuple[int, dict[str, str], Any]:
            return 404, {"X-Request-Id": r.headers["X-Request-Id"]}, {"error": "not_connected", "request_id": r.headers["X-Request-Id"]}
        self.fake.routes["GET /v1/proxy/github/user"] = refuse
        with self.assertRaises(connectd.NotConnectedError) as cm:
            self.c.proxy(TOKEN, "github", "GET", "/user")
        self.assertTrue(connectd.needs_connection(cm.exception))
        # The provider's own JSON error (another request_id, or none) is an answer, not a refusal.
        self.fake.answer("GET /v1/proxy/github/user", 404, {"error": "not_connected", "request_id": "theirs"})
        r = self.c.proxy(TOKEN, "github", "GET", "/user")
        self.assertEqual((r.status, r.json()["request_id"]), (404, "theirs"))
        self.fake.answer("GET /v1/proxy/github/user", 401, {"message": "Bad credentials"})
        with self.c.proxy(TOKEN, "github", "GET", "/user", stream=True) as r:
            self.assertEqual((r.status, r.json()), (401, {"message": "Bad credentials"}))
        with self.assertRaises(connectd.UserTokenError):
            self.c.proxy("", "github", "GET", "/user")

    def test_call_refused(self) -> None:
        """Issue 33: the calls connectd's proxy refuses before anything is looked up (another
        method, an override header or _method parameter, a path that is not plain) are sent as
        made and raised as InvalidRequestError with connectd's code; a provider's own 405 is an
        answer."""
        forwarded = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")

        def stand_in(r: Fake.Req) -> tuple[int, dict[str, str], Any]:
            # A stand-in for connectd's first checks, enough for these calls.
            rid = r.headers["X-Request-Id"]
            if r.method not in forwarded:
                return 405, {"Allow": ", ".join(forwarded)}, {"error": "method_not_allowed", "request_id": rid}
            if r.headers.get("X-HTTP-Method-Override") or "_method=" in r.query:
                return 400, {}, {"error": "proxy_override_refused", "request_id": rid}
            if ";" in r.path:
                return 400, {}, {"error": "invalid_proxy_path", "request_id": rid}
            return 405, {"Allow": "GET"}, {"message": "Method Not Allowed"}

        cases = [
            ("TRACE", "TRACE", "/user", {}, 405, "method_not_allowed"),
            ("PROPFIND", "PROPFIND", "/user", {}, 405, "method_not_allowed"),
            ("override header", "POST", "/user", {"X-HTTP-Method-Override": "DELETE"}, 400, "proxy_override_refused"),
            ("_method parameter", "POST", "/user?_method=DELETE", {}, 400, "proxy_override_refused"),
            ("path parameter", "GET", "/repos/o/r/..;/x", {}, 400, "invalid_proxy_path"),
        ]
        for name, method, path, headers, status, code in cases:
            with self.subTest(name):
                self.fake.routes[f"{method} /v1/proxy/github{path.partition('?')[0]}"] = stand_in
                n = len(self.fake.seen)
                with self.assertRaises(connectd.InvalidRequestError) as cm:
                    self.c.proxy(TOKEN, "github", method, path, headers=headers)
                self.assertEqual((cm.exception.status, cm.exception.code), (status, code))
                self.assertFalse(connectd.needs_connection(cm.exception))
                self.assertEqual(len(self.fake.seen), n + 1, "sent once, as made")
                self.assertEqual(self.fake.seen[-1].method, method)
        self.fake.routes["DELETE /v1/proxy/github/provider-405"] = stand_in
        r = self.c.proxy(TOKEN, "github", "DELETE", "/provider-405")
        self.assertEqual((r.status, r.json()), (405, {"message": "Method Not Allowed"}))

    def test_streams_both_ways(self) -> None:
        def events() -> Any:
            for i in range(1, 4):
                yield b"data: %d\n\n" % i
                time.sleep(0.05)
        self.fake.routes["POST /v1/proxy/fake/stream"] = lambda r: (200, {"Content-Type": "text/event-stream"}, events)
        got: list[tuple[float, bytes]] = []
        t0 = time.monotonic()
        with self.c.provider(TOKEN, "fake").post("/stream", body=iter([b"part1-", b"part2"]), stream=True) as r:
            for line in r.iter_lines():
                got.append((time.monotonic() - t0, line))
        self.assertEqual(self.fake.seen[-1].body, b"part1-part2")
        self.assertEqual([l for _, l in got], [b"data: 1\n", b"\n", b"data: 2\n", b"\n", b"data: 3\n", b"\n"])
        self.assertLess(got[0][0], got[-1][0] - 0.05, "the first event came only with the last")


if __name__ == "__main__":
    unittest.main()
