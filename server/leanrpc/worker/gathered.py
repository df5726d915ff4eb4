"""The REPL's stdout read on a C thread from a pipelined batch to the next single exchange,
and handed to the event loop once per batch, when its fence answer came (issue 38 item 6).

Owns: `gather(pipe, on_data)`, which registers a stdout pipe with the one reader thread of
the process (leanrpc._native.gather, `Gatherer`: no GIL while it reads), and `Gathered`, what
the channel then holds: `begin` (a batch starts: the loop's pipe transport pauses and the
thread reads, waking the loop when the fence's answer, `nonce`, came, not at each answer
before it), `rest` (the batch ended: what the thread holds is delivered, and the thread goes
on reading, waking the loop at every read until the next batch), `end` (the transport reads
again: a single exchange starts), `flush` (every byte read so far, now: the channel's timers
and verdicts call it before they decide) and `close`. One snippet per call (a single
exchange) is read by the transport as before: there the thread would add its wakeups to the
loop's one. Also the door of each event loop (`_Door`: one eventfd the loop reads, shared by
that loop's pipes) and the one thread per process (a forked child starts its own).

Every byte still reaches `on_data` on the loop, in order, with the time.monotonic() its read
came (the channel's per-answer timer and a body's time are read from those), and all of
them before the exchange can finish: the fence's answer is among them. When the thread
reads a pipe no more (its end, a read error, or no memory for it), what it read is
delivered and the transport reads again: the end, and any error, reach the channel the
way they always did. Where the compiled build is missing (extensions off, not Linux), the
loop cannot watch a file, or the thread cannot start, `gather` answers None and the
transport reads, as before.

May import: the standard library, leanrpc.core._impl (whether the extensions are on) and
leanrpc._native.gather (chosen here, once; its thread starts at the first `gather`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import sys
import weakref
from typing import Callable

from ..core._impl import extensions_disabled

# Chosen here, once (setup.py builds the thread on Linux only).
if extensions_disabled() or not sys.platform.startswith("linux"):
    _native = None
else:
    from .._native import gather as _native

log = logging.getLogger("leanrpc.worker")

__all__ = ["Gathered", "gather"]


class _Process:
    """The process's one reader thread (made at the first `gather`; again in a forked
    child, where the parent's thread does not run)."""

    pid: int | None = None
    gatherer = None

    @classmethod
    def gatherer_now(cls):
        if cls.pid != os.getpid():
            cls.pid, cls.gatherer = os.getpid(), None
            try:
                cls.gatherer = _native.Gatherer()
            except OSError as exc:  # no eventfd: the loops read, as before
                log.warning("the stdout reader thread cannot start (%s); the loop reads", exc)
        return cls.gatherer


class _Door:
    """The eventfd one event loop reads for all of its gathered pipes."""

    _of: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Door] = weakref.WeakKeyDictionary()
    _tags = itertools.count(1)

    def __init__(self, loop: asyncio.AbstractEventLoop, gatherer) -> None:
        self._loop = loop
        self.fd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self.tag = next(self._tags)
        self.gatherer = gatherer
        self.readings: dict[int, Gathered] = {}
        try:
            loop.add_reader(self.fd, self._wake)
        except BaseException:
            os.close(self.fd)
            raise
        self._close_fd = weakref.finalize(self, os.close, self.fd)  # or collected with the loop

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop, gatherer) -> _Door | None:
        door = cls._of.get(loop)
        if door is None or door.gatherer is not gatherer or not door._close_fd.alive:
            try:
                door = cls._of[loop] = cls(loop, gatherer)
            except (NotImplementedError, OSError, RuntimeError):  # a loop that cannot watch it
                return None
        return door

    def leave(self, key: int) -> None:
        """Reading `key` is over; the door closes with its last reading (so a door's
        descriptor lives exactly as long as the pipes it serves)."""
        self.readings.pop(key, None)
        if self.readings or not self._close_fd.alive:
            return
        if self._of.get(self._loop) is self:
            del self._of[self._loop]
        try:
            self._loop.remove_reader(self.fd)
        except (RuntimeError, ValueError, OSError):  # the loop is closed: nothing watches it
            pass
        self._close_fd()

    def _wake(self) -> None:
        try:
            os.eventfd_read(self.fd)
        except BlockingIOError:
            pass
        for key in self.gatherer.ready(self.tag):
            reading = self.readings.get(key)
            if reading is not None:
                reading.flush()


