"""Near the cap means a reason: a module within 25 lines of the 450-line cap says why it is one room.

The cap (MAX_LINES in test_imports.py) stops a module from growing without end;
this check stops the other failure, a module squeezed to sit just under it
(issue 42 item 3). A hand-written module over NEAR_CAP lines must carry, in its
module docstring, a line beginning `Why one room:` that says why its job cannot
be split by responsibility; otherwise split it. Generated stubs (*_pb2*, the v1
packages), builds and venvs are exempt. Read from the source text: .pyx/.pxd
files are not Python the AST can parse, so the docstring is the first
triple-quoted string of the file.
"""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
CAP = 450
NEAR_CAP = CAP - 25
SIZED_TREES = ("server", "native", "clients", "benchmarks")
SIZED_SUFFIXES = (".py", ".pyx", ".pxd")
_SKIP_DIRS = {"v1", "_v1", "build", "dist", "node_modules", "__pycache__", ".peers-venv"}
_DOCSTRING = re.compile(r'\A(?:\s*#[^\n]*\n|\s*\n)*\s*[rRbBuU]?("""|\'\'\')(.*?)\1', re.S)
REASON = re.compile(r"^\s*Why one room:\s*\S", re.M)


def _sources() -> list[pathlib.Path]:
    found = []
    for tree in SIZED_TREES:
        for path in (ROOT / tree).rglob("*"):
            if path.suffix not in SIZED_SUFFIXES or not path.is_file():
                continue
            if "_pb2" in path.name:
                continue
            dirs = path.relative_to(ROOT).parts[:-1]
            if any(
                d in _SKIP_DIRS or d.startswith(".venv") or d.endswith(".egg-info") for d in dirs
            ):
                continue
            found.append(path)
    return found


def docstring(text: str) -> str:
    m = _DOCSTRING.match(text)
    return m.group(2) if m else ""


def near_cap_without_reason() -> dict[str, int]:
    out = {}
    for path in _sources():
        text = path.read_text()
        n = len(text.splitlines())
        if n > NEAR_CAP and not REASON.search(docstring(text)):
            out[str(path.relative_to(ROOT))] = n
    return out


def test_the_check_reads_a_reason_only_from_the_module_docstring():
    assert REASON.search(docstring('"""Job.\n\nWhy one room: one parser.\n"""\nx = 1\n'))
    assert REASON.search(docstring('# cython: x\n"""Job.\nWhy one room: frames.\n"""\n'))
    assert not REASON.search(docstring('"""Job."""\n# Why one room: a comment is not it\n'))
    assert not REASON.search(docstring('x = 1\n"""Why one room: not a module docstring"""\n'))
    assert not REASON.search(docstring('"""Job.\n\nWhy one room:\n"""\n'))  # no reason given


def test_the_check_sees_the_trees_and_skips_generated_stubs():
    seen = {str(p.relative_to(ROOT)) for p in _sources()}
    assert "server/leanrpc/app.py" in seen
    assert "native/trie.pyx" in seen
    assert "clients/python/leanrpc_client/aio.py" in seen
    assert not [p for p in seen if "_pb2" in p or "/v1/" in p]


def test_no_module_within_25_lines_of_the_cap_without_a_reason():
    over = near_cap_without_reason()
    assert not over, (
        f"modules over {NEAR_CAP} lines (cap {CAP}) without a `Why one room:` line in their "
        f"docstring; split them by responsibility, or say why each is one room: {over}"
    )
