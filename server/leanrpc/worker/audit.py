"""The thief check: who in the REPL's process tree can touch our pipes.

Owns: `PipeAudit`, which records a baseline of the REPL's process tree after
warm-up and, after every fenced exchange, checks from /proc (the server is the
parent, so it may read its child's /proc entries) that
  * exactly one thread is blocked reading the stdin pipe, and it is the main
    thread of the process that read it at warm-up;
  * no other thread is blocked in a read on any fd that refers to our pipes,
    nor in poll/select/epoll (a thread waiting to steal the next request);
  * every process of the tree holds exactly the pipe fds it held at warm-up
    (fds 0/1/2 still the original pipes after a dup2(), no dup'd copies, no
    new process holding them);
  * the thread count stays within the baseline plus an allowance (Lean's task
    pool grows with use);
  * the kernel's per-thread I/O accounting (/proc/<pid>/task/<tid>/io) shows
    that the main thread itself read at least every byte we sent in the
    exchange and wrote at least every byte we received. A thief that took a
    request off the pipe and answered it, and then went back to sleep before
    this audit, leaves the main thread's counters short.
Cost (issue 28): each process's /proc/<pid>/task and /proc/<pid>/fd are
opened once and reused (openat, readlinkat, listdir on the directory fd); the
tree walk and the thread listing share one pass. The files read at every
audit (each process's main thread's `syscall` and `children`, the REPL's
`stat`, the reader thread's `io`) are held open and re-read with pread:
each stays bound to that process, so once it is gone its reads fail and a
reused pid is never read by mistake. Whether the process still runs is asked
only when a snapshot does not settle at once (a zombie never shows a thread
reading its input), and while the reader thread is not back in a read call
(still writing its answer) the audit waits on that one file, not on whole
snapshots. Every thread's syscall is still read at every audit:
auditing only the threads whose I/O counters moved would miss exactly the
thief we look for, one parked in read() or poll() on our pipes, waiting for
the next request; it has moved no byte yet.
May import: the standard library, worker.proctree (the one /proc tree walk) and
worker.procfs (the held /proc handles and their readers).

Why: a thread started by a snippet (`IO.asTask` in real Lean) can read the
REPL's stdin and answer a request, fence included, before the main loop sees
it; the nonce alone cannot tell. What the thread cannot fake is the kernel's
view of which thread waits on which fd. docs/SECURITY.md, "Threat model:
forged and stolen verdicts", says what this costs and what remains possible.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import platform
import time

from . import procfs, proctree

__all__ = ["PipeAudit", "ProcessGone", "audit_available"]


class ProcessGone(Exception):
    """The REPL exited before the audit could look at it."""


# Syscalls that wait for input on an fd, by architecture: the read family
# (the fd is the first argument) and the poll family (the fds are behind a
# pointer, so any of them in a non-main thread counts).
_SYSCALLS = {
    "x86_64": {
        "read": frozenset(
            {0, 17, 19, 45, 47, 275, 295, 327}
        ),  # read pread64 readv recvfrom recvmsg splice preadv preadv2
        "wait": frozenset(
            {7, 23, 232, 270, 271, 281, 441}
        ),  # poll select epoll_wait pselect6 ppoll epoll_pwait epoll_pwait2
    },
    "aarch64": {
        "read": frozenset({63, 65, 67, 69, 76, 207, 212, 286}),
        "wait": frozenset({22, 72, 73, 441}),
    },
}
_MACHINE = platform.machine()

# The settle wait's first pauses (see `PipeAudit._settled`): a few short
# blocking sleeps before the event loop's timers, whose epoll timeout rounds
# any pause up to a whole millisecond. Measured (issue 28, 2 cores): the REPL
# that just answered was not yet back in its read at 63% of the audits,
# because the server's wakeup had taken its core. Waiting on a loop timer,
# those audits took 1.37 ms on average (their look included); after one
# 50 us sleep, 0.38 ms, and every one of them settled after that sleep.
_NUDGES = 4
_NUDGE_S = 50e-6


def audit_available(pid: int) -> bool:
    """Whether this kernel and our privileges let us read `pid`'s threads."""
    if _MACHINE not in _SYSCALLS:
        return False
    try:
        with open(f"/proc/{pid}/syscall") as f:
            f.read()
        os.listdir(f"/proc/{pid}/fd")
        return True
    except OSError:
        return False


@dataclasses.dataclass
class _Snapshot:
    pipe_fds: dict[int, dict[int, int]]  # pid -> {fd: inode} for fds on our pipes
    threads: int  # threads in processes that hold our pipes
    stdin_readers: list[tuple[int, int]]  # (pid, tid) blocked reading the stdin pipe
    suspects: list[str]  # other threads waiting on our pipes / in poll


