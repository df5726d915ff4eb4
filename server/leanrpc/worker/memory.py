"""What a worker's process tree really holds in memory, and the default limit.

RSS misses memory a process keeps outside its page tables: a memfd (or a
deleted /dev/shm file) written with write(2) and never mapped holds RAM that
no RSS shows. Here a tree's memory is, per process, its resident anonymous
and shared-memory pages (`RssAnon` + `RssShmem` of /proc/<pid>/status:
kernel counters, O(1) to read), plus every shared-memory file the tree holds
open, counted once by inode. File-backed pages (mmapped .olean files) are
page cache the kernel can drop and are left out.

Why not PSS from /proc/<pid>/smaps_rollup: it walks the page tables, about
60 ms per 600 MB here, too slow for a 50-100 ms poll on the event loop. The
sum above errs high, never low: a memfd both mapped and held open counts
twice, and shared memory mapped by two processes counts in each.

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


def resident_bytes(pid: int) -> int:
    """RssAnon + RssShmem of one process (0 if it is gone or unreadable)."""
    total = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("RssAnon:", "RssShmem:")):
                    total += int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return 0
    return total


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
    """Resident anonymous and shared memory of every process, plus the shared
    memory files they hold open, once per inode."""
    total, held = 0, {}
    for pid in pids:
        total += resident_bytes(pid)
        held.update(_held_shmem(pid))
    return total + sum(held.values())


def tree_memory_of(root: psutil.Process, children: Iterable[psutil.Process]) -> int:
    """`tree_memory_bytes` for a psutil process and its (cached) descendants."""
    return tree_memory_bytes([root.pid, *(child.pid for child in children)])
