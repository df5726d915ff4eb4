"""What a worker's process tree really holds in memory, and the default limit.

RSS misses memory a process keeps outside its page tables: a memfd (or a
deleted /dev/shm file) written with write(2) and never mapped holds RAM that
no RSS shows. Here a tree's memory is the sum of each process's PSS
(proportional set size, /proc/<pid>/smaps_rollup: shared pages split among
their users, mapped shared memory included) plus every shared-memory file the
tree holds open but has not mapped, counted once by inode.

Owns memory measurement and the default per-worker limit; may import only
the standard library and psutil.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import psutil

# fd link targets that are shared memory (RAM) rather than a file on disk.
_SHMEM_LINKS = ("/memfd:", "/dev/shm/", "/SYSV")
# Share of RAM the workers may use together; the rest is the server's and the system's.
WORKERS_SHARE_OF_RAM = 0.8
MIN_DEFAULT_LIMIT_MB = 1024


def default_memory_limit_mb(workers: int, total_bytes: int | None = None) -> int:
    """RAM x WORKERS_SHARE_OF_RAM / workers, at least MIN_DEFAULT_LIMIT_MB."""
    total = total_bytes if total_bytes is not None else psutil.virtual_memory().total
    return max(MIN_DEFAULT_LIMIT_MB, int(total * WORKERS_SHARE_OF_RAM / max(1, workers) / 2**20))


def effective_memory_limit_mb(configured_mb: int, workers: int) -> int:
    """`limits.max_worker_rss_mb`: > 0 as given, 0 the machine-derived default, < 0 off (0)."""
    if configured_mb > 0:
        return configured_mb
    if configured_mb < 0:
        return 0
    return default_memory_limit_mb(workers)


def pss_bytes(pid: int) -> int:
    """PSS of one process (0 if it is gone or unreadable)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _mapped_inodes(pid: int) -> set[int]:
    inodes = set()
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                fields = line.split(None, 5)
                if len(fields) == 6 and fields[4] != "0" and fields[5].startswith(_SHMEM_LINKS):
                    inodes.add(int(fields[4]))
    except (OSError, ValueError):
        pass
    return inodes


def _held_shmem(pid: int) -> dict[tuple[int, int], int]:
    """(dev, inode) -> bytes of each shared-memory file open in `pid`."""
    held = {}
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return held
    for fd in fds:
        try:
            target = os.readlink(f"{fd_dir}/{fd}")
            if not target.startswith(_SHMEM_LINKS):
                continue
            st = os.stat(f"{fd_dir}/{fd}")
        except OSError:
            continue
        held[(st.st_dev, st.st_ino)] = st.st_blocks * 512
    return held


def tree_memory_bytes(pids: Iterable[int]) -> int:
    """PSS of every process plus the unmapped shared memory they hold, once per inode."""
    total, held, mapped = 0, {}, set()
    for pid in pids:
        total += pss_bytes(pid)
        held.update(_held_shmem(pid))
        mapped |= _mapped_inodes(pid)
    # A mapped memfd is in PSS already.
    return total + sum(size for (_dev, ino), size in held.items() if ino not in mapped)


def tree_memory_of(root: psutil.Process, children: Iterable[psutil.Process]) -> int:
    """`tree_memory_bytes` for a psutil process and its (cached) descendants."""
    return tree_memory_bytes([root.pid, *(child.pid for child in children)])
