"""A child process with three pipes we made ourselves, on any asyncio event loop.

Owns: `spawn_with_pipes`, which makes the stdin, stdout and stderr pipes with
os.pipe(), starts the child on its ends with subprocess.Popen, and wraps ours
as asyncio streams (`connect_write_pipe` / `connect_read_pipe`, public loop
API), and `PipedProcess`, the running child: the interface of
asyncio.subprocess.Process that the server uses (pid, returncode, wait,
signals, communicate, stdin/stdout/stderr streams), plus the pipe transports
(`pipe_transport(fd)`) and the pipes' inodes (`pipe_inodes`). Its exit is
seen on a pidfd (`loop.add_reader`): the exit hooks (`add_exit_hook`) run
on the zombie, whose pid and process group cannot be reused yet, and then
the child is reaped.

Why not the loop's own subprocesses: uvloop (libuv) gives a child AF_UNIX
socketpairs, not pipes, and its process object has no pipe transports to
read. The fence audit (worker/audit.py) names the REPL's channel by the
inode a pipe's two ends share, and the stdout reader (worker/stdout.py)
takes the bytes from the pipe transport's callback. libuv also starts a
child with fork(), which in a process running gRPC's threads runs gRPC's
fork handlers (and logs that it skipped them); Popen uses vfork or
posix_spawn. asyncio's default loop would wait for each child on a thread of
its own (ThreadedChildWatcher); the pidfd needs none. With the pipes and the
wait made here, all of it holds on every loop, so the server may run on
uvloop (issue 28; commands/serve.py). May import: the standard library.
"""

from __future__ import annotations

import asyncio
import asyncio.streams
import os
import signal
import subprocess
from typing import Callable

__all__ = ["PipedProcess", "spawn_with_pipes", "write_input"]

STREAM_LIMIT = 2**20


def write_input(stdin: asyncio.StreamWriter, data: bytes) -> None:
    """Writes `data` to a child's input pipe; BrokenPipeError once that pipe is closed.

    Why: once the child is gone, asyncio's loop drops a write to the closed pipe
    transport, while uvloop raises RuntimeError ("the handler is closed"), which had
    reached a client as UNKNOWN (a search killed under it, 2026-12-06). A closed input
    is the worker gone on every loop, and the callers say so (WorkerCrashed)."""
    if stdin.transport.is_closing():
        raise BrokenPipeError("the child's input pipe is closed")
    try:
        stdin.write(data)
    except RuntimeError as exc:  # uvloop: the transport closed under the write
        if stdin.transport.is_closing():
            raise BrokenPipeError(f"the child's input pipe is closed: {exc}") from None
        raise


class _WriteProtocol(asyncio.streams.FlowControlMixin):
    """The stdin pipe's protocol: flow control for StreamWriter.drain()."""


class _ReadProtocol(asyncio.StreamReaderProtocol):
    """A read pipe's protocol. At EOF the transport closes: StreamReaderProtocol
    asks to stay half-open (True), which asyncio's pipe transport ignores but
    uvloop's obeys, and then connection_lost never comes (a stopped worker
    would wait for its stdout's end forever). `received` counts the bytes it
    passed on, so worker/stdout.py knows the reader holds none without
    reading asyncio's private buffer."""

    received = 0

    def data_received(self, data: bytes) -> None:
        self.received += len(data)
        super().data_received(data)

    def eof_received(self) -> bool:
        super().eof_received()
        return False


