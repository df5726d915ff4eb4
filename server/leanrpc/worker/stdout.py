"""The REPL's stdout, delivered in the loop callback that read it, or, from a pipelined
batch to the next single exchange, by the reader thread (once per batch, at its fence answer).

Owns: `attach(process, on_data, on_close)`: the bytes the child writes to
stdout go to `on_data(chunk, at)` (`at`: the time.monotonic() of their read where the
reader thread read them, else None: now) from the pipe transport's read callback itself,
or, from a pipelined batch to the next single exchange, from worker/gathered.py's thread
where it runs, and its end to `on_close()`, once. It returns the channel's `Reading`:
`batch(nonce)`, `rest()`, `direct()` and `flush()` (worker/gathered.py `Gathered`; nothing to
do where the loop reads), and the reader task of the fallback. A StreamReader would have a
reader task wake up and copy each chunk out: more loop callbacks and a copy per chunk
(issue 28: one loop callback per frame batch). Here the stdout pipe
transport (worker/pipes.py, `pipe_transport(1)`) gets a protocol of ours in
front of its StreamReaderProtocol (`set_protocol`, public transport API):
data is ours at once, the end is still passed on. Nothing is buffered (the
channel's FrameDecoder keeps the partial frame, bounded by max_frame). A
process without pipe transports (another launcher) is read the old way, by a
task. May import: the standard library, worker.gathered, worker.pipes (for its type only).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Callable

from . import gathered

if TYPE_CHECKING:
    from .pipes import PipedProcess

log = logging.getLogger("leanrpc.worker")

__all__ = ["Reading", "attach"]

READ_CHUNK = 1 << 16  # the fallback reader's read size


class Reading:
    """What `attach` gives the channel: a batch's hooks, and the fallback's task."""

    def __init__(self, task: asyncio.Task | None = None, gathered=None) -> None:
        self.task = task
        self._gathered = gathered

    def batch(self, nonce: str | None) -> None:
        """A pipelined batch waits for its fence's answer (`nonce`): read by the thread."""
        if self._gathered is not None:
            self._gathered.begin(nonce)

    def rest(self) -> None:
        """The batch ended: every byte from here is delivered as it comes (still read by the
        thread, so that the next batch needs no pause of the loop's reader)."""
        if self._gathered is not None:
            self._gathered.rest()

    def direct(self) -> None:
        """A single exchange starts: the loop reads, every byte as it comes."""
        if self._gathered is not None:
            self._gathered.end()

    def flush(self) -> None:
        """Every byte read so far delivered now (a timer is about to decide)."""
        if self._gathered is not None:
            self._gathered.flush()

    @property
    def gathered(self) -> bool:
        return self._gathered is not None


class _Direct(asyncio.Protocol):
    """The stdout pipe's protocol: data to `on_data` at once; the end to
    `on_close`, then to asyncio's own pipe protocol."""

    def __init__(
        self,
        inner: asyncio.BaseProtocol,
        on_data: Callable[[bytes], None],
        on_close: Callable[[], None],
    ) -> None:
        self._inner = inner
        self._on_data = on_data
        self._on_close = on_close
        self._closed = False
        self.gathered: gathered.Gathered | None = None

    def data_received(self, data: bytes) -> None:
        if not self._closed:
            self._on_data(data, None)

    def _gathered_data(self, data: bytes, at: float) -> None:
        if not self._closed:
            self._on_data(data, at)

    def eof_received(self) -> bool:
        """The inner protocol sees the end too; the transport then closes
        (False: uvloop, unlike asyncio, keeps a pipe open when asked)."""
        handler = getattr(self._inner, "eof_received", None)
        if handler is not None:
            handler()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.gathered is not None:
            self.gathered.close()
        if not self._closed:
            self._closed = True
            if exc is not None:
                log.debug("REPL stdout closed with %r", exc)
            self._on_close()
        self._inner.connection_lost(exc)


def attach(
    process: PipedProcess,
    on_data: Callable[[bytes, float | None], None],
    on_close: Callable[[], None],
    name: str = "",
) -> Reading:
    """Sends `process`'s stdout to `on_data` and its end to `on_close`.

    The bytes come straight from the pipe transport (from a pipelined batch to the next
    single exchange from the reader thread, where it runs), else from the fallback's reader
    task. Call it before
    anything is sent to the child."""
    stdout = process.stdout
    pipe_transport = getattr(process, "pipe_transport", None)  # worker/pipes.PipedProcess
    pipe = pipe_transport(1) if pipe_transport is not None else None
    if (
        pipe is not None
        and hasattr(pipe, "set_protocol")
        and not pipe.is_closing()
        and isinstance(stdout, asyncio.StreamReader)
        and getattr(pipe.get_protocol(), "received", None) == 0  # nothing buffered yet
        and not stdout.at_eof()
    ):
        direct = _Direct(pipe.get_protocol(), on_data, on_close)
        pipe.set_protocol(direct)
        direct.gathered = gathered.gather(pipe, direct._gathered_data)
        return Reading(gathered=direct.gathered)
    return Reading(
        task=asyncio.create_task(_read(stdout, on_data, on_close), name=f"{name}-stdout")
    )


async def _read(stdout: asyncio.StreamReader, on_data, on_close) -> None:
    try:
        while True:
            chunk = await stdout.read(READ_CHUNK)
            if not chunk:
                break
            on_data(chunk, None)
    except Exception:  # noqa: BLE001 - a broken pipe is an end like EOF
        log.debug("REPL stdout read failed", exc_info=True)
    on_close()
