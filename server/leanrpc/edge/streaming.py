"""The one stream machinery of every streaming door (VerifyStream, Expand).

Owns: reading a stream of requests and answering it, with

* permits: a request is read only while fewer than `limit` requests are read
  and not yet answered *and sent* (the in-flight cap), so a slow reader
  stalls only itself and gRPC flow control pushes back on its sender;
* exactly one answer per accepted request: also when a later message is
  invalid or past the byte budget (reading stops, what was accepted is
  answered, then the call ends with that error's status, from the handler's
  own task: edge/interceptors/budget.py says why) and when the server shuts
  down;
* the shutdown endings (`Shutdown.begin(grace)`): requests read from then on
  are answered at once, running ones get until the shutdown deadline, what
  is left is answered with the door's "shutting down" answer, reading stops
  at the reading deadline, then OK;
* the size bound of each answer (the door's `to_wire` fits it);
* several answers to one request (`Many`: Expand with `tactics`), in order,
  the request's permit back with the last.

What a request *means* is the door's (`StreamDoor`): edge/stream.py for
VerifyStream, edge/prover.py for Expand.

    read ──permit──> door.run ──> out queue ──> door.to_wire ──> yield ──> permit back

May import: asyncio, leanrpc.errors, edge.errors. Never services or the pool.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any, Protocol

from ..errors import LeanServiceError
from .errors import abort_with

__all__ = ["Answer", "Cancel", "Many", "Run", "Shutdown", "StreamCall", "StreamDoor"]


class Shutdown:
    """Set once by App.stop; calls answer what is left by `deadline`."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.deadline: float | None = None
        self.reading_deadline: float | None = None
        self._passed: asyncio.Future | None = None  # done at the deadline (see `passed`)

    def begin(self, grace: float) -> None:
        # Answer before gRPC cancels the calls at the end of the grace
        # period, leaving time to send the answers.
        margin = min(2.0, grace * 0.25)
        now = time.monotonic()
        self.deadline = now + max(0.0, grace - margin)
        # Requests still arriving are read (and answered at once) until here.
        self.reading_deadline = now + max(0.0, grace - margin / 4)
        self.event.set()
        if self._passed is not None:
            self._arm()

    @property
    def started(self) -> bool:
        return self.event.is_set()

    def passed(self) -> asyncio.Future:
        """A future done once the shutdown deadline has passed: one for every
        call to wait on (a unary call needs no watcher task of its own)."""
        if self._passed is None:
            self._passed = asyncio.get_running_loop().create_future()
            if self.deadline is not None:
                self._arm()
        return self._passed

    def _arm(self) -> None:
        passed = self._passed
        delay = max(0.0, self.deadline - time.monotonic())
        passed.get_loop().call_later(delay, lambda: passed.done() or passed.set_result(None))


@dataclasses.dataclass(frozen=True, slots=True)
class Run:
    """A request to run, known in the stream by `key` (unique while in flight)."""

    key: str
    request: Any


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """A request answered at once (never run), e.g. one without an id."""

    answer: Any


@dataclasses.dataclass(frozen=True, slots=True)
class Many:
    """Several answers to one request (an Expand request with `tactics`), sent
    in order; the request's permit comes back with the last of them."""

    answers: tuple


@dataclasses.dataclass(frozen=True, slots=True)
class Cancel:
    """A control message: cancel the running request `key` (if any)."""

    key: str


class StreamDoor(Protocol):
    """What one streaming method supplies to `StreamCall`."""

    def take(self, message) -> Run | Answer | Cancel | None:
        """What a read message is; None for a control message the door applied itself."""

    async def run(self, request) -> Any:
        """The request's answer (or `Many` answers); every failure becomes an
        answer (only cancellation raises)."""

    def shutting_down(self, request) -> Any:
        """The answer for a request accepted but not run because the server stops."""

    def cancelled(self, request) -> Any:
        """The answer for a request cancelled by the client (or the stream's end)."""

    def duplicate(self, request) -> Any:
        """The answer for a request whose key is already in flight."""

    def to_wire(self, answer) -> Any:
        """The stream's response message for `answer`, fitted to the size bound."""


