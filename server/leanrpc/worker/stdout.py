"""The REPL's stdout, delivered in the loop callback that read it.

Owns: `attach(process, on_data, on_close)`: the bytes the child writes to
stdout go to `on_data(chunk)` from the pipe protocol's own callback (the
read), and its end to `on_close()`, once. asyncio's subprocess protocol
would put them in a StreamReader for a reader task to wake up and copy
out: one more loop callback and one more copy per chunk (issue 28: one loop
callback per frame batch). Here a sink stands in for that StreamReader;
nothing is buffered (the channel's FrameDecoder keeps the partial frame,
bounded by max_frame). A process whose protocol is not asyncio's (another
launcher) is read the old way, by a task. May import: the standard library.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

log = logging.getLogger("leanrpc.worker")

__all__ = ["attach"]

READ_CHUNK = 1 << 16  # the fallback reader's read size


class _Sink:
    """What SubprocessStreamProtocol calls on its stdout reader."""

    def __init__(self, on_data: Callable[[bytes], None], on_close: Callable[[], None]) -> None:
        self._on_data = on_data
        self._on_close = on_close
        self._closed = False

    def set_transport(self, transport) -> None:
        pass

    def feed_data(self, data: bytes) -> None:
        if not self._closed:
            self._on_data(data)

    def feed_eof(self) -> None:
        if not self._closed:
            self._closed = True
            self._on_close()

    def set_exception(self, exc: BaseException) -> None:
        log.debug("REPL stdout closed with %r", exc)
        self.feed_eof()


def attach(process: asyncio.subprocess.Process, on_data: Callable[[bytes], None],
           on_close: Callable[[], None], name: str = "") -> asyncio.Task | None:
    """Sends `process`'s stdout to `on_data` and its end to `on_close`.

    Returns None when the bytes come straight from the protocol, or the
    reader task of the fallback."""
    stdout = process.stdout
    protocol = getattr(process, "_protocol", None)
    if (protocol is not None and getattr(protocol, "stdout", None) is stdout
            and isinstance(stdout, asyncio.StreamReader) and not getattr(stdout, "_buffer", b"x")
            and not stdout.at_eof() and stdout.exception() is None):
        protocol.stdout = _Sink(on_data, on_close)
        return None
    return asyncio.create_task(_read(stdout, on_data, on_close), name=f"{name}-stdout")


async def _read(stdout: asyncio.StreamReader, on_data, on_close) -> None:
    try:
        while True:
            chunk = await stdout.read(READ_CHUNK)
            if not chunk:
                break
            on_data(chunk)
    except Exception:  # noqa: BLE001 - a broken pipe is an end like EOF
        log.debug("REPL stdout read failed", exc_info=True)
    on_close()
