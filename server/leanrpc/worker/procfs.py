"""Held /proc handles for the thief check (worker/audit.py) and the small readers on them.

Owns: `PidDir` (one process's task and fd directories and the files re-read at every
audit, opened once), `ProcDirs` (those of a tree, dropped as processes go), and the
parsers of what they read (`running_state`, `io_counts`, pipe inodes). A handle stays
bound to its process: after the process exits its reads fail, so a reused pid is never
read by mistake. May import: the standard library.
"""

from __future__ import annotations

import os

__all__ = [
    "PidDir",
    "ProcDirs",
    "fd_inode_at",
    "io_counts",
    "pread",
    "read_at",
    "running_state",
]


class PidDir:
    """/proc/<pid>/task and /proc/<pid>/fd, opened once per process and
    reused by every audit (listdir rewinds a directory fd; reads go through
    openat), and the files read at every audit (`held`, paths relative to
    the task directory), re-read with pread. A directory or file fd stays
    bound to its process: after the process exits its reads fail, so a
    reused pid can never be read by mistake."""

    __slots__ = ("pid", "task", "fd", "_files")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        base = os.open(f"/proc/{pid}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            self.task = os.open("task", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=base)
            try:
                self.fd = os.open("fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=base)
            except OSError:
                os.close(self.task)
                raise
        finally:
            os.close(base)
        self._files: dict[str, int] = {}

    def held(self, path: str) -> int:
        """An fd on `path` (relative to /proc/<pid>/task), opened on first use."""
        fd = self._files.get(path)
        if fd is None:
            fd = self._files[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC, dir_fd=self.task)
        return fd

    def close(self) -> None:
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()
        os.close(self.task)
        os.close(self.fd)


class ProcDirs:
    def __init__(self) -> None:
        self._open: dict[int, PidDir] = {}

    def get(self, pid: int) -> PidDir:
        pid_dir = self._open.get(pid)
        if pid_dir is None:
            pid_dir = self._open[pid] = PidDir(pid)
        return pid_dir

    def drop(self, pid: int) -> None:
        pid_dir = self._open.pop(pid, None)
        if pid_dir is not None:
            pid_dir.close()

    def keep(self, pids: list[int]) -> None:
        for pid in [p for p in self._open if p not in pids]:
            self._open.pop(pid).close()

    def __del__(self) -> None:
        self.keep([])


def read_at(path: str, dir_fd: int) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def fd_inode_at(fd_dir: int, fd: int) -> int | None:
    try:
        target = os.readlink(str(fd), dir_fd=fd_dir)
    except OSError:
        return None
    if target.startswith("pipe:["):
        return int(target[6:-1])
    return None


def pread(fd: int) -> bytes:
    return os.pread(fd, 4096, 0)


def running_state(stat: bytes) -> bool:
    """False for the state of a zombie (exited, not yet reaped) or a dead task."""
    try:
        state = stat.rsplit(b")", 1)[1].split()[0]
    except IndexError:
        return False
    return state not in (b"Z", b"X", b"x")


def io_counts(io: bytes) -> tuple[int, int]:
    """(rchar, wchar) of a task's io file."""
    rchar = io.index(b"rchar: ") + 7
    wchar = io.index(b"wchar: ") + 7
    return int(io[rchar : io.index(b"\n", rchar)]), int(io[wchar : io.index(b"\n", wchar)])