class PipeAudit:
    def __init__(
        self,
        root_pid: int,
        inodes: tuple[int, int, int],
        thread_allowance: int = 64,
        settle_s: float = 2.0,
    ) -> None:
        self._root = root_pid
        self._stdin, self._stdout, self._stderr = inodes
        self._ours = frozenset(inodes)
        self._syscalls = _SYSCALLS.get(_MACHINE, {"read": frozenset(), "wait": frozenset()})
        self._allowance = thread_allowance
        self._settle_s = settle_s
        self._baseline: _Snapshot | None = None
        self._reader: tuple[int, int] | None = None
        self._reader_io: tuple[int, int] = (0, 0)  # main thread's (rchar, wchar) at the last audit
        self._dirs = procfs.ProcDirs()  # /proc directories of the tree, held open
        self.checks = 0  # audits run, and snapshots they took (a
        self.snapshots = 0  # snapshot more when the REPL had not settled)

    @property
    def has_baseline(self) -> bool:
        return self._baseline is not None

    async def record_baseline(self) -> str | None:
        """Takes the warm-up picture; returns a reason if it already looks wrong.

        Raises ProcessGone when the REPL is no longer there to look at.
        """
        snapshot, problem = await self._settled()
        if problem is not None:
            return problem
        self._baseline = snapshot
        self._reader = snapshot.stdin_readers[0]
        try:
            self._reader_io = self._thread_io()
        except OSError as exc:
            return f"cannot read the REPL's I/O accounting: {exc}"
        return None

    async def check(self, sent: int = 0, received: int = 0) -> str | None:
        """None when the tree looks as at warm-up and the main thread moved
        at least `sent` bytes in and `received` bytes out since the last
        audit; else what changed. Raises ProcessGone, also when the REPL died
        while it was looked at (a kill -9 mid-audit fails a look first): the
        answer is withheld either way, and a death is counted as a crash, not
        as a forgery."""
        problem = await self._check(sent, received)
        if problem is not None and not self._running():
            raise ProcessGone(self._root)
        return problem

    async def _check(self, sent: int, received: int) -> str | None:
        if self._baseline is None:
            return await self.record_baseline()
        self.checks += 1
        snapshot, problem = await self._settled()
        if problem is not None:
            return problem
        if snapshot.stdin_readers != [self._reader]:
            return f"the thread reading the REPL's input changed: {snapshot.stdin_readers} (was {self._reader})"
        if snapshot.pipe_fds != self._baseline.pipe_fds:
            return f"file descriptors on the REPL's pipes changed: {snapshot.pipe_fds} (was {self._baseline.pipe_fds})"
        if snapshot.threads > self._baseline.threads + self._allowance:
            return (
                f"the REPL runs {snapshot.threads} threads, over its {self._baseline.threads} at warm-up "
                f"plus the allowance of {self._allowance}"
            )
        try:
            rchar, wchar = self._thread_io()
        except OSError as exc:
            return f"cannot read the REPL's I/O accounting: {exc}"
        read, wrote = rchar - self._reader_io[0], wchar - self._reader_io[1]
        self._reader_io = (rchar, wchar)
        if read < sent or wrote < received:
            return (
                f"the REPL's main thread read {read} of the {sent} bytes sent and wrote {wrote} of the "
                f"{received} bytes received: another thread answered"
            )
        return None

    async def _settled(self) -> tuple[_Snapshot, str | None]:
        """Snapshots until the main thread is back at reading its input (it
        may still be writing the fence's answer); suspects fail then.
        Waits without blocking the event loop, but for its first
        `_NUDGES` pauses of `_NUDGE_S` (0.2 ms at most): a sleep that lets
        the REPL take back the core it is waiting for, where a loop timer
        would keep the REPL idle a whole millisecond. After the baseline,
        one read of the reader thread's syscall (a file held open) says when
        it is back in a read before the whole tree is looked at: a REPL
        still writing costs that read per wait, not a snapshot (issue 28)."""
        deadline = None
        pause = 0.0002
        nudges = 0
        snapshot = _Snapshot({}, 0, [], [])
        while True:
            if self._reader is None or self._reader_reads():
                self.snapshots += 1
                try:
                    snapshot = self._snapshot()
                except OSError as exc:
                    if not self._running():
                        raise ProcessGone(self._root) from None
                    return _Snapshot({}, 0, [], []), f"cannot read the REPL's /proc entries: {exc}"
                if snapshot.suspects:
                    return snapshot, "; ".join(snapshot.suspects[:4])
                if len(snapshot.stdin_readers) > 1:
                    return snapshot, (
                        f"{len(snapshot.stdin_readers)} threads are reading the REPL's input: "
                        f"{snapshot.stdin_readers}"
                    )
                if len(snapshot.stdin_readers) == 1:
                    return snapshot, None
            # Nobody reads the input: still writing its answer, or gone (a zombie has no thread in a syscall).
            if not self._running():
                raise ProcessGone(self._root)
            if deadline is None:
                deadline = time.monotonic() + self._settle_s
            elif time.monotonic() >= deadline:
                return (
                    snapshot,
                    f"no thread went back to reading the REPL's input within {self._settle_s} s",
                )
            if nudges < _NUDGES:
                # Usually the REPL is one step from its read, but waiting for
                # the core we woke up on: hand the core over for a moment.
                nudges += 1
                time.sleep(_NUDGE_S)
                continue
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.02)

    def _reader_reads(self) -> bool:
        """Whether the baseline's reader thread is in a read call now (any fd:
        the snapshot then says which); True when its file cannot be read, so
        the snapshot's own error handling decides."""
        pid, tid = self._reader
        try:
            fields = procfs.pread(self._dirs.get(pid).held(f"{tid}/syscall")).split()
        except OSError:
            return True
        return len(fields) >= 2 and fields[0].isdigit() and int(fields[0]) in self._syscalls["read"]

    def _running(self) -> bool:
        """False once the REPL is gone or a zombie (exited, not yet reaped)."""
        try:
            return procfs.running_state(procfs.pread(self._dirs.get(self._root).held("../stat")))
        except OSError:
            return False

    def _thread_io(self) -> tuple[int, int]:
        """(rchar, wchar) of the reader thread: bytes its read and write calls moved."""
        pid, tid = self._reader
        return procfs.io_counts(procfs.pread(self._dirs.get(pid).held(f"{tid}/io")))

    def _snapshot(self) -> _Snapshot:
        pipe_fds: dict[int, dict[int, int]] = {}
        threads = 0
        readers: list[tuple[int, int]] = []
        suspects: list[str] = []
        seen: list[int] = []
        held: dict[int, tuple[procfs.PidDir, list[int]]] = {}

        def children_of(pid: int) -> list[int]:  # walked with the threads: one pass
            pid_dir, tids = self._threads_of(pid)
            below = [
                int(c) for tid in tids for c in self._thread_file(pid_dir, tid, "children").split()
            ]
            held[pid] = pid_dir, tids
            return below

        for pid in proctree.walk(
            self._root, children_of, skip=(FileNotFoundError, ProcessLookupError)
        ):
            seen.append(pid)
            if pid not in held:
                continue
            pid_dir, tids = held[pid]
            fds = self._pipe_fds(pid_dir)
            if not fds:
                continue
            pipe_fds[pid] = fds
            threads += len(tids)
            for tid in tids:
                waits = self._waits_on(pid_dir, tid)
                if waits is None:
                    continue
                kind, fd = waits
                inode = None
                if kind == "read" and fd is not None:
                    inode = fds[fd] if fd in fds else procfs.fd_inode_at(pid_dir.fd, fd)
                if kind == "read" and inode == self._stdin:
                    readers.append((pid, tid))
                    if tid != pid:
                        suspects.append(
                            f"thread {tid} of process {pid} (not its main thread) is reading the REPL's input"
                        )
                elif kind == "read" and inode in self._ours:
                    suspects.append(
                        f"thread {tid} of process {pid} is reading fd {fd}, one of the REPL's pipes"
                    )
                elif kind == "wait" and tid != pid:
                    suspects.append(
                        f"thread {tid} of process {pid} is waiting in poll/select/epoll"
                    )
        self._dirs.keep(seen)
        return _Snapshot(pipe_fds, threads, sorted(readers), suspects)

    def _threads_of(self, pid: int) -> tuple[procfs.PidDir, list[int]]:
        """The process's held directories and its thread ids. A held directory
        that fails (its process exited) is dropped and /proc/<pid> opened
        afresh once, so a new process that reused the pid is still seen."""
        for fresh in (False, True):
            if fresh:
                self._dirs.drop(pid)
            pid_dir = self._dirs.get(pid)
            try:
                return pid_dir, [int(t) for t in os.listdir(pid_dir.task)]
            except (FileNotFoundError, ProcessLookupError):
                if fresh:
                    self._dirs.drop(pid)
                    raise
        raise AssertionError("unreachable")

    def _thread_file(self, pid_dir: procfs.PidDir, tid: int, name: str) -> bytes:
        """/proc/<pid>/task/<tid>/<name>: held open for each process's main
        thread (read at every audit; a worker tree has few processes: the
        sandbox monitor and the REPL), opened afresh for the other threads (a
        Lean process runs many: holding theirs would cost fds)."""
        if tid == pid_dir.pid:
            return procfs.pread(pid_dir.held(f"{tid}/{name}"))
        return procfs.read_at(f"{tid}/{name}", pid_dir.task)

    def _waits_on(self, pid_dir: procfs.PidDir, tid: int) -> tuple[str, int | None] | None:
        try:
            fields = self._thread_file(pid_dir, tid, "syscall").split()
        except (FileNotFoundError, ProcessLookupError):
            return None
        if len(fields) < 2 or not fields[0].lstrip(b"-").isdigit():
            return None  # "running", or no syscall
        number = int(fields[0])
        if number in self._syscalls["read"]:
            return "read", int(fields[1], 16)
        if number in self._syscalls["wait"]:
            return "wait", None
        return None

    def _pipe_fds(self, pid_dir: procfs.PidDir) -> dict[int, int]:
        found = {}
        try:
            names = os.listdir(pid_dir.fd)
        except (FileNotFoundError, ProcessLookupError):
            return found
        for name in names:
            inode = procfs.fd_inode_at(pid_dir.fd, int(name))
            if inode in self._ours:
                found[int(name)] = inode
        return found

    def close(self) -> None:
        """Closes the /proc directories held open (the REPL is gone)."""
        self._dirs.keep([])
