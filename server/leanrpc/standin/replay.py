"""The replay index a stand-in process answers from, and its on-disk cache.

The raw index (``record.build``) holds, per request key, one template for
every transcript set that recorded it. Several sets may hold the same key (the
same request in the same state) with version-dependent answers. At load time
each key resolves to the set that best matches the process: the nearest Lean
version, then the same fork-ness, then the newer version.

The raw index is cached with marshal under ``$TMPDIR/leanrpc-standin-<uid>/``
(or ``$LEANRPC_STANDIN_CACHE_DIR``), one file per fixtures root and stand-in
copy, stamped with the fixture files' names, sizes and mtimes, the Python
version and the stand-in's own source files, so a worker start only loads it. A cache not owned by the current user is ignored.

Owns: ``Index`` (templates by key, the Kimina table) and ``load_index``.
Where fixtures are: ``fixtures.py``; recording them: ``record.py``; Kimina
matching: ``kimina.py``.
May import: the stand-in's ``fixtures``, ``kimina``, ``record``, ``state``
and the standard library.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys

from . import kimina
from .fixtures import find_fixtures, version_number
from .record import build
from .state import Options

__all__ = ["Index", "load_index", "load_raw", "cache_path"]

FORMAT = 4  # bump when keys, lineages or templates change meaning


class Index:
    def __init__(self, raw: dict, opts: Options):
        want = version_number(opts.lean_version)
        ranks = []
        for _, version, fork in raw["sets"]:
            v = version_number(version)
            ranks.append((abs(v - want), fork != opts.fork, -v))
        entries = {}
        for key, cands in raw["entries"].items():
            if len(cands) == 1:
                entries[key] = cands[0][1]
            else:
                entries[key] = min(cands, key=lambda c: ranks[c[0]])[1]
        self.entries: dict = entries
        self.kimina: dict = raw["kimina"]
        self.problems: list[str] = raw["problems"]
        self.sets = raw["sets"]

    def match_kimina(self, text: str):
        """(messages with user line numbers, recorded seconds) or None."""
        return kimina.match(self.kimina, text)


# --------------------------------------------------------------------------
# cache


def _stamp(root: str) -> tuple:
    files = []
    for sub in ("repl", "leaninteract", os.path.join("kimina", "match")):
        top = os.path.join(root, sub)
        for d, dirs, names in os.walk(top):
            dirs.sort()
            for n in sorted(names):
                try:
                    st = os.stat(os.path.join(d, n))
                except OSError:
                    continue
                files.append(
                    (os.path.relpath(os.path.join(d, n), root), st.st_size, st.st_mtime_ns)
                )
    # Every source file of the stand-in: any of them may change what a
    # recorded request's key or template is.
    here = os.path.dirname(os.path.abspath(__file__))
    code = []
    for n in sorted(os.listdir(here)):
        if n.endswith(".py"):
            st = os.stat(os.path.join(here, n))
            code.append((n, st.st_size, st.st_mtime_ns))
    return (FORMAT, sys.version, tuple(code), _digest(repr(files)))


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def cache_path(root: str) -> str:
    base = os.environ.get("LEANRPC_STANDIN_CACHE_DIR") or os.path.join(
        os.environ.get("TMPDIR") or "/tmp", f"leanrpc-standin-{os.getuid()}"
    )
    # One file per fixtures root *and* stand-in copy: checkouts side by side
    # (worktrees) would otherwise overwrite each other's cache, and each
    # fresh worker would rebuild the index (seconds) on its first lookup.
    here = os.path.dirname(os.path.abspath(__file__))
    key = os.path.realpath(root) + "\0" + os.path.realpath(here)
    digest = hashlib.blake2b(key.encode(), digest_size=10).hexdigest()
    return os.path.join(base, f"index-{digest}.marshal")


def _owned(path: str) -> bool:
    # Only trust a cache this user wrote in a directory nobody else can write.
    try:
        st = os.stat(path)
        dst = os.stat(os.path.dirname(path))
    except OSError:
        return False
    uid = os.getuid()
    return st.st_uid == uid and dst.st_uid == uid and not (dst.st_mode & 0o022)


def load_raw(root: str) -> dict:
    stamp = _stamp(root)
    path = cache_path(root)
    if _owned(path):
        try:
            with open(path, "rb") as f:
                cached = marshal.load(f)
            if type(cached) is dict and cached.get("stamp") == stamp:
                return cached
        except Exception:  # noqa: BLE001 - any unreadable cache is rebuilt
            pass
    raw = build(root)
    raw["stamp"] = stamp
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            marshal.dump(raw, f)
        os.replace(tmp, path)
    except (OSError, ValueError):
        pass
    return raw


def load_index(opts: Options) -> Index | None:
    root = find_fixtures(opts.fixtures)
    if root is None:
        return None
    return Index(load_raw(root), opts)
