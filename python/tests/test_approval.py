"""user_approval_required: the error class, the approval it carries, what its final status means,
and the denial's tool result (client/approval.go)."""

import json
import pickle
import unittest
from datetime import datetime, timezone

import connectd
from connectd.errors import api_error

from .test_client import KEY, TOKEN, Fake

BASE = "https://connect.example.com"


def approval_doc() -> dict:
    url = BASE + "/c/aid1"
    p = {"mode": "url", "elicitationId": "aid1", "url": url, "message": "Approve: Open issues in your repositories"}
    return {
        "elicitation_id": "aid1", "status": "pending", "kind": "approval", "provider": "github", "scopes": [],
        "expires_at": "2026-12-02T06:10:00Z", "url": url, "request_state": "rs1.abc", "elicitation": p,
        "url_elicitation_required_error": {"code": -32042, "message": "This request requires the user's approval.",
                                           "data": {"elicitations": [p]}},
        "input_request": {"method": "elicitation/create", "params": {"mode": "url", "message": p["message"], "url": url}},
        "method": "POST", "path": "/repos/a/b/issues", "rule": "POST /repos/*/issues",
        "message": "Open issues in your repositories",
    }


def refusal(approval=None) -> connectd.APIError:
    body = {"error": "user_approval_required", "error_description": "the user must approve this call first",
            "request_id": "rid-1"}
    if approval is not None:
        body["approval"] = approval
    return api_error(403, json.dumps(body).encode(), None)


class ApprovalRequired(unittest.TestCase):
    def test_the_refusal_carries_the_approval(self) -> None:
        e = refusal(approval_doc())
        self.assertIsInstance(e, connectd.ApprovalRequiredError)
        self.assertFalse(connectd.needs_connection(e))
        a = connectd.approval_required(e)
        self.assertIsInstance(a, connectd.Approval)
        self.assertIsInstance(a, connectd.Elicitation)
        self.assertEqual((a.id, a.url, a.kind, a.status), ("aid1", BASE + "/c/aid1", connectd.KIND_APPROVAL, "pending"))
        self.assertEqual((a.method, a.path, a.rule, a.message),
                         ("POST", "/repos/a/b/issues", "POST /repos/*/issues", "Open issues in your repositories"))
        self.assertEqual(a.params["elicitationId"], "aid1")
        self.assertEqual(a.input_request["params"]["url"], a.url)
        self.assertEqual(a.url_elicitation_required_error["code"], -32042)
        self.assertEqual(a.request_state, "rs1.abc")
        self.assertEqual(a.expires_at, datetime(2026, 12, 2, 6, 10, tzinfo=timezone.utc))
        # Shaped as a connect link is, under the approval key.
        ans = connectd.answer_for(a, connectd.ProtocolVersion20260728, connectd.approval_key("github", a.id))
        self.assertEqual(ans.input_key, "approve-github:aid1")
        self.assertEqual(ans.result["requestState"], "rs1.abc")
        self.assertEqual(connectd.key_approval("github", ans.input_key), "aid1")
        for other in ("approve-github", "approve-github:", "connect-github", "approve-gitlab:aid1"):
            self.assertIsNone(connectd.key_approval("github", other), other)
        ans = connectd.answer_for(a, connectd.ProtocolVersion20251125)
        self.assertEqual(ans.elicit_request["elicitationId"], "aid1")
        # Through an SDK's exception chained from it, and pickled.
        try:
            try:
                raise e
            except connectd.APIError as inner:
                raise RuntimeError("sdk: create issue failed") from inner
        except RuntimeError as outer:
            self.assertEqual(connectd.approval_required(outer).id, "aid1")
        self.assertEqual(pickle.loads(pickle.dumps(e)).approval.id, "aid1")

    def test_no_approval(self) -> None:
        self.assertIsNone(connectd.approval_required(refusal()))
        self.assertIsNone(connectd.approval_required(refusal("not a document")))
        self.assertIsNone(connectd.approval_required(api_error(403, b'{"error":"not_connected"}', None)))
        self.assertIsNone(connectd.approval_required(ValueError("x")))
        e = api_error(403, json.dumps({"error": "proxy_not_allowed", "approval": approval_doc()}).encode(), None)
        self.assertIsNone(e.approval)


class ThroughTheProxy(unittest.TestCase):
    def test_the_proxys_refusal_names_the_account(self) -> None:
        fake = Fake()
        self.addCleanup(fake.close)
        c = connectd.Client(fake.url, KEY)
        self.addCleanup(c.close)

        def refuse(r: Fake.Req):
            rid = r.headers["X-Request-Id"]
            return 403, {"X-Request-Id": rid}, {"error": "user_approval_required", "request_id": rid, "approval": approval_doc()}
        fake.routes["POST /v1/proxy/github/repos/a/b/issues"] = refuse
        with self.assertRaises(connectd.ApprovalRequiredError) as cm:
            c.provider(TOKEN, "github", account="cn_w").post("https://api.github.com/repos/a/b/issues", json_body={"title": "t"})
        a = connectd.approval_required(cm.exception)
        self.assertEqual((a.id, a.account, a.method), ("aid1", "cn_w", "POST"))


class Outcome(unittest.TestCase):
    def status(self, status: str, reason: str = "") -> connectd.ElicitationStatus:
        return connectd.ElicitationStatus.from_json({"elicitation_id": "A", "status": status, "reason": reason,
                                                     "kind": "approval", "provider": "p", "scopes": []})

    def test_outcomes(self) -> None:
        self.assertEqual(self.status("completed").kind, "approval")
        self.assertIsNone(connectd.approval_outcome(self.status("completed")))
        self.assertIsInstance(connectd.approval_outcome(self.status("declined", "user_denied")), connectd.ApprovalDeniedError)
        dismissed = connectd.approval_outcome(self.status("declined", "client_declined"))
        self.assertIsInstance(dismissed, connectd.ApprovalNotGivenError)
        self.assertFalse(dismissed.expired)
        self.assertTrue(connectd.approval_outcome(self.status("expired")).expired)
        failed = connectd.approval_outcome(self.status("failed"))
        self.assertIsInstance(failed, connectd.ConnectdError)
        self.assertNotIsInstance(failed, connectd.ApprovalDeniedError)

    def test_denied_result(self) -> None:
        a = connectd.approval_required(refusal(approval_doc()))
        r = connectd.denied_result(a)
        self.assertTrue(r["isError"])
        self.assertEqual(connectd.tool_result_text(r), "The user denied this request: POST /repos/a/b/issues "
                         "(Open issues in your repositories). It was not made. Do not try it again unless the user asks for it.")
        self.assertTrue(connectd.tool_result_text(connectd.denied_result()).startswith(connectd.DeniedText + "."))


if __name__ == "__main__":
    unittest.main()
