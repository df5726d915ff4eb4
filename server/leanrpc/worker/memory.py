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

Measuring cheaply (issue 28): a `TreeMemory` per worker keeps its list of
processes (refreshed at most once a second from
/proc/<pid>/task/<tid>/children, never by scanning all of /proc) and reads
one status file per process per sample, each held open and re-read with
pread, as is /proc/meminfo (a held /proc/<pid> file stays bound to its
process: once it is gone the read fails and counts 0; a reused pid is never
read by mistake). The fd scan for shared-memory files
runs at most once a second, at once when the system's `Shmem` (/proc/meminfo,
one O(1) read) grew by `SHMEM_STEP` since the last scan, and on every sample
once the tree was seen holding one. A memfd written with write(2) charges
`Shmem`, so one cannot grow unseen past `SHMEM_STEP` between two samples.
When the worker runs in its own cgroup (v2, security/cgroups.py), one read of
its `memory.stat` (`anon` + `shmem`: the same sum, memfds included, each page
counted once) replaces all of that.

The watch's poll asks only whether the tree is over its limit (`sample(limit=...)`,
issue 38 item 6). Each process's `/proc/<pid>/statm` (one short line, several
times cheaper for the kernel to write than `status`) gives its resident pages,
anonymous + file + shared memory (`RssAnon` + `RssFile` + `RssShmem`, the same
kernel counters): an upper bound of the process's share of the sum. When the
bounds plus the held shared-memory files are within the limit, so is the sum,
and the poll is answered without reading `status`; otherwise the exact sum is
read and decides. The verdict is the same either way; only a tree whose mmapped
files bring it over the limit pays both reads.

The system's `Shmem` is read with one `sysinfo(2)` call (its `sharedram`, the same
kernel counter NR_SHMEM; leanrpc._native.memwatch), /proc/meminfo only where the
extensions are off: the kernel composes all of meminfo for one line, and one source
per process keeps a base and a later reading comparable. The counter is the kernel's
whole one, inside a container too (where meminfo may be a per-container view): it
can only grow more than the tree's own shared memory, so it asks for more scans,
never fewer.

`native_plan` hands the poll's fast path to the watch's C thread
(native/memwatch.pyx): the statm files and their processes, the held shared-memory
bytes, the Shmem base and when the next list refresh and fd scan are due. The thread
makes those itself once a second (a child the list lacks, or a shared-memory file
held, hands the tree back to this sample), so a busy tree within its limit costs the
event loop nothing.

Owns memory measurement and the default per-worker limit; may import only
the standard library, psutil, core._impl and _native.memwatch (the build
chosen), worker.proctree (the one /proc tree walk) and worker.cgroupmem (what a
worker's own cgroup says).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from typing import NamedTuple

import psutil

from ..core._impl import extensions_disabled
from . import proctree
from .cgroupmem import cgroup_memory_bytes, worker_cgroup_dir

# Chosen here, once: `native_plan` gives a plan only where this is the compiled build, and
# worker/memwatch.py starts the thread only for a tree with a plan.
if extensions_disabled() or not sys.platform.startswith("linux"):
    _native = None  # the poll thread is built on Linux only (setup.py)
else:
    from .._native import memwatch as _native

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


SHMEM_STEP = 16 << 20  # system Shmem growth that forces an fd scan
NATIVE_MAX_PROCESSES = 32  # native/memwatch.pyx's MAX_FDS


class NativePlan(NamedTuple):
    """A tree's numbers for the watch's C thread (`TreeMemory.native_plan`)."""

    statm_fds: tuple[int, ...]  # each process's /proc/<pid>/statm, held open
    held: int  # bytes of the shared-memory files the tree holds open
    shmem_base: int  # the system's Shmem at the last fd scan (or lower since)
    shmem_step: int  # growth over the base that asks for an fd scan
    due: float  # time.monotonic() when the process list and the fd scan are due (then each
    # `rescan_s`: the C thread makes them, and hands the tree back for what it finds)
    cgroup_fd: int = -1  # the worker cgroup's memory.stat, held open: read alone instead
    pids: tuple[int, ...] = ()  # the process of each statm file, the root first
    rescan_s: float = 1.0


_SCAN_EVERY_S = 1.0  # fd scan and process list refresh, at least this often
_STATUS_KEYS = (b"RssAnon:", b"RssShmem:")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 8192)
    finally:
        os.close(fd)


