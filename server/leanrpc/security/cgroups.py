"""A cgroup (v2) per worker, where the server may create them.

`WorkerCgroups.create()` finds the server's own cgroup in a cgroup2 mount
and, when it may write there (root, or a delegated subtree), makes
`leanrpc-<server pid>/` below it with one child per worker. The REPL joins its
worker's cgroup before anything else (enter.py); when the REPL exits, the
monitor writes `cgroup.kill` and removes the cgroup. `memory.max` and
`pids.max` are set when those controllers are enabled for the server's
cgroup's children (`cgroup.subtree_control`); otherwise the memory limit is
enforced by polling (worker/memory.py) and processes by RLIMIT_NPROC.
At start-up, `leanrpc-<pid>` cgroups of servers that are gone are killed and
removed.

Owns cgroup discovery and layout; may import only the standard library.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import os
import re

log = logging.getLogger("leanrpc.security")

_STALE = re.compile(r"^leanrpc-(\d+)$")
_numbers = itertools.count(1)
_shared: dict[int, "WorkerCgroups | None"] = {}


def _cgroup2_mounts() -> list[str]:
    points = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                if right.split()[:1] == ["cgroup2"]:
                    points.append(left.split()[4])
    except OSError:
        pass
    return points


def _own_cgroup() -> str | None:
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return None


def writable_base() -> str | None:
    """The server's own cgroup directory, if it may create children there."""
    own = _own_cgroup()
    if own is None:
        return None
    for mount in _cgroup2_mounts():
        path = os.path.normpath(mount + "/" + own)
        if (
            os.path.isdir(path)
            and os.access(path, os.W_OK)
            and os.path.exists(os.path.join(path, "cgroup.procs"))
        ):
            return path
    return None


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _write(path: str, text: str) -> bool:
    try:
        with open(path, "w") as f:
            f.write(text)
        return True
    except OSError:
        return False


def remove(path: str) -> None:
    """Kills whatever is left in the cgroup and removes it (best effort)."""
    _write(os.path.join(path, "cgroup.kill"), "1")
    for child in sorted(os.listdir(path)) if os.path.isdir(path) else []:
        if os.path.isdir(os.path.join(path, child)):
            remove(os.path.join(path, child))
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            import time

            time.sleep(0.01)  # the killed processes are still exiting


def remove_stale(base: str) -> list[str]:
    """Removes `leanrpc-<pid>` cgroups whose server is gone; returns them."""
    removed = []
    for name in os.listdir(base):
        match = _STALE.match(name)
        if match is None or _alive(int(match.group(1))):
            continue
        remove(os.path.join(base, name))
        removed.append(name)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class WorkerCgroups:
    """`leanrpc-<pid>/w-<n>` cgroups below the server's own."""

    def __init__(self, root: str, controllers: frozenset[str]) -> None:
        self.root = root
        self.controllers = controllers

    @classmethod
    def shared(cls) -> "WorkerCgroups | None":
        """One per server process (all its launchers), removed at exit."""
        pid = os.getpid()
        if pid not in _shared:
            _shared[pid] = cls.create()
            if _shared[pid] is not None:
                atexit.register(_shared[pid].close)
        return _shared[pid]

    @classmethod
    def create(cls) -> "WorkerCgroups | None":
        base = writable_base()
        if base is None:
            return None
        try:
            stale = remove_stale(base)
            if stale:
                log.info("removed cgroups of servers that are gone: %s", ", ".join(stale))
            root = os.path.join(base, f"leanrpc-{os.getpid()}")
            os.makedirs(root, exist_ok=True)
        except OSError as exc:
            log.info("no cgroup per worker: %s", exc)
            return None
        available = set(_read(os.path.join(base, "cgroup.subtree_control")).split())
        wanted = available & {"memory", "pids"}
        if wanted:
            _write(
                os.path.join(root, "cgroup.subtree_control"),
                " ".join(f"+{c}" for c in sorted(wanted)),
            )
        enabled = frozenset(_read(os.path.join(root, "cgroup.subtree_control")).split()) & {
            "memory",
            "pids",
        }
        return cls(root, enabled)

    def new(self, memory_max_bytes: int = 0, pids_max: int = 0) -> str:
        """A fresh cgroup for one worker, its limits set where the controllers allow."""
        path = os.path.join(self.root, f"w-{next(_numbers)}")
        os.makedirs(path, exist_ok=True)
        if memory_max_bytes and "memory" in self.controllers:
            _write(os.path.join(path, "memory.max"), str(memory_max_bytes))
            _write(os.path.join(path, "memory.swap.max"), "0")
        if pids_max and "pids" in self.controllers:
            _write(os.path.join(path, "pids.max"), str(pids_max))
        return path

    def describe(self) -> str:
        limits = (
            " and ".join(f"{c}.max" for c in sorted(self.controllers))
            or "no memory/pids controller delegated"
        )
        return f"a cgroup v2 per worker ({limits})"

    def close(self) -> None:
        remove(self.root)
