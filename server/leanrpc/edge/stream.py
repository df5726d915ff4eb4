"""One VerifyStream call, and the shutdown signal every Verifier call watches.

Owns: the per-stream flow control (a stream reads a request only while it
has fewer than `limit` snippets read and not yet answered *and sent*, so a
slow reader stalls only itself and gRPC flow control pushes back on its
sender), answering every accepted snippet exactly once (also when a later
message is invalid, and when the server shuts down), and the size bound of
each answer. Imports the services and convert (edge layer); never the pool.

    read ──permit──> run_one (VerifyService.verify) ──> out queue ──> yield ──> permit back

Endings:

* the client half-closes: every accepted snippet is answered, then OK;
* an invalid message: reading stops, every snippet accepted before it is
  answered, then INVALID_ARGUMENT with the reason;
* `Shutdown.begin(grace)`: snippets read from then on are answered at once,
  and running ones get until the shutdown deadline (shortly before the grace
  ends); what is left is answered REJECTED "server shutting down ... safe to
  resend" with `retry_after` set; reading stops at the deadline; then OK.
"""

from __future__ import annotations

import asyncio
import time

from ..errors import OverloadedError, RequestError
from ..results import Status, VerifyResult
from ..services.ports import Verifier
from ..services.resolve import VerifyOptions
from ..v1 import verifier_pb2 as pb
from . import convert
from .errors import abort_with

# Resend hint given with "server shutting down" answers.
SHUTDOWN_RETRY_AFTER_S = 1.0


class Shutdown:
    """Set once by App.stop; calls answer what is left by `deadline`."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.deadline: float | None = None
        self.reading_deadline: float | None = None

    def begin(self, grace: float) -> None:
        # Answer before gRPC cancels the calls at the end of the grace
        # period, leaving time to send the answers.
        margin = min(2.0, grace * 0.25)
        now = time.monotonic()
        self.deadline = now + max(0.0, grace - margin)
        # Snippets still arriving are read (and answered at once) until here.
        self.reading_deadline = now + max(0.0, grace - margin / 4)
        self.event.set()

    @property
    def started(self) -> bool:
        return self.event.is_set()

    async def wait_deadline(self) -> None:
        await self.event.wait()
        await asyncio.sleep(max(0.0, self.deadline - time.monotonic()))


def shutdown_result(snippet_id: str) -> VerifyResult:
    return VerifyResult(
        id=snippet_id,
        status=Status.REJECTED,
        error=convert.SHUTTING_DOWN_TEXT,
        retry_after_s=SHUTDOWN_RETRY_AFTER_S,
    )


async def answer(verify: Verifier, snippet_id: str, code: str, options: VerifyOptions, *,
                 deadline: float | None, client_id: str, stream_id: str, shutdown: Shutdown) -> VerifyResult:
    """One snippet's result; every failure becomes a result, never an exception."""
    try:
        # Resolved once here (services.resolve), then run as it is.
        request = verify.resolver.resolve(snippet_id, code, options, deadline=deadline,
                                          client_id=client_id, stream_id=stream_id)
        return await verify.run(request)
    except asyncio.CancelledError:
        if shutdown.started:
            return shutdown_result(snippet_id)
        return VerifyResult(id=snippet_id, status=Status.CANCELLED, error="cancelled by the client")
    except OverloadedError as exc:
        # A stream cannot fail one snippet with a status code: the snippet is
        # REJECTED with the retry hint as a field (Result.retry_after).
        return VerifyResult(id=snippet_id, status=Status.REJECTED, error=convert.overloaded_error_text(exc),
                            retry_after_s=exc.retry_after_s)
    except RequestError as exc:
        return VerifyResult(id=snippet_id, status=Status.REJECTED, error=exc.message)
    except Exception as exc:  # not serving, internal: still one answer
        return VerifyResult(id=snippet_id, status=Status.REJECTED, error=str(exc))


class StreamCall:
    """The state of one VerifyStream call (see the module docstring)."""

    def __init__(self, verify: Verifier, context, *, limit: int, max_result_bytes: int,
                 client_id: str, stream_id: str, shutdown: Shutdown, deadline: float | None) -> None:
        self._verify = verify
        self._context = context
        self._permits = asyncio.Semaphore(limit)
        self._max_result_bytes = max_result_bytes
        self._client_id = client_id
        self._stream_id = stream_id
        self._shutdown = shutdown
        self._deadline = deadline
        # (response, holds a permit); None only wakes the writer.
        self._out: asyncio.Queue = asyncio.Queue()
        self._running: dict[str, asyncio.Task] = {}
        self.read_error: RequestError | None = None

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

    def _emit(self, result: VerifyResult, holds_permit: bool = True) -> None:
        out = convert.fit_result(convert.result_to_pb(result), self._max_result_bytes)
        self._out.put_nowait((pb.VerifyStreamResponse(result=out), holds_permit))

    async def _read(self, request_iterator) -> None:
        options = VerifyOptions()
        iterator = request_iterator.__aiter__()
        try:
            while True:
                await self._permits.acquire()
                try:
                    message = await iterator.__anext__()
                except BaseException:
                    self._permits.release()
                    raise
                kind = message.WhichOneof("kind")
                if kind == "snippet":
                    if self._shutdown.started:
                        # Read to answer, not to run: the sender learns at once to resend.
                        self._emit(shutdown_result(message.snippet.id))
                    else:
                        self._accept(message.snippet, options)
                    continue
                self._permits.release()
                if kind == "options":
                    options = convert.options_from_pb(message.options)
                elif kind == "cancel_id":
                    task = self._running.get(message.cancel_id)
                    if task is not None:
                        task.cancel()
        except StopAsyncIteration:
            pass
        except RequestError as exc:
            self.read_error = exc
        finally:
            self._out.put_nowait(None)

    def _accept(self, snippet, options: VerifyOptions) -> None:
        if not snippet.id:
            self._emit(VerifyResult(id="", status=Status.REJECTED, error="VerifyStream snippets need a non-empty id"))
        elif snippet.id in self._running:
            self._emit(VerifyResult(id=snippet.id, status=Status.REJECTED,
                                    error="duplicate id: a snippet with this id is in flight"))
        else:
            self._running[snippet.id] = asyncio.ensure_future(self._run_one(snippet.id, snippet.code,
                                                                          convert.snippet_options(snippet, options)))

    async def _run_one(self, snippet_id: str, code: str, options: VerifyOptions) -> None:
        result = await answer(self._verify, snippet_id, code, options, deadline=self._deadline,
                              client_id=self._client_id, stream_id=self._stream_id, shutdown=self._shutdown)
        self._running.pop(snippet_id, None)
        self._emit(result)

    async def _on_shutdown(self, reader: asyncio.Task) -> None:
        await self._shutdown.event.wait()
        # From here the reader answers new snippets "server shutting down"
        # at once; running ones get until the deadline.
        remaining = self._shutdown.deadline - time.monotonic()
        waiting = [reader, *self._running.values()]
        if remaining > 0:
            await asyncio.wait(waiting, timeout=remaining)
        for task in list(self._running.values()):
            task.cancel()  # answered "server shutting down" by `answer`
        # Their permits come back as the answers go out, so the reader can
        # read (and answer) what the sender still has queued.
        remaining = self._shutdown.reading_deadline - time.monotonic()
        if remaining > 0 and not reader.done():
            await asyncio.wait([reader], timeout=remaining)
        reader.cancel()  # a sender that never half-closes: stop reading
        self._out.put_nowait(None)
