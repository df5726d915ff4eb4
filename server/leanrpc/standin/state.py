"""The stand-in's state: envs, proof states, lineages and process options.

An env or proof state carries a *lineage*, a digest of the request that made
it and of the lineages it was built on (see ``repl.py`` for why). Envs form a
chain through ``parent``; a lookup walks the chain. ``dump``/``load`` are the
pickle format's view of an env.

May import: the standard library and the stand-in's ``elab``.
"""

from __future__ import annotations

import errno
import hashlib

from . import elab

__all__ = ["Options", "Env", "ProofState", "lineage", "map_lines", "io_error_text", "PICKLE_FORMAT"]

PICKLE_FORMAT = "leanrpc-standin-pickle"


def lineage(*parts: str) -> str:
    h = hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=12)
    return h.hexdigest()


class Options:
    """Process options (see ``__main__`` for the command line)."""

    def __init__(self, **kw):
        self.lean_version = "4.19.0"
        self.fork = False
        self.pretty = False
        self.flush = True
        self.sorry_style = "backtick"
        self.import_cost = 0.0
        self.reimport_cost = 0.0
        self.base_memory_mb = 0.0
        # Each later header load builds its own env (memory that only grows).
        self.header_memory_mb = 0.0
        self.cost_per_kchar = 0.0
        self.replay_time_scale = 0.0
        self.fixtures: str | None = None
        self.replay = True
        for k, v in kw.items():
            if not hasattr(self, k):
                raise TypeError(f"unknown option {k}")
            setattr(self, k, v)


class Env:
    __slots__ = ("lineage", "parent", "text", "broken", "mathlib", "_facts", "_vars")

    def __init__(self, lin, parent, text, broken, mathlib):
        self.lineage = lin
        self.parent = parent
        self.text = text
        self.broken = broken
        self.mathlib = mathlib
        self._facts = None
        self._vars = None

    def facts(self) -> elab.Facts:
        if self._facts is None:
            self._facts = elab.facts_of(self.text)
        return self._facts

    def chain(self) -> list[Env]:
        out = []
        e = self
        while e is not None:
            out.append(e)
            e = e.parent
        out.reverse()
        return out

    def lookup(self, name: str):
        e = self
        while e is not None:
            if e.text:
                info = e.facts().decls.get(name)
                if info is not None:
                    return info
            e = e.parent
        return None

    def variables(self) -> list:
        """`variable` binders in scope, oldest first (memoised along the chain)."""
        if self._vars is None:
            # iterative, so that very deep chains cannot hit the recursion limit
            pending = []
            e = self
            while e is not None and e._vars is None:
                pending.append(e)
                e = e.parent
            acc = e._vars if e is not None else []
            for e in reversed(pending):
                own = e.facts().variables if e.text and "variable" in e.text else []
                acc = acc + own if own else acc
                e._vars = acc
        return self._vars

    def dump(self) -> dict:
        return {
            "lineage": self.lineage,
            "texts": [e.text for e in self.chain()],
            "broken": self.broken,
            "mathlib": self.mathlib,
        }

    @staticmethod
    def load(d: dict) -> Env:
        parent = None
        texts = d.get("texts") or [""]
        for t in texts[:-1]:
            parent = Env("", parent, t, False, False)
        return Env(d["lineage"], parent, texts[-1], bool(d.get("broken")), bool(d.get("mathlib")))


class ProofState:
    __slots__ = ("lineage", "goals", "env", "sorry")

    def __init__(self, lin, goals, env, sorry):
        self.lineage = lin
        self.goals = goals
        self.env = env
        self.sorry = sorry


def map_lines(obj, line_map: list[int]):
    """Copy of a response with every position's line sent through line_map."""
    if type(obj) is dict:
        if "line" in obj and "column" in obj and len(obj) == 2:
            line = obj["line"]
            if type(line) is int and 1 <= line <= len(line_map):
                return {"line": line_map[line - 1], "column": obj["column"]}
            return obj
        return {k: map_lines(v, line_map) for k, v in obj.items()}
    if type(obj) is list:
        return [map_lines(v, line_map) for v in obj]
    return obj


def io_error_text(e: OSError, path: str) -> str:
    names = {
        errno.ENOENT: "no such file or directory",
        errno.EACCES: "permission denied",
        errno.EISDIR: "is a directory",
        errno.ENOTDIR: "not a directory",
        errno.EEXIST: "already exists",
        errno.EROFS: "read-only file system",
    }
    code = e.errno or 0
    what = names.get(code) or (e.strerror or str(e)).lower()
    return f"{what} (error code: {code})\n  file: {path}"