class Gathered:
    """One stdout pipe read by the thread; its bytes go to `on_data(chunk, at)`."""

    _keys = itertools.count(1)

    def __init__(self, door: _Door, pipe: asyncio.ReadTransport, on_data) -> None:
        self._door = door
        self._gatherer = door.gatherer
        self._pipe = pipe
        self._on_data = on_data
        self._key = next(self._keys)
        self._done = False
        self._delivering = False
        self._gathering = False
        self._gatherer.watch(self._key, pipe.get_extra_info("pipe").fileno(), door.fd, door.tag)
        door.readings[self._key] = self

    def begin(self, nonce: str | None) -> None:
        """A batch starts: the thread reads the pipe (the transport paused, if the loop read
        it), and wakes the loop once the fence's answer (`nonce`) was read (None: at every
        read)."""
        if self._done:
            return
        if not self._gathering:
            self._gathering = True
            self._pipe.pause_reading()
        self._gatherer.gather(self._key, None if nonce is None else nonce.encode())

    def rest(self) -> None:
        """The batch ended: what the thread holds is delivered now, and from here every read
        wakes the loop (between batches every byte is seen as it comes), the thread still
        reading. Back-to-back batches then never pause or resume the transport: uvloop
        leaves a paused pipe in its epoll set until the pipe's next byte, so a batch that
        paused it woke the loop for nothing at its first answer (and cost two epoll_ctl)."""
        if not self._gathering or self._done:
            return
        self.flush()
        if not self._done:
            self._gatherer.gather(self._key, None)

    def end(self) -> None:
        """The loop reads again (a single exchange is about to start, where the thread would
        add its wakeups to the loop's one): the thread stops, and what it still holds is
        delivered first."""
        if not self._gathering:
            return
        self._gathering = False
        if self._done:
            return
        chunks = self._gatherer.park(self._key)
        self._hand(chunks)
        if not self._done and not self._pipe.is_closing():
            self._pipe.resume_reading()

    def flush(self) -> None:
        """Every byte read so far, to `on_data` now (the door, the channel's timers and
        verdicts)."""
        if self._done or self._delivering:
            return  # (a poison while delivering fails the exchange: no second delivery then)
        chunks, ended = self._gatherer.take(self._key)
        self._hand(chunks)
        if ended and not self._done:
            # Read here no more: the transport reads the rest, and meets the end itself.
            self._done = True
            self._door.leave(self._key)
            if not self._pipe.is_closing():
                self._pipe.resume_reading()

    def _hand(self, chunks: list) -> None:
        self._delivering = True
        try:
            for data, at in chunks:
                self._on_data(data, at)
        finally:
            self._delivering = False

    def close(self) -> None:
        """The transport is gone: the thread stops reading (what it still held is dropped;
        nothing is believed after the end)."""
        if not self._done:
            self._done = True
            self._gatherer.unwatch(self._key)
            self._door.leave(self._key)


def gather(pipe: asyncio.ReadTransport, on_data: Callable[[bytes, float], None]) -> Gathered | None:
    """The pipe watched by the process's reader thread (read there from a batch's `begin` to
    the next `end`), or None (the transport always reads, as before)."""
    if _native is None or not hasattr(pipe, "pause_reading") or pipe.get_extra_info("pipe") is None:
        return None
    gatherer = _Process.gatherer_now()
    if gatherer is None:
        return None
    door = _Door.of(asyncio.get_running_loop(), gatherer)
    if door is None:
        return None
    try:
        return Gathered(door, pipe, on_data)
    except (OSError, MemoryError) as exc:
        log.warning("cannot gather a REPL's stdout (%s); the loop reads it", exc)
        door.leave(0)  # closed again if it serves nothing else
        return None
