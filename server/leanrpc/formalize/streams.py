"""What a caller of the generation engine holds: its stream, stats and errors.

`GenerationStream` is one sequence's handle: async iteration over text
deltas, `result()`/`wait()` for the final GenerationResult, `cancel()`. The
engine thread posts into it with `call_soon_threadsafe`, so a stream can be
read from an event loop or, through `wait()`, from a plain thread.

Torch-free: importable without the `model` extra.
May import: leanrpc.formalize.generation and the standard library.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any

from .generation import GenerationResult


class PromptTooLong(ValueError):
    pass


class EngineClosed(RuntimeError):
    pass


@dataclasses.dataclass
class EngineStats:
    steps: int = 0
    prefills: int = 0
    generated_tokens: int = 0
    prefill_tokens: int = 0
    decode_s: float = 0.0
    prefill_s: float = 0.0
    max_batch_seen: int = 0
    batch_rows_total: int = 0  # sum over steps of rows in the batch

    @property
    def mean_batch(self) -> float:
        return self.batch_rows_total / self.steps if self.steps else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        return self.batch_rows_total / self.decode_s if self.decode_s else 0.0

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["mean_batch"] = round(self.mean_batch, 3)
        d["decode_tokens_per_s"] = round(self.decode_tokens_per_s, 2)
        return d


_DONE = object()


class GenerationStream:
    """One submitted sequence: async-iterate for text deltas, then `await result()`.

    Thread-safe `cancel()`. The engine thread pushes into an asyncio queue bound
    to the event loop that was running at submit time; `wait()` serves callers
    without a loop.
    """

    def __init__(self, seq_id: int, loop: asyncio.AbstractEventLoop | None) -> None:
        self.id = seq_id
        self._loop = loop
        self._queue: asyncio.Queue | None = asyncio.Queue() if loop is not None else None
        self._cancel = threading.Event()
        self._done = threading.Event()
        self._result: GenerationResult | None = None

    # -- consumer side
    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def __aiter__(self):
        return self._deltas()

    async def _deltas(self):
        if self._queue is None:
            raise RuntimeError("GenerationStream was submitted outside an event loop; use wait()")
        while True:
            item = await self._queue.get()
            if item is _DONE:
                self._queue.put_nowait(_DONE)  # later iterations end at once too
                return
            yield item

    async def result(self) -> GenerationResult:
        """Waits for the end (discarding deltas not yet read) and returns the result."""
        async for _ in self:
            pass
        assert self._result is not None
        return self._result

    def wait(self, timeout: float | None = None) -> GenerationResult:
        if not self._done.wait(timeout):
            raise TimeoutError("generation did not finish in time")
        assert self._result is not None
        return self._result

    # -- engine side
    def _post(self, item) -> None:
        if self._loop is None or self._queue is None:
            return
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody listens any more
            self._cancel.set()

    def _finish(self, result: GenerationResult) -> None:
        self._result = result
        self._done.set()
        self._post(_DONE)
