"""The MCP answers, byte for byte the Go client's (client/client_test.go TestAnswers, mcp.go)."""

import json
import unittest

import connectd
from connectd import Account, AccountChoice, Client, Elicitation, Peer, answer_for, fallback_result, generation_of

BASE = "https://connect.example.com"


def minted(base: str = BASE) -> dict:
    """A mint answer as connectd writes it (docs/api.md); the Go tests' minted()."""
    u = base + "/c/EID"
    el = {"mode": "url", "elicitationId": "EID", "url": u, "message": "Connect it."}
    return {
        "elicitation_id": "EID", "status": "pending", "provider": "github", "scopes": ["repo"],
        "expires_at": "2026-11-30T12:10:00Z", "url": u, "request_state": "rs1.STATE",
        "elicitation": el,
        "url_elicitation_required_error": {"code": -32042, "message": "This request requires more information.",
                                           "data": {"elicitations": [el]}},
        "input_request": {"method": "elicitation/create", "params": {"mode": "url", "message": "Connect it.", "url": u}},
    }


def dumps(v: object) -> str:
    """JSON as Go's encoding/json writes it (compact, HTML left alone here: none in these values)."""
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


class Answers(unittest.TestCase):
    def test_2025_11_25(self) -> None:
        e = Elicitation.from_json(minted())
        a = answer_for(e, "2025-11-25")
        self.assertEqual(a.generation, connectd.GenerationURLElicitation)
        self.assertIsNone(a.result)
        self.assertEqual(dumps(a.elicit_request),
                         '{"mode":"url","elicitationId":"EID","url":"%s/c/EID","message":"Connect it."}' % BASE)
        self.assertEqual(dumps(a.error),
                         '{"code":-32042,"message":"This request requires more information.","data":{"elicitations":'
                         '[{"mode":"url","elicitationId":"EID","url":"%s/c/EID","message":"Connect it."}]}}' % BASE)
        self.assertEqual(a.error["code"], connectd.URLElicitationRequiredCode)
        # The answer is a copy: editing it leaves the elicitation as it was.
        a.elicit_request["message"] = "changed"
        a.error["data"]["elicitations"][0]["message"] = "changed"
        self.assertEqual(answer_for(e, "2025-11-25").error["data"]["elicitations"][0]["message"], "Connect it.")
        self.assertEqual(connectd.elicitation_complete("EID"),
                         {"jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": {"elicitationId": "EID"}})

    def test_2026_07_28(self) -> None:
        e = Elicitation.from_json(minted())
        for v in ("2026-07-28", "2027-01-01"):
            a = answer_for(e, v, connectd.connect_key("github"))
            self.assertEqual(a.generation, connectd.GenerationInputRequired)
            self.assertIsNone(a.elicit_request)
            self.assertIsNone(a.error)
            self.assertEqual(a.input_key, "connect-github")
            # No elicitationId, no content (null or otherwise).
            self.assertEqual(dumps(a.result),
                             '{"resultType":"input_required","inputRequests":{"connect-github":{"method":"elicitation/create",'
                             '"params":{"mode":"url","url":"%s/c/EID","message":"Connect it."}}},"requestState":"rs1.STATE"}' % BASE)
        a = answer_for(e, "2026-07-28", "mine")
        self.assertEqual(a.input_key, "mine")
        self.assertIn("mine", a.result["inputRequests"])

    def test_no_url_mode_before_2025_11_25(self) -> None:
        e = Elicitation.from_json(minted())
        for v in ("2024-11-05", "2025-06-18", "", "latest"):
            with self.assertRaises(connectd.URLElicitationUnsupportedError):
                answer_for(e, v)

    def test_fallback_text(self) -> None:
        e = Elicitation.from_json(minted())
        self.assertEqual(
            dumps(fallback_result(e)),
            '{"content":[{"type":"text","text":"Connect it.\\n\\nThis app cannot open the connect link for you. Open it in your browser:\\n'
            + BASE + '/c/EID\\n\\nSign in, approve, then try again. The link works only for you, grants nothing by itself, '
            'and expires at 12:10 UTC on 30 Nov."}],"isError":true}')
        m = minted()
        m["elicitation"]["message"] = "  "
        m["provider"] = "demo-files"
        m["expires_at"] = "2026-12-31T23:59:59.123456789+00:00"
        self.assertTrue(connectd.tool_result_text(fallback_result(Elicitation.from_json(m))).startswith(
            "This needs your demo-files account, which is not connected yet.\n\n"))
        self.assertTrue(connectd.tool_result_text(fallback_result(Elicitation.from_json(m))).endswith("expires at 23:59 UTC on 31 Dec."))

    def test_generation_of(self) -> None:
        for v, want in {
            "2024-11-05": "none", "2025-06-18": "none", "2025-11-25": "url-elicitation", "2026-01-01": "url-elicitation",
            "2026-07-28": "input-required", "2030-01-01": "input-required", "": "none", "2026-07-28-draft": "none",
            "DRAFT-2026": "none", "2026-02-30": "none",
        }.items():
            self.assertEqual(generation_of(v), want, v)

    def test_peer(self) -> None:
        self.assertTrue(connectd.can_open_url(Peer("2025-11-25", url_elicitation=True)))
        self.assertFalse(connectd.can_open_url(Peer("2025-06-18", url_elicitation=True)))
        self.assertFalse(connectd.can_open_url(Peer("2026-07-28")))
        self.assertEqual(Peer.from_capabilities("2025-11-25", {"elicitation": {"url": {}}}),
                         Peer("2025-11-25", url_elicitation=True, form_elicitation=False))
        self.assertEqual(Peer.from_capabilities("2025-11-25", {"elicitation": {}}), Peer("2025-11-25", False, True))
        self.assertEqual(Peer.from_capabilities("2025-11-25", {"elicitation": {"form": {}, "url": {}}}), Peer("2025-11-25", True, True))
        self.assertEqual(Peer.from_capabilities("2026-07-28", {}), Peer("2026-07-28"))
        self.assertEqual(Peer.from_capabilities("2026-07-28", None), Peer("2026-07-28"))

    def test_connect_keys(self) -> None:
        cid = "cn_abcdefghijklmnopqrstuvwxyz"
        for account, key in {cid: "connect-github:" + cid, connectd.AccountNew: "connect-github", "": "connect-github"}.items():
            self.assertEqual(connectd.connect_key("github", account), key)
            self.assertEqual(connectd.key_account("github", key), "" if account == connectd.AccountNew else account)
        self.assertIsNone(connectd.key_account("github", "connect-gitlab"))
        self.assertIsNone(connectd.key_account("github", "connect-github:"))

    def test_account_choice(self) -> None:
        a1 = Account("cn_aaaaaaaaaaaaaaaaaaaaaaaaaa", "octocat", "work")
        a2 = Account("cn_bbbbbbbbbbbbbbbbbbbbbbbbbb", "octocat")
        a3 = Account("cn_cccccccccccccccccccccccccc", "octocat")
        c = AccountChoice("github", [a1, a2, a3])
        form = c.form()
        self.assertEqual(dumps(form),
                         '{"mode":"form","message":"You have several github accounts this app may use. Which one should it use?",'
                         '"requestedSchema":{"type":"object","properties":{"account":{"type":"string","title":"github account",'
                         '"oneOf":[{"const":"cn_aaaaaaaaaaaaaaaaaaaaaaaaaa","title":"work (octocat)"},'
                         '{"const":"cn_bbbbbbbbbbbbbbbbbbbbbbbbbb","title":"octocat [cn_bbbbbbbbbbbbbbbbbbbbbbbbbb]"},'
                         '{"const":"cn_cccccccccccccccccccccccccc","title":"octocat [cn_cccccccccccccccccccccccccc]"}]}},'
                         '"required":["account"]}}')
        self.assertEqual(connectd.tool_result_text(c.fallback("list_repos")),
                         "You have several github accounts this app may use, and it needs to know which one. "
                         "Ask which, then call list_repos again with account set to its id:\n"
                         "- work (octocat): cn_aaaaaaaaaaaaaaaaaaaaaaaaaa\n"
                         "- octocat [cn_bbbbbbbbbbbbbbbbbbbbbbbbbb]: cn_bbbbbbbbbbbbbbbbbbbbbbbbbb\n"
                         "- octocat [cn_cccccccccccccccccccccccccc]: cn_cccccccccccccccccccccccccc")
        self.assertEqual(connectd.chosen_account({"account": a1.id}), a1.id)
        self.assertIsNone(connectd.chosen_account({"account": ""}))
        self.assertIsNone(connectd.chosen_account(None))
        self.assertEqual(connectd.choice_key("github"), "account-github")
        err = connectd.AccountRequiredError(409, "account_required", accounts=[a1, a2])
        choice = connectd.choose_account(err, "github")
        assert choice is not None
        self.assertEqual([a.id for a in choice.accounts], [a1.id, a2.id])
        self.assertIsNone(connectd.choose_account(connectd.NotConnectedError(404, "not_connected"), "github"))

    def test_reissue(self) -> None:
        c = Client("https://connect.example.com/prefix/", "cks_test")
        st = connectd.ElicitationStatus("e1", "pending", "github", [], None, request_state="rs1.fresh")
        self.assertEqual(c.reissue(st, "Still waiting"), {
            "resultType": "input_required", "requestState": "rs1.fresh",
            "inputRequests": {"connect-github": {"method": "elicitation/create",
                                                 "params": {"mode": "url", "url": "https://connect.example.com/prefix/c/e1",
                                                            "message": "Still waiting"}}}})
        with self.assertRaises(ValueError):
            c.reissue(connectd.ElicitationStatus("e1", "completed", "github", [], None, request_state="rs1.x"), "m")
        with self.assertRaises(ValueError):
            c.reissue(connectd.ElicitationStatus("e1", "pending", "github", [], None), "m")


if __name__ == "__main__":
    unittest.main()
