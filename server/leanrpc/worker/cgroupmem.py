"""What a worker's own cgroup says of its memory (worker/memory.py reads it instead of /proc).

Owns: `worker_cgroup_dir` (the cgroup v2 directory of a REPL when it runs in a worker
cgroup of its own, below the server's, as security/cgroups.py names them) and
`cgroup_memory_bytes` (`anon` + `shmem` of its memory.stat: the sum worker/memory.py
defines, memfds included, each page counted once). Split from worker/memory.py, which
measures a tree from /proc, when that room neared its cap. May import: the standard
library only.
"""

from __future__ import annotations

import os

__all__ = ["cgroup_memory_bytes", "worker_cgroup_dir"]


def _read(path: str) -> bytes:
    with open(path, "rb", buffering=0) as file:
        return file.read(8192)


def worker_cgroup_dir(pid: int) -> str | None:
    """The cgroup v2 directory of `pid` when it is its own worker cgroup
    (below the server's, named by security/cgroups.py), else None."""
    try:
        theirs = next(
            (
                line[3:].strip()
                for line in _read(f"/proc/{pid}/cgroup").decode().splitlines()
                if line.startswith("0::")
            ),
            None,
        )
        ours = next(
            (
                line[3:].strip()
                for line in _read("/proc/self/cgroup").decode().splitlines()
                if line.startswith("0::")
            ),
            None,
        )
        mounts = [
            line.partition(" - ")[0].split()[4]
            for line in _read("/proc/self/mountinfo").decode().splitlines()
            if line.partition(" - ")[2].split()[:1] == ["cgroup2"]
        ]
    except (OSError, IndexError, ValueError):
        return None
    if not theirs or not ours or theirs == ours or "/leanrpc-" not in theirs:
        return None
    if not theirs.startswith(ours.rstrip("/") + "/"):
        return None
    for mount in mounts:
        path = mount.rstrip("/") + theirs
        if os.path.exists(path + "/memory.stat"):
            return path
    return None


def cgroup_memory_bytes(path: str) -> int | None:
    """`anon` + `shmem` of a cgroup's memory.stat, None if unreadable."""
    try:
        data = _read(path + "/memory.stat")
    except OSError:
        return None
    total = 0
    for line in data.splitlines():
        key, _, value = line.partition(b" ")
        if key in (b"anon", b"shmem"):
            total += int(value)
    return total