class PipedProcess:
    """A child started by `spawn_with_pipes`; safe to use after its death."""

    def __init__(self, popen: subprocess.Popen) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdin: asyncio.StreamWriter | None = None
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None
        self._transports: dict[int, asyncio.BaseTransport] = {}
        self.pipe_inodes: tuple[int, int, int] = (-1, -1, -1)
        self._exited = asyncio.Event()
        self._exit_hooks: list[Callable[[], None]] = []
        self._watch_exit()

    def add_exit_hook(self, hook: Callable[[], None]) -> None:
        """`hook()` runs once when the child has exited, before it is reaped
        (its pid and process group id are still its own); at once if it is
        already reaped."""
        if self._exited.is_set():
            hook()
        else:
            self._exit_hooks.append(hook)

    def _watch_exit(self) -> None:
        """Reaps the child when its pidfd says it exited (no thread, no SIGCHLD)."""
        loop = asyncio.get_running_loop()
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # pragma: no cover - kernel < 5.3
            asyncio.ensure_future(self._poll_exit())
            return

        def on_exit() -> None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            self._finish()

        loop.add_reader(pidfd, on_exit)

    async def _poll_exit(self) -> None:  # pragma: no cover - kernel < 5.3
        while True:
            try:
                if os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG):
                    break  # exited, not reaped: the hooks still find the zombie
            except ChildProcessError:
                break  # reaped already
            await asyncio.sleep(0.05)
        self._finish()

    def _finish(self) -> None:
        """The hooks on the zombie, then the reap; the reap happens whatever a hook raises."""
        hooks, self._exit_hooks = self._exit_hooks, []
        try:
            for hook in hooks:
                hook()
        finally:
            self._popen.poll()
            self._exited.set()

    async def _connect(self, fds: tuple[int, int, int], limit: int) -> None:
        """Wraps our ends: `fds` are (stdin write end, stdout read end, stderr read end).
        Each fd is owned by its file object from here on, connected or not."""
        loop = asyncio.get_running_loop()
        files = [os.fdopen(fds[0], "wb", buffering=0)]
        files += [os.fdopen(fd, "rb", buffering=0) for fd in fds[1:]]
        self.pipe_inodes = tuple(os.fstat(f.fileno()).st_ino for f in files)
        connected = 0
        try:
            transport, protocol = await loop.connect_write_pipe(_WriteProtocol, files[0])
            self._transports[0] = transport
            connected = 1
            self.stdin = asyncio.StreamWriter(transport, protocol, None, loop)
            readers = []
            for fd in (1, 2):
                reader = asyncio.StreamReader(limit=limit, loop=loop)
                transport, _ = await loop.connect_read_pipe(
                    lambda reader=reader: _ReadProtocol(reader, loop=loop),
                    files[fd],
                )
                self._transports[fd] = transport
                connected = fd + 1
                readers.append(reader)
            self.stdout, self.stderr = readers
        except BaseException:
            self.close_pipes()
            for f in files[connected:]:
                f.close()
            raise

    def pipe_transport(self, fd: int) -> asyncio.BaseTransport | None:
        """The transport of our end of the child's fd 0, 1 or 2."""
        return self._transports.get(fd)

    @property
    def returncode(self) -> int | None:
        """None while it runs; negative: killed by that signal (asyncio's convention)."""
        return self._popen.returncode

    async def wait(self) -> int:
        await self._exited.wait()
        if self._popen.returncode is None:  # pragma: no cover - reaped elsewhere
            self._popen.wait()
        return self._popen.returncode

    def send_signal(self, sig: int) -> None:
        if self._popen.returncode is None:
            self._popen.send_signal(sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    async def communicate(self, input: bytes | None = None) -> tuple[bytes, bytes]:
        """Writes `input`, closes stdin, reads both outputs to their end, waits."""

        async def feed() -> None:
            if self.stdin is None:
                return
            try:
                if input:
                    write_input(self.stdin, input)
                    await self.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the child did not read it all: its output says why
            finally:
                self.stdin.close()

        async def read(stream: asyncio.StreamReader | None) -> bytes:
            return b"" if stream is None else await stream.read()

        _, out, err = await asyncio.gather(feed(), read(self.stdout), read(self.stderr))
        await self.wait()
        return out, err

    def close_pipes(self) -> None:
        """Closes our ends (the transports close their files)."""
        for transport in self._transports.values():
            if not transport.is_closing():
                transport.close()


async def spawn_with_pipes(
    argv: list[str], *, cwd: str | None, env: dict[str, str], limit: int = STREAM_LIMIT, **extra
) -> PipedProcess:
    """Starts `argv` in a new session (its own process group: the whole tree,
    lake -> repl, is killed together) with our three pipes as its 0, 1, 2.
    Raises OSError (as Popen does) when it cannot start."""
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    stderr_r, stderr_w = os.pipe()
    ours = (stdin_w, stdout_r, stderr_r)
    try:
        popen = subprocess.Popen(
            argv,
            stdin=stdin_r,
            stdout=stdout_w,
            stderr=stderr_w,
            cwd=cwd,
            env=env,
            start_new_session=True,
            **extra,
        )
    except BaseException:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in (stdin_r, stdout_w, stderr_w):
            os.close(fd)
    piped = PipedProcess(popen)
    try:
        await piped._connect(ours, limit)
    except BaseException:
        try:
            os.killpg(popen.pid, signal.SIGKILL)
        except OSError:
            pass
        await piped.wait()
        raise
    return piped
