"""The one walk of a process tree through /proc/<pid>/task/<tid>/children.

Owns: `children(pid)` (every thread's children file, so a child forked by
any thread is found; needs CONFIG_PROC_CHILDREN) and `walk(root)` (each
process of the tree once, parents before their children). worker/launcher.py
(killing a tree), worker/memory.py (measuring one) and worker/audit.py (the
thief check, which reads through its own directory fds) all walk with it.
security/enter.py keeps a stdlib-only twin (`_descendants`): the sandbox entry
runs as a script that imports nothing of leanrpc; tests/security checks that
the two agree.
May import: the standard library only.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Iterator

__all__ = ["children", "descendants", "walk"]


def children(pid: int) -> list[int]:
    """`pid`'s children, from each of its threads' children file; OSError when
    `pid` is gone (or its task folder cannot be read)."""
    out: list[int] = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out.extend(int(c) for c in f.read().split())
        except FileNotFoundError:
            if tid == str(pid):
                raise  # the main thread's file: no children files here, or the process is gone
        except OSError:
            continue  # a thread that ended meanwhile
    return out


def walk(
    root: int,
    children_of: Callable[[int], list[int]] = children,
    *,
    skip: tuple[type[BaseException], ...] = (OSError,),
    strict_root: bool = False,
) -> Iterator[int]:
    """Each process of `root`'s tree once, `root` first and parents before
    their children. A process whose children cannot be read (`skip`: it
    ended meanwhile) is still yielded, with no children; with `strict_root`
    the root's error is raised instead (the caller has a fallback)."""
    seen: set[int] = set()
    todo = collections.deque([root])
    while todo:
        pid = todo.popleft()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            below = children_of(pid)
        except skip:
            if strict_root and pid == root:
                raise
            below = []
        yield pid
        todo.extend(below)


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (not `pid` itself), parents first."""
    return [p for p in walk(pid) if p != pid]