class StreamCall:
    """The state of one streaming call (see the module docstring)."""

    def __init__(self, door: StreamDoor, context, *, limit: int, shutdown: Shutdown) -> None:
        self._door = door
        self._context = context
        self._permits = asyncio.Semaphore(limit)
        self._shutdown = shutdown
        # (response, holds a permit); None only wakes the writer.
        self._out: asyncio.Queue = asyncio.Queue()
        self._running: dict[str, asyncio.Task] = {}
        self.read_error: LeanServiceError | None = None

    async def responses(self, request_iterator):
        reader = asyncio.ensure_future(self._read(request_iterator))
        watcher = asyncio.ensure_future(self._on_shutdown(reader))
        try:
            while not (reader.done() and not self._running and self._out.empty()):
                item = await self._out.get()
                if item is None:
                    continue
                response, holds_permit = item
                yield response
                if holds_permit:
                    self._permits.release()
            if self.read_error is not None:
                await abort_with(self._context, self.read_error)
        finally:
            reader.cancel()
            watcher.cancel()
            for task in list(self._running.values()):
                task.cancel()

    @property
    def in_flight(self) -> int:
        """Requests accepted and running (for tests and metrics)."""
        return len(self._running)

    def _emit(self, answer) -> None:
        if not isinstance(answer, Many):
            self._out.put_nowait((self._door.to_wire(answer), True))
            return
        if not answer.answers:
            self._permits.release()
            self._out.put_nowait(None)
            return
        last = len(answer.answers) - 1
        for k, one in enumerate(answer.answers):
            self._out.put_nowait((self._door.to_wire(one), k == last))

    async def _read(self, request_iterator) -> None:
        iterator = request_iterator.__aiter__()
        try:
            while True:
                await self._permits.acquire()
                try:
                    message = await iterator.__anext__()
                except BaseException:
                    self._permits.release()
                    raise
                taken = self._door.take(message)
                if isinstance(taken, Run):
                    self._accept(taken)
                elif isinstance(taken, Answer):
                    self._emit(taken.answer)
                else:
                    self._permits.release()
                    if isinstance(taken, Cancel):
                        task = self._running.get(taken.key)
                        if task is not None:
                            task.cancel()
        except StopAsyncIteration:
            pass
        except LeanServiceError as exc:  # bad input, or a message past the byte budget
            self.read_error = exc
        finally:
            self._out.put_nowait(None)

    def _accept(self, run: Run) -> None:
        if self._shutdown.started:
            # Read to answer, not to run: the sender learns at once to resend.
            self._emit(self._door.shutting_down(run.request))
        elif run.key in self._running:
            self._emit(self._door.duplicate(run.request))
        else:
            self._running[run.key] = asyncio.ensure_future(self._run_one(run))

    async def _run_one(self, run: Run) -> None:
        try:
            answer = await self._door.run(run.request)
        except asyncio.CancelledError:
            if self._shutdown.started:
                answer = self._door.shutting_down(run.request)
            else:
                answer = self._door.cancelled(run.request)
        self._running.pop(run.key, None)
        self._emit(answer)

    async def _on_shutdown(self, reader: asyncio.Task) -> None:
        await self._shutdown.event.wait()
        # From here the reader answers new requests "shutting down" at once;
        # running ones get until the deadline.
        remaining = self._shutdown.deadline - time.monotonic()
        waiting = [reader, *self._running.values()]
        if remaining > 0:
            await asyncio.wait(waiting, timeout=remaining)
        for task in list(self._running.values()):
            task.cancel()  # answered door.shutting_down by _run_one
        # Their permits come back as the answers go out, so the reader can
        # read (and answer) what the sender still has queued.
        remaining = self._shutdown.reading_deadline - time.monotonic()
        if remaining > 0 and not reader.done():
            await asyncio.wait([reader], timeout=remaining)
        reader.cancel()  # a sender that never half-closes: stop reading
        self._out.put_nowait(None)
