"""A request is resolved once, at the door (services/resolve.py).

`split_header` is called, and `[pool] default_timeout_s` read, only by the
resolve module; the allow-list names the few other callers and why they are
not a request's resolution.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2] / "server" / "leanrpc"
RESOLVE = "services/resolve.py"
SPLIT_ALLOWED = {
    "core/headers.py": "the facade itself",
    "core/header_memo.py": "the resolver's memo of splits, held and called by the resolver only",
    "reference/parse.py": "a reference's own statement text, parsed once by the resolver's parser",
    "pool/supervisor.py": "a header the supervisor warms, not a request",
}


def _uses(name: str, *, attribute: bool) -> set[str]:
    found = set()
    for path in ROOT.rglob("*.py"):
        rel = str(path.relative_to(ROOT))
        if rel.startswith(("v1/", "standin/")):
            continue
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if attribute and isinstance(node, ast.Attribute) and node.attr == name:
                found.add(rel)
            if not attribute and isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called == name:
                    found.add(rel)
    return found


def test_only_the_resolve_module_splits_a_request():
    callers = _uses("split_header", attribute=False) - set(SPLIT_ALLOWED)
    assert callers <= {RESOLVE}, (
        f"split_header called outside {RESOLVE}: {sorted(callers - {RESOLVE})}"
    )


def test_only_the_resolve_module_reads_the_default_timeout():
    readers = _uses("default_timeout_s", attribute=True)
    assert readers <= {RESOLVE}, (
        f"pool.default_timeout_s read outside {RESOLVE}: {sorted(readers - {RESOLVE})}"
    )


def test_no_module_forwards_attributes_or_decodes_privately():
    text = (ROOT / "cache" / "verifier.py").read_text()
    assert "__getattr__" not in text and "._decode(" not in text


def test_only_the_resolve_module_holds_the_memo_of_splits():
    holders = {
        rel
        for rel in _uses("HeaderMemo", attribute=False) | _uses("HeaderMemo", attribute=True)
        if rel != "core/header_memo.py"
    }
    assert holders <= {RESOLVE}, f"HeaderMemo made outside {RESOLVE}: {sorted(holders)}"
