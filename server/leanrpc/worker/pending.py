"""One pending exchange and the fence's accounting of the frames that come for it.

Owns: `Exchange` (the future its answer completes, the fence's nonce, the frames
so far, how many are owed before the fence, when the last one came), `take`, the
rule for one frame from the REPL, and `expire`, the exchange's timer. `take`
decides, the channel acts: a frame is kept, or completes the exchange (its fence
answer after exactly the frames owed), or is a reason to poison the worker, given
back with its restart cause (an ExitCause value):

* no exchange pending, or one already answered: unsolicited output ("garbage");
* the exchange was cancelled by its caller: the late answer of a command, and the
  worker is being killed for the cancellation ("cancelled");
* a fence answer after too few frames, a frame more than the commands sent, or a
  frame that mentions a fence not its own ("poisoned").

With no fence (`nonce` None: fully trusted input) the frames owed complete it.
No I/O; the only asyncio is the future; the arrivals' clock is time.monotonic().
May import: leanrpc.repl, leanrpc.worker.ledger (`brief`, how a frame is quoted).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Callable

from .. import repl
from .ledger import brief

__all__ = ["Exchange", "expire", "take"]


@dataclasses.dataclass
class Exchange:
    future: asyncio.Future
    nonce: str | None
    frames: list = dataclasses.field(default_factory=list)
    expected: int = 1  # frames owed before the fence (a batch: one per command)
    progress_at: float = 0.0  # loop time of the last frame (a batch's timer restarts per frame)
    # A batch: when each frame came, on time.monotonic() (not the loop's clock: uvloop's
    # is cached per iteration, in whole milliseconds, and a body's time is read from these).
    arrivals: list = dataclasses.field(default_factory=list)


def take(
    pending: Exchange | None,
    response: repl.Response,
    now: Callable[[], float],
    at: float | None = None,
) -> tuple[str, str] | None:
    """Files one frame; None when it is accounted for, else (why, cause) to poison with.
    `now` gives the loop's time, read only when a batch's progress is recorded; `at`, the
    time.monotonic() the frame was read where that was earlier than now (worker/gathered.py),
    else None."""
    if pending is not None and pending.future.cancelled():
        # Cancelled before the exchange saw the cancellation (both came in one loop
        # iteration): believed no more than garbage, counted apart.
        return f"an answer after its command was cancelled: {brief(response)}", "cancelled"
    if pending is None or pending.future.done():
        return f"unsolicited output: {brief(response)}", "garbage"
    frames = pending.frames
    if pending.nonce is None:
        frames.append(response)
        if pending.expected > 1:
            pending.arrivals.append(time.monotonic() if at is None else at)
        if len(frames) == pending.expected:
            pending.future.set_result(frames[0] if pending.expected == 1 else frames)
        else:
            pending.progress_at = _when(now, at)
        return None
    if repl.is_fence_answer(response, pending.nonce):
        if len(frames) != pending.expected:
            return (
                f"{len(frames)} frames before the fence answer, not {pending.expected}",
                "poisoned",
            )
        pending.future.set_result(frames[0] if pending.expected == 1 else frames)
        return None
    if len(frames) >= pending.expected or repl.mentions_fence(response):
        return (
            f"a frame more than the commands sent, or a foreign fence: {brief(response)}",
            "poisoned",
        )
    frames.append(response)
    if pending.expected > 1:
        pending.progress_at = _when(now, at)
        pending.arrivals.append(time.monotonic() if at is None else at)
    return None


def _when(now: Callable[[], float], at: float | None) -> float:
    """The loop's time of a read at time.monotonic() `at` (None: now)."""
    return now() if at is None else now() - max(0.0, time.monotonic() - at)


def expire(future: asyncio.Future) -> None:
    """The exchange's timer: no answer in time."""
    if not future.done():
        future.set_exception(asyncio.TimeoutError())
