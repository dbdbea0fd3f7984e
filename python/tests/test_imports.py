"""The package's modules import each other without a cycle (issue 33: client.py and proxy.py
imported each other for api_error, proxy.py from inside a function to dodge the cycle)."""

import ast
import os
import subprocess
import sys
import unittest

PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src", "connectd")


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def imports_of(path: str) -> set[str]:
    """The package's modules a module imports at run time — at its top or inside a function;
    an ``if TYPE_CHECKING:`` import is for type checkers only and does not count."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    out: set[str] = set()

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for n in child.orelse:
                    walk(n)
                continue
            if isinstance(child, ast.ImportFrom) and child.level == 1:
                if child.module:
                    out.add(child.module.split(".")[0])
                else:
                    out.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom) and (child.module or "").startswith("connectd."):
                out.add(child.module.split(".")[1])
            walk(child)

    walk(tree)
    return out


def modules() -> list[str]:
    return sorted(f[:-3] for f in os.listdir(PKG) if f.endswith(".py") and f != "__init__.py")


class ImportTest(unittest.TestCase):
    def test_no_cycle(self) -> None:
        graph = {m: imports_of(os.path.join(PKG, m + ".py")) & set(modules()) for m in modules()}
        done: set[str] = set()

        def visit(m: str, path: list[str]) -> None:
            if m in path:
                self.fail("import cycle: " + " -> ".join(path[path.index(m):] + [m]))
            if m in done:
                return
            for n in sorted(graph[m]):
                visit(n, path + [m])
            done.add(m)

        for m in modules():
            visit(m, [])

    def test_each_module_first(self) -> None:
        """Each module imports first in a fresh interpreter."""
        src = os.path.dirname(PKG)
        for m in modules():
            with self.subTest(module=m):
                env = dict(os.environ, PYTHONPATH=src, PYTHONDONTWRITEBYTECODE="1")
                r = subprocess.run([sys.executable, "-c", f"import connectd.{m}"], env=env,
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
