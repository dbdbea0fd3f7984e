"""request_digest gives the Go client's client.RequestDigest values (vectors computed with Go:
client.RequestDigest(name, v) for v = json.Unmarshal(args), shared with the TypeScript tests)."""

import unittest

from connectd import request_digest

VECTORS = [
    ("list_files", {}, "QZ8Sc6atlrLbTHIj1Z7tXxZUQNRTYPBzJElV-EPyoLw"),
    ("list_files", {"path": "/a", "limit": 10}, "kUDgrBGzzFPJc_hVj-HKSz1A5HrT-jrCvQYF64mq8yM"),
    ("x", {"b": 1, "a": 2}, "m4n6OwsR3fEhs23YleVULHTZia3t4TKJ3dUCHDgwp0E"),
    ("read_file", {"q": "<script>&amp;</script>", "s": "\u2028\u2029", "n": None, "t": True, "f": False,
                   "arr": [1, 2.5, -0.000001, 1e21, 1e-7, 123456789012345680000, "é"]},
     "bbrPElKYzNmjC3Wvrx8nOfHLG0tleqhQebL2ahM_Zw4"),
    ("ünï", {"é": 1, "z": {"y": [{"b": 2, "a": 1}], "a": "\t\n\r\b\f\u0001\"\\/"}, "\ue000": 1, "😀": 2, "A": 0},
     "l8EQqctxGJeAoz4hkTnlTVbQzpGAxOnBBJFhRh3MKHs"),
    ("", [], "k9RZP_G91FLtIH4Qi_6HlvXJPvCnzJX7hi2z_C5QmjQ"),
    ("t", "plain", "W8We7fedTfxHzY7NFE-O9APrI3VudvjaKMMQOaLskdM"),
    ("n", 3.14159, "AsposICXnuqaOOC39jRWVqRXK33BITqXQVCKfmlSa1g"),
]


class RequestDigest(unittest.TestCase):
    def test_go_vectors(self) -> None:
        for name, args, want in VECTORS:
            with self.subTest(name=name):
                self.assertEqual(request_digest(name, args), want)

    def test_floats_as_go_writes_them(self) -> None:
        # A float that is an integer is written as Go writes the float64: 10.0 is "10".
        self.assertEqual(request_digest("list_files", {"path": "/a", "limit": 10.0}), VECTORS[1][2])
        self.assertEqual(request_digest("x", {"a": 2, "b": 1}), request_digest("x", {"b": 1, "a": 2}))

    def test_refused(self) -> None:
        for bad in (float("nan"), float("inf"), object(), {1: "x"}):
            with self.assertRaises(TypeError):
                request_digest("x", {"n": bad})


if __name__ == "__main__":
    unittest.main()