def _status_bytes(pid: int) -> int:
    """`resident_bytes` without text decoding (the hot path)."""
    try:
        data = _read(f"/proc/{pid}/status")
    except OSError:
        return 0
    return _status_value(data)


def _status_value(data: bytes) -> int:
    total = 0
    for key in _STATUS_KEYS:
        at = data.find(key)
        if at >= 0:
            end = data.find(b"\n", at)
            total += int(data[at + len(key) : end].split()[0]) * 1024
    return total


def system_shmem_bytes(data: bytes | None = None) -> int:
    """`Shmem` of /proc/meminfo (all tmpfs, memfd and SysV pages), 0 if unreadable."""
    try:
        data = _read("/proc/meminfo") if data is None else data
    except OSError:
        return 0
    at = data.find(b"\nShmem:")
    if at < 0:
        return 0
    return int(data[at + 7 : data.find(b"\n", at + 1)].split()[0]) * 1024


def tree_pids(root: int) -> list[int]:
    """The root and its descendants, from the children files (CONFIG_PROC_CHILDREN,
    worker/proctree.py's walk); psutil's full /proc scan where those are missing."""
    try:
        return list(proctree.walk(root, strict_root=True))
    except FileNotFoundError as exc:
        if exc.filename and exc.filename.endswith("/children"):
            return _psutil_tree(root)
        return [root]
    except OSError:
        return [root]


def _psutil_tree(root: int) -> list[int]:
    try:
        return [root, *(p.pid for p in psutil.Process(root).children(recursive=True))]
    except psutil.Error:
        return [root]


