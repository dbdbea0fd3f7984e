"""The client against a real connectd, run by e2e/python_test.go (go test ./e2e -run
TestPythonClient), which passes the world in the environment: connectd's URL and CA, two
registered clients' keys (A, B), alice's and bob's MCP access tokens for each, and CONTROL_URL,
whose POST /complete makes the Go test's browser open a connect link as a user and allow (signing
in at the provider as the given account). Outside that test these tests skip."""

import json
import os
import ssl
import threading
import time
import unittest
import urllib.request

import connectd
from connectd import Client, MintRequest, Peer, request_digest

E2E = os.environ.get("CONNECTD_PYTHON_E2E") == "1"


def need(name: str) -> str:
    v = os.environ.get(name)
    if not v:
        raise AssertionError(f"{name} is not set: these tests run from go test ./e2e (TestPythonClient)")
    return v


@unittest.skipUnless(E2E or os.environ.get("CONNECTD_URL"), "run by go test ./e2e -run TestPythonClient")
class Integration(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.base = need("CONNECTD_URL")
        cls.provider_name = need("CONNECTD_PROVIDER")
        cls.scope = need("CONNECTD_SCOPE")
        cls.ctx = ssl.create_default_context(cafile=need("CONNECTD_CA_FILE"))
        cls.a = Client(cls.base, need("CONNECTD_KEY_A"), retry_wait=1, ssl_context=cls.ctx)
        cls.b = Client(cls.base, need("CONNECTD_KEY_B"), retry_wait=1, ssl_context=cls.ctx)
        cls.alice_a, cls.alice_b = need("ALICE_TOKEN_A"), need("ALICE_TOKEN_B")
        cls.bob_a = need("BOB_TOKEN_A")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.a.close()
        cls.b.close()

    def complete(self, url: str, user: str, subject: str = "") -> None:
        """The user opens the link in the (Go test's) browser, signs in and allows."""
        req = urllib.request.Request(need("CONTROL_URL") + "/complete", method="POST",
                                     data=json.dumps({"url": url, "user": user, "subject": subject}).encode())
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                self.assertEqual(r.status, 204)
        except urllib.error.HTTPError as err:
            self.fail(f"completing {url} as {user}: {err.code} {err.read().decode(errors='replace')}")

    def test_a_bad_key_is_invalid_client(self) -> None:
        bad = Client(self.base, "cks_not_a_real_key", ssl_context=self.ctx)
        with self.assertRaises(connectd.InvalidClientError) as cm:
            bad.connections(self.alice_a)
        bad.close()
        e = cm.exception
        self.assertEqual((e.status, e.code), (401, "invalid_client"))
        self.assertTrue(e.request_id)
        for s in (str(e), repr(e)):
            self.assertNotIn("cks_not_a_real_key", s)
            self.assertNotIn(self.alice_a, s)

    def test_b_a_token_for_another_clients_resource_is_refused(self) -> None:
        with self.assertRaises(connectd.UserTokenError) as cm:
            self.a.connections(self.alice_b)
        self.assertEqual(cm.exception.status, 401)

    def test_b_the_proxy_refuses_a_call_it_would_not_forward(self) -> None:
        """Issue 33, against connectd itself: another method, a path that is not plain and a method
        override are refused before anything is looked up, in an envelope naming the request's id,
        so the client raises InvalidRequestError (a HEAD's refusal has no body: an answer)."""
        a, alice, p = self.a, self.alice_a, self.provider_name
        cases = [
            ("TRACE", "/files", {}, 405, "method_not_allowed"),
            ("PROPFIND", "/files", {}, 405, "method_not_allowed"),
            ("GET", "/files/..;/admin", {}, 400, "invalid_proxy_path"),
            ("GET", "/files/%2e%2e/admin", {}, 400, "invalid_proxy_path"),
            ("POST", "/files", {"X-HTTP-Method-Override": "DELETE"}, 400, "proxy_override_refused"),
            ("POST", "/files", {"X-Original-URL": "/admin"}, 400, "proxy_override_refused"),
            ("POST", "/files?_method=DELETE", {}, 400, "proxy_override_refused"),
        ]
        for method, path, headers, status, code in cases:
            with self.subTest(method=method, path=path, headers=headers):
                with self.assertRaises(connectd.InvalidRequestError) as cm:
                    a.proxy(alice, p, method, path, headers=headers)
                e = cm.exception
                self.assertEqual((e.status, e.code), (status, code))
                self.assertTrue(e.request_id)
                self.assertFalse(connectd.needs_connection(e))
        r = a.proxy(alice, p, "HEAD", "/files/..;/admin")
        self.assertEqual(r.status, 400)

    def test_c_connect_token_proxy_refusals_unlink(self) -> None:
        a, alice, p, scope = self.a, self.alice_a, self.provider_name, self.scope
        # Not connected yet.
        with self.assertRaises(connectd.NotConnectedError) as cm:
            a.token(alice, p, scope)
        self.assertTrue(connectd.needs_connection(cm.exception))
        self.assertEqual(a.connections(alice), [])
        with self.assertRaises(connectd.NotConnectedError):
            a.proxy(alice, p, "GET", "/files")

        # Mint, and the same link again for the same request.
        digest = request_digest("list_files", {})
        req = MintRequest(p, [scope], "Connect your files.", digest)
        first = a.mint(alice, req)
        self.assertEqual((first.again, first.status), (False, "pending"))
        self.assertEqual(first.url, f"{self.base}/c/{first.id}")
        self.assertTrue(first.request_state.startswith("rs1."))
        again = a.mint(alice, req)
        self.assertEqual((again.again, again.id, again.url), (True, first.id, first.url))
        st = a.status(alice, first.id)
        self.assertEqual((st.status, st.provider, st.scopes), ("pending", p, [scope]))

        # The answers, per what the peer declared.
        ans = a.require_connection(alice, Peer("2025-11-25", url_elicitation=True), req)
        self.assertEqual((ans.generation, ans.ready), (connectd.GenerationURLElicitation, False))
        self.assertEqual(ans.elicit_request, {"mode": "url", "elicitationId": first.id, "url": first.url, "message": "Connect your files."})
        self.assertEqual(ans.error["code"], -32042)
        self.assertEqual(ans.error["data"]["elicitations"], [ans.elicit_request])
        ans = a.require_connection(alice, Peer("2026-07-28", url_elicitation=True), req)
        result = ans.result
        assert result is not None
        self.assertEqual(set(result), {"resultType", "inputRequests", "requestState"})
        self.assertEqual(result["inputRequests"], {f"connect-{p}": {"method": "elicitation/create", "params": {
            "mode": "url", "url": first.url, "message": "Connect your files."}}})
        fb = a.require_connection(alice, Peer("2025-11-25"), req)
        assert fb.fallback is not None
        self.assertIn(first.url, connectd.tool_result_text(fb.fallback))
        strict = Client(self.base, need("CONNECTD_KEY_A"), fallback=False, ssl_context=self.ctx)
        with self.assertRaises(connectd.URLElicitationUnsupportedError):
            strict.require_connection(alice, Peer("2025-11-25"), req)
        strict.close()

        # A request_state resolves once; the digest must match.
        st = a.resolve(alice, result["requestState"], digest)
        self.assertEqual((st.id, st.status), (first.id, "pending"))
        self.assertTrue(st.request_state.startswith("rs1."))
        with self.assertRaises(connectd.RequestStateReplayedError) as rs:
            a.resolve(alice, result["requestState"], digest)
        self.assertIsInstance(rs.exception, connectd.RequestStateError)
        with self.assertRaises(connectd.RequestDigestMismatchError):
            a.resolve(alice, st.request_state, "another-digest")
        with self.assertRaises(connectd.RequestStateInvalidError):
            a.resolve(alice, "rs1.tampered", digest)
        # Another user cannot read alice's elicitation.
        with self.assertRaises(connectd.NotFoundError):
            a.status(self.bob_a, first.id)

        # The user completes while wait long-polls.
        t = threading.Timer(0.5, self.complete, (first.url, "alice"))
        t.start()
        done = a.wait(alice, first.id, timeout=40)
        t.join()
        self.assertEqual(done.status, "completed")
        self.assertIsNotNone(done.completed_at)

        tok = a.token(alice, p, scope)
        self.assertEqual((tok.provider, tok.kind), (p, "oauth2"))
        self.assertTrue(tok.access_token)
        self.assertRegex(tok.account.id, r"^cn_[a-z2-7]{26}$")
        self.assertNotIn(tok.access_token, repr(tok) + str(tok) + repr([tok]))
        (conn,) = a.connections(alice)
        self.assertEqual((conn.provider, conn.id, conn.status), (p, tok.account.id, "active"))
        self.assertEqual(a.account_token(alice, p, tok.account.id, scope).account.id, tok.account.id)

        # The provider's API through connectd: the files, the request as the provider saw it, a stream.
        files = a.provider(alice, p).get("/files")
        self.assertEqual(files.status, 200)
        self.assertIn("notes.txt", files.text)
        echo = a.proxy(alice, p, "POST", "/echo/x?y=1", body=b"hello", headers={"X-Custom": "1", "Cookie": "s=1"}).json()
        self.assertEqual((echo["method"], echo["path"], echo["raw_query"], echo["body_length"]), ("POST", "/api/echo/x", "y=1", 5))
        seen = {k.lower(): v for k, v in echo["headers"].items()}
        self.assertEqual(seen["x-custom"], ["1"])
        for never in ("x-user-token", "cookie", "connectd-account", "x-request-id"):
            self.assertNotIn(never, seen)
        self.assertNotIn(need("CONNECTD_KEY_A"), json.dumps(echo))
        times = []
        t0 = time.monotonic()
        with a.provider(alice, p).get("/stream?n=3&gap=300ms", stream=True) as r:
            self.assertEqual(r.headers.get_content_type(), "text/event-stream")
            lines = []
            for line in r.iter_lines():
                lines.append(line)
                times.append(time.monotonic() - t0)
        self.assertEqual([x for x in lines if x.strip()], [b"data: 1\n", b"data: 2\n", b"data: 3\n"])
        self.assertLess(times[0], times[-1] - 0.4, "the events were not streamed as they came")

        # A scope the connection lacks: insufficient_scope with the missing scopes.
        with self.assertRaises(connectd.InsufficientScopeError) as ins:
            a.token(alice, p, scope, "files.write")
        self.assertEqual(ins.exception.missing_scopes, ["files.write"])
        self.assertTrue(connectd.needs_connection(ins.exception))
        # Another MCP server the user never approved: consent_required, with what needs approving.
        with self.assertRaises(connectd.ConsentRequiredError) as cr:
            self.b.token(self.alice_b, p, scope)
        e = cr.exception
        self.assertEqual((e.status, e.code), (403, "consent_required"))
        self.assertIsInstance(e.unapproved_scopes, list)
        self.assertIsInstance(e.account_changed, bool)
        self.assertTrue(connectd.needs_connection(e))
        with self.assertRaises(connectd.ConsentRequiredError):
            self.b.proxy(self.alice_b, p, "GET", "/files")
        self.assertEqual(e.unapproved_scopes, [])  # never approved: nothing in particular
        # B approved, then the connection widened through A: B must approve the new scope.
        eb = self.b.mint(self.alice_b, MintRequest(p, [scope]))
        self.complete(eb.url, "alice")
        self.assertEqual(self.b.wait(self.alice_b, eb.id, timeout=20).status, "completed")
        self.assertEqual(self.b.token(self.alice_b, p, scope).account.id, tok.account.id)
        wide = a.mint(alice, MintRequest(p, [scope, "files.write"]))
        self.complete(wide.url, "alice")
        self.assertEqual(a.wait(alice, wide.id, timeout=20).status, "completed")
        with self.assertRaises(connectd.ConsentRequiredError) as cr:
            self.b.token(self.alice_b, p, scope)
        self.assertEqual((cr.exception.unapproved_scopes, cr.exception.account_changed), (["files.write"], False))
        self.assertTrue(connectd.needs_connection(cr.exception))
        (listed,) = self.b.connections(self.alice_b)
        self.assertEqual((listed.id, listed.consent_required), (tok.account.id, True))
        # A's token now carries both.
        self.assertEqual(sorted(a.token(alice, p, scope, "files.write").scopes), ["files.read", "files.write"])

        # Unlink withdraws it.
        u = a.unlink(alice, p)
        self.assertEqual((u.provider, [c.id for c in u.connections]), (p, [tok.account.id]))
        with self.assertRaises(connectd.NotConnectedError):
            a.token(alice, p, scope)

    def test_d_several_accounts(self) -> None:
        a, bob, p, scope = self.a, self.bob_a, self.provider_name, self.scope
        work = a.mint(bob, MintRequest(p, [scope]))
        self.complete(work.url, "bob", "bob-work")
        self.assertEqual(a.wait(bob, work.id, timeout=20).status, "completed")
        work_id = a.token(bob, p, scope).account.id
        home = a.mint(bob, MintRequest(p, [scope], account=connectd.AccountNew))
        self.complete(home.url, "bob", "bob-home")
        self.assertEqual(a.wait(bob, home.id, timeout=20).status, "completed")

        # Approved for both: the read must name one.
        with self.assertRaises(connectd.AccountRequiredError) as cm:
            a.token(bob, p, scope)
        e = cm.exception
        self.assertEqual((e.status, e.code), (409, "account_required"))
        self.assertFalse(connectd.needs_connection(e))
        ids = [x.id for x in e.accounts]
        self.assertEqual(len(ids), 2)
        self.assertIn(work_id, ids)
        for x in e.accounts:
            self.assertRegex(x.id, r"^cn_[a-z2-7]{26}$")
        choice = connectd.choose_account(e, p)
        assert choice is not None
        form = choice.form()
        self.assertEqual([o["const"] for o in form["requestedSchema"]["properties"]["account"]["oneOf"]], ids)
        for cid in ids:
            self.assertEqual(a.account_token(bob, p, cid, scope).account.id, cid)
            self.assertEqual(a.provider(bob, p, account=cid).get("/files").status, 200)
        with self.assertRaises(connectd.AccountRequiredError):
            a.proxy(bob, p, "GET", "/files")
        with self.assertRaises(connectd.NotFoundError):
            a.account_token(bob, p, "cn_" + "a" * 26)
        self.assertEqual(sorted(c.id for c in a.connections(bob)), sorted(ids))
        u = a.unlink(bob, p, connectd.AccountAll)
        self.assertEqual(sorted(c.id for c in u.connections), sorted(ids))
        self.assertEqual(a.connections(bob), [])


if __name__ == "__main__":
    unittest.main()
