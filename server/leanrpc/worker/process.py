"""One REPL child process: launch, exit watch, stderr tail, graded stop, memory.

Owns: starting the child through the `Launcher` seam, what its exit means
(an exit hook kills the rest of its process group the moment the child dies,
before it is reaped: worker/pipes.py watches the pidfd), the stderr tail, the graded
stop (close stdin, SIGTERM, SIGKILL; `ShutdownRung` says how far it went),
resident memory of the process tree, and the inodes of our three pipes (for
the fence audit).
May import: leanrpc.worker.launcher, leanrpc.worker.memory, leanrpc.worker.pipes,
leanrpc.errors, psutil, the standard library. Knows nothing of the REPL protocol or of worker states.

Issue 14 item 4: a crash is described only after the exit status is known
(`exit_description` waits for it), so a worker killed by a signal is always
reported with the signal's name, even when stdout EOF arrives first.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import signal
import time

import psutil

from .launcher import Launcher, LaunchSpec, kill_process_group
from .memory import TreeMemory
from .pipes import PipedProcess

log = logging.getLogger("leanrpc.worker")

STDERR_TAIL_BYTES = 8192
# How old the exact release sample behind the import estimate may be (worker/memory.py
# refreshes a tree's process list and fd scan on the same period).
_EXACT_EVERY_S = 1.0
READ_CHUNK = 1 << 16

# What a REPL prints when an allocation fails (Lean's runtime, C++, the
# stand-in's Python) before it exits.
OUT_OF_MEMORY_MARKERS = (
    "INTERNAL PANIC: out of memory",
    "std::bad_alloc",
    "MemoryError",
    "leanrpc sandbox: out of memory",
)


class ShutdownRung(enum.Enum):
    """How far the graded shutdown had to go."""

    EXITED = "exited"  # already gone
    EOF = "eof"  # exited after stdin closed
    TERM = "term"  # needed SIGTERM
    KILL = "kill"  # needed SIGKILL


class ReplProcess:
    """The child and its pipes. `launch()` once; every other call is safe
    before, during and after the child's death."""

    def __init__(self, name: str, spec: LaunchSpec, launcher: Launcher) -> None:
        self.name = name
        self._spec = spec
        self._launcher = launcher
        self.process: PipedProcess | None = None
        self.pid: int | None = None
        self.exited = asyncio.Event()  # set once the exit status is known
        self._stderr_tail = bytearray()
        self.stderr_bytes = 0
        self._stderr_task: asyncio.Task | None = None
        self._psutil: psutil.Process | None = None
        self.pipe_inodes: tuple[int, int, int] = (-1, -1, -1)
        self.memory: TreeMemory | None = None
        # The last exact release sample: when, and with how many headers held (`memory_at_release`).
        self._exact_at = float("-inf")
        self._exact_headers = -1

    @property
    def argv(self) -> list[str]:
        return self._spec.argv

    async def launch(self) -> None:
        """Spawns the child. Raises OSError or ValueError when it cannot."""
        self.process = await self._launcher.launch(self._spec)
        self.pid = self.process.pid
        self.pipe_inodes = self._read_pipe_inodes()
        try:
            self._psutil = psutil.Process(self.pid)
        except psutil.Error:
            self._psutil = None
        self.memory = TreeMemory(self.pid)
        self._watch_exit()
        self._stderr_task = asyncio.create_task(self._read_stderr(), name=f"{self.name}-stderr")

    # -- exit ------------------------------------------------------------------

    @property
    def returncode(self) -> int | None:
        """Exit status as asyncio reports it (negative: killed by that signal)."""
        return self.process.returncode if self.process is not None else None

    def _watch_exit(self) -> None:
        """On the child's exit: kill its process group, then know its status.

        A grandchild left behind (a shelled-out tool, `lake env`) keeps stdout
        open, so EOF alone would leave the worker half-alive and the orphan
        running. The kill is an exit hook of the process (worker/pipes.py):
        it runs on the zombie, before the reap, so the group id is still the
        child's own.
        """
        pid = self.pid
        self.process.add_exit_hook(lambda: kill_process_group(pid))
        asyncio.create_task(self._wait_reaped(), name=f"{self.name}-exit")

    async def _wait_reaped(self) -> None:
        assert self.process is not None
        await self.process.wait()
        self.exited.set()

    async def wait_exit(self, timeout: float) -> bool:
        """Waits until the exit status is known; False on timeout."""
        if self.process is None:
            return True
        if self.exited.is_set():
            return True
        try:
            await asyncio.wait_for(self.exited.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False

    async def exit_description(self, wait_s: float = 5.0) -> str:
        """ " (killed by SIGKILL)", " (exit status 1)", after waiting for the
        status (up to `wait_s`; a child still running after that is killed)."""
        if self.process is None:
            return ""
        if not await self.wait_exit(wait_s):
            self.kill()
            await self.wait_exit(5.0)
        return describe_status(self.returncode)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process is not None and self.returncode is None:
            kill_process_group(self.process.pid, sig)

    async def stop(self, grace: float) -> ShutdownRung:
        """Graded shutdown: close stdin, then SIGTERM, then SIGKILL; waits."""
        if self.process is None or self.returncode is not None:
            await self.wait_exit(grace)
            return ShutdownRung.EXITED
        rung = ShutdownRung.EOF
        self.close_stdin()
        if not await self.wait_exit(grace / 2):
            rung = ShutdownRung.TERM
            self.kill(signal.SIGTERM)
            if not await self.wait_exit(grace / 2):
                rung = ShutdownRung.KILL
                self.kill(signal.SIGKILL)
                await self.wait_exit(10.0)
        return rung

    async def reap(self, timeout: float = 5.0) -> None:
        """Waits until the child is reaped (no zombie left)."""
        if self.process is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self.process.wait()), timeout)
        except asyncio.TimeoutError:
            kill_process_group(self.process.pid)
            await self.process.wait()
        if self.memory is not None:
            self.memory.close()  # its /proc files, held open

    # -- pipes -----------------------------------------------------------------

    def close_stdin(self) -> None:
        try:
            if (
                self.process is not None
                and self.process.stdin is not None
                and not self.process.stdin.is_closing()
            ):
                self.process.stdin.close()
        except (OSError, RuntimeError):
            pass

    def _read_pipe_inodes(self) -> tuple[int, int, int]:
        """Inodes of the stdin, stdout and stderr pipes (our ends share them),
        read at launch, before any end can be closed (worker/pipes.py)."""
        return tuple(getattr(self.process, "pipe_inodes", (-1, -1, -1)))

    def stderr_tail(self) -> str:
        return self._stderr_tail.decode("utf-8", "replace")

    def out_of_memory_words(self) -> bool:
        tail = self.stderr_tail()[-4000:]
        return any(marker in tail for marker in OUT_OF_MEMORY_MARKERS)

    async def stderr_done(self, timeout: float = 1.0) -> None:
        if self._stderr_task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._stderr_task), timeout)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass

    async def _read_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        stderr = self.process.stderr
        while True:
            chunk = await stderr.read(READ_CHUNK)
            if not chunk:
                return
            self.stderr_bytes += len(chunk)
            self._stderr_tail += chunk
            if len(self._stderr_tail) > STDERR_TAIL_BYTES:
                del self._stderr_tail[: len(self._stderr_tail) - STDERR_TAIL_BYTES]

    # -- memory ----------------------------------------------------------------

    def tree_rss(self, *, periodic_scan: bool = True, limit: int | None = None) -> int:
        """Memory of the process and all its descendants, in bytes: anonymous
        and shared memory, memfds held open included (worker/memory.py). One
        status read per process (or one cgroup file); the process list and
        the fd scan are refreshed on their own clock (TreeMemory). With
        `limit`, an upper bound when that is within it (TreeMemory.sample)."""
        if self.memory is None or self._psutil is None:
            return 0
        return self.memory.sample(periodic_scan=periodic_scan, limit=limit)

    def memory_at_release(self, limit: int, headers: int) -> tuple[int, bool]:
        """The tree's memory when a command ends, and whether it is the exact sum.

        Exact (`tree_rss`: a status read per process) when the import estimate it feeds
        (the worker's `rss_at_release`, pool/dispatch.py) is due: the count of headers
        held changed since the last exact read (an import is what grows a tree most), or
        that read is older than `_EXACT_EVERY_S`. Between those, the memory watch's poll
        answers, as it does during a command: the statm bound when that is within
        `limit`, the exact sum over it (issue 38 item 6: the exact read was about
        0.12 ms of every group's release, the bound's held statm files a few preads)."""
        if self.memory is None or self._psutil is None:
            return 0, True
        now = time.monotonic()
        if headers == self._exact_headers and now - self._exact_at < _EXACT_EVERY_S:
            return self.tree_rss(periodic_scan=False, limit=limit), False
        self._exact_at, self._exact_headers = now, headers
        return self.tree_rss(periodic_scan=False), True

    def tree_within(self, limit: int) -> int:
        """The memory watch's poll: `tree_rss` asked with the limit (a bound within it, or exact)."""
        return self.tree_rss(limit=limit)

    def tree_plan(self):
        """The poll's numbers for the watch's C thread (TreeMemory.native_plan), or None."""
        if self.memory is None or self._psutil is None:
            return None
        return self.memory.native_plan()


def describe_status(code: int | None) -> str:
    if code is None:
        return ""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return f" (killed by {name})"
    return f" (exit status {code})"