class TreeMemory:
    """One worker tree's memory (the sum `tree_memory_bytes` defines), cheaply."""

    def __init__(self, root_pid: int, *, cgroup_dir: str | None = None) -> None:
        self._root = root_pid
        self.cgroup_dir = cgroup_dir
        self._pids: list[int] = [root_pid]
        self._listed_at = float("-inf")
        self._scanned_at = float("-inf")
        self._shmem_base = 0
        self.shmem_seen = False  # the tree held a shared-memory file at a scan
        self._held: dict[tuple[int, int], int] = {}
        self.fd_scans = 0  # for tests and the benchmark's profile
        self._status_fds: dict[int, int] = {}  # pid -> its /proc/<pid>/status, held open
        self._statm_fds: dict[int, int] = {}  # pid -> its /proc/<pid>/statm (the poll's bound)
        self.exact_reads = 0  # samples that read the status files (for tests)
        self._meminfo_fd: int | None = None
        self._cgroup_fd: int | None = None  # memory.stat, held for the C thread (native_plan)

    def close(self) -> None:
        """Closes the files held open (the tree is gone)."""
        for fds in (self._status_fds, self._statm_fds):
            for fd in fds.values():
                os.close(fd)
            fds.clear()
        for name in ("_meminfo_fd", "_cgroup_fd"):
            fd = getattr(self, name)
            if fd is not None:
                os.close(fd)
                setattr(self, name, None)

    def __del__(self) -> None:
        self.close()

    def _status(self, pid: int) -> int:
        fd = self._status_fds.get(pid)
        try:
            if fd is None:
                fd = self._status_fds[pid] = os.open(
                    f"/proc/{pid}/status", os.O_RDONLY | os.O_CLOEXEC
                )
            return _status_value(os.pread(fd, 8192, 0))
        except OSError:
            return 0  # gone (or never there): counts nothing

    def _statm_fd(self, pid: int) -> int:
        """`pid`'s /proc/<pid>/statm, held open (OSError when it is gone)."""
        fd = self._statm_fds.get(pid)
        if fd is None:
            fd = self._statm_fds[pid] = os.open(f"/proc/{pid}/statm", os.O_RDONLY | os.O_CLOEXEC)
        return fd

    def _resident(self, pid: int) -> int | None:
        """Resident pages of `pid` in bytes (statm: anonymous + file + shared
        memory), 0 if it is gone, None if its file cannot be read as expected."""
        try:
            data = os.pread(self._statm_fd(pid), 256, 0)
        except OSError:
            return 0  # gone (or never there): counts nothing, as in `_status`
        try:
            return int(data.split(None, 2)[1]) * _PAGE
        except (ValueError, IndexError):
            return None

    def _bound(self) -> int | None:
        """An upper bound of the processes' share of the sum, or None (read it exactly)."""
        total = 0
        for pid in self._pids:
            resident = self._resident(pid)
            if resident is None:
                return None
            total += resident
        return total

    def _system_shmem(self) -> int:
        if _native is not None:
            return _native.shared_memory_bytes()
        try:
            if self._meminfo_fd is None:
                self._meminfo_fd = os.open("/proc/meminfo", os.O_RDONLY | os.O_CLOEXEC)
            return system_shmem_bytes(os.pread(self._meminfo_fd, 8192, 0))
        except OSError:
            return 0

    def native_plan(self) -> NativePlan | None:
        """What the watch's C thread needs to answer the poll as `sample(limit=...)` would
        while the tree stays within it (native/memwatch.pyx), or None where only a Python
        sample can: shared-memory files seen (every sample scans then), a tree of more
        than NATIVE_MAX_PROCESSES, or the extensions off. A tree in its own cgroup is
        watched by its memory.stat alone, as the sample reads it."""
        if _native is None:
            return None
        if self.cgroup_dir is not None:
            try:
                if self._cgroup_fd is None:
                    self._cgroup_fd = os.open(
                        self.cgroup_dir + "/memory.stat", os.O_RDONLY | os.O_CLOEXEC
                    )
            except OSError:
                return None
            return NativePlan((), 0, 0, 0, float("inf"), self._cgroup_fd)
        if self.shmem_seen or len(self._pids) > NATIVE_MAX_PROCESSES:
            return None
        fds, pids = [], []
        for pid in self._pids:
            try:
                fds.append(self._statm_fd(pid))
            except OSError:
                continue  # gone: counts nothing, as in `_resident`
            pids.append(pid)
        if not pids or pids[0] != self._root:
            return None  # the root is gone: the sample says what is left
        return NativePlan(
            statm_fds=tuple(fds),
            held=sum(self._held.values()),
            shmem_base=self._shmem_base,
            shmem_step=SHMEM_STEP,
            due=min(self._listed_at, self._scanned_at) + _SCAN_EVERY_S,
            pids=tuple(pids),
            rescan_s=_SCAN_EVERY_S,
        )

    def _list(self, now: float) -> None:
        self._pids, self._listed_at = tree_pids(self._root), now
        for fds in (self._status_fds, self._statm_fds):
            for pid in [p for p in fds if p not in self._pids]:
                os.close(fds.pop(pid))

    def use_own_cgroup(self) -> None:
        """After the handshake (the REPL has joined its cgroup by then)."""
        if self.cgroup_dir is None:
            self.cgroup_dir = worker_cgroup_dir(self._root)

    def sample(self, *, periodic_scan: bool = True, limit: int | None = None) -> int:
        """Bytes now. `periodic_scan=False` (at release): the fd scan only
        when memfds were seen or the system's Shmem grew, not for its age.
        With `limit` (the watch's poll): when the statm bound plus the held
        shared-memory files is within `limit`, that bound (not the exact sum,
        which is no larger); over it, the exact sum."""
        if self.cgroup_dir is not None:
            value = cgroup_memory_bytes(self.cgroup_dir)
            if value is not None:
                return value
        now = time.monotonic()
        if now - self._listed_at >= _SCAN_EVERY_S:
            self._list(now)
        shmem = self._system_shmem()
        if (
            self.shmem_seen
            or (periodic_scan and now - self._scanned_at >= _SCAN_EVERY_S)
            or shmem - self._shmem_base >= SHMEM_STEP
        ):
            held: dict[tuple[int, int], int] = {}
            for pid in self._pids:
                held.update(_held_shmem(pid))
            self._held, self._scanned_at, self._shmem_base = held, now, shmem
            self.shmem_seen = self.shmem_seen or bool(held)
            self.fd_scans += 1
        else:
            self._shmem_base = min(self._shmem_base, shmem)
        held = sum(self._held.values())
        if limit is not None:
            bound = self._bound()
            if bound is not None and bound + held <= limit:
                return bound + held
        self.exact_reads += 1
        return sum(self._status(pid) for pid in self._pids) + held
