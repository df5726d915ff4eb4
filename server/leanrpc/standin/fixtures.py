"""Where the recorded REPL transcripts are, and how to read them.

Sources under a fixtures root (``shared/fixtures``):

* ``repl/test/**`` (upstream, Lean 4.33.0-rc2) and
  ``repl/fork-augustepoiroux/test/**`` (the fork, 4.33.0-rc1);
* ``leaninteract/repl-tests/v<X>/test/**`` (the fork at Lean X).

(Kimina proof outputs, ``kimina/match``, are read by ``kimina.py``.) Base
tests run from their set root, ``test/Mathlib/**`` from ``test/Mathlib``, in
``LC_COLLATE=C`` order like upstream's ``test.sh``; an ``.in`` file is cut
into requests exactly as the REPL reads its input.

Owns: finding the fixtures root, the transcript sets and their Lean versions,
splitting ``.in``/``.expected.out`` files. No recording, no index.
May import: the stand-in's ``wire`` and the standard library.
"""

from __future__ import annotations

import os
import re

from .wire import read_request

__all__ = [
    "FORK_VERSION",
    "REPL_VERSION",
    "find_fixtures",
    "fixture_sets",
    "split_requests",
    "split_responses",
    "transcripts",
    "version_number",
]

REPL_VERSION = "4.33.0-rc2"
FORK_VERSION = "4.33.0-rc1"


def find_fixtures(explicit: str | None = None) -> str | None:
    """The fixtures root: explicit, or ``shared/fixtures`` above the cwd or this package."""
    if explicit:
        return explicit if os.path.isdir(explicit) else None
    for start in (os.getcwd(), os.path.dirname(os.path.abspath(__file__))):
        d = os.path.abspath(start)
        while True:
            cand = os.path.join(d, "shared", "fixtures")
            if os.path.isdir(cand):
                return cand
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
    return None


def version_number(v: str) -> float:
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:-rc(\d+))?", v or "")
    if not m:
        return 0.0
    major, minor, patch, rc = (int(x) if x else 0 for x in m.groups())
    value = major * 10000 + minor * 100 + patch
    if m.group(4):
        value -= 1 - rc / 100.0
    return float(value)


def fixture_sets(root: str) -> list[tuple[str, str, bool, str]]:
    """(name, lean version, fork, set root) for every transcript set present."""
    sets = []
    repl_root = os.path.join(root, "repl")
    if os.path.isdir(os.path.join(repl_root, "test")):
        sets.append(("repl", REPL_VERSION, False, repl_root))
    fork_root = os.path.join(repl_root, "fork-augustepoiroux")
    if os.path.isdir(os.path.join(fork_root, "test")):
        sets.append(("fork", FORK_VERSION, True, fork_root))
    li = os.path.join(root, "leaninteract", "repl-tests")
    if os.path.isdir(li):
        for v in sorted(os.listdir(li)):
            if os.path.isdir(os.path.join(li, v, "test")):
                sets.append(("leaninteract-" + v, v.lstrip("v"), True, os.path.join(li, v)))
    return sets


def transcripts(set_root: str) -> list[tuple[str, str]]:
    """(X.in path, working directory) in the order upstream runs them."""
    out = []
    base = os.path.join(set_root, "test")
    mathlib = os.path.join(base, "Mathlib", "test")
    for d, cwd in ((base, set_root), (mathlib, os.path.join(base, "Mathlib"))):
        if not os.path.isdir(d):
            continue
        names = sorted((n for n in os.listdir(d) if n.endswith(".in")), key=lambda n: n.encode())
        out.extend((os.path.join(d, n), cwd) for n in names)
    return out


def split_requests(data: bytes) -> list[str]:
    """The request texts of an ``.in`` file, exactly as the REPL reads them."""
    # lines end at b"\n" only, as for a stream's readline (not at a lone CR)
    pieces = data.split(b"\n")
    lines = [x + b"\n" for x in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    it = iter(lines)

    def readline():
        return next(it, b"")

    out = []
    while True:
        raw = read_request(readline)
        if not raw:
            return out
        out.append(raw.decode("utf-8", "replace"))


def split_responses(text: str) -> list[str]:
    parts = text.split("\n\n")
    if parts and parts[-1] == "":
        parts.pop()
    return parts
