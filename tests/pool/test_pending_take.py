"""The fence's accounting of one pending exchange, as a table (worker/pending.py):
each frame the REPL writes is kept, completes the exchange, or is a reason to
poison the worker with its restart cause. No process: frames are decoded from
the REPL's JSON as the reader would hand them over. The table side of the
cancel/answer race, whose process version (the reader meeting an answer
after the cancel in a real pipe) stays in tests/workers/test_cancel_answer_race.py."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from leanrpc import repl
from leanrpc.repl.probes import FENCE_DIR
from leanrpc.worker.pending import Exchange, take

NONCE = "n0nce"
ANSWER = repl.decode(json.dumps({"env": 3}).encode())
OTHER = repl.decode(json.dumps({"env": 4}).encode())
FENCE = repl.decode(
    json.dumps({"message": f"no such file or directory: {FENCE_DIR}/{NONCE}.lean"}).encode()
)
FOREIGN = repl.decode(
    json.dumps({"message": f"no such file or directory: {FENCE_DIR}/other.lean"}).encode()
)


def _clock() -> float:
    return 7.0


async def _exchange(nonce: str | None = NONCE, expected: int = 1) -> Exchange:
    return Exchange(asyncio.get_running_loop().create_future(), nonce, expected=expected)


async def test_the_answer_then_its_fence_complete_the_exchange():
    pending = await _exchange()
    assert take(pending, ANSWER, _clock) is None and not pending.future.done()
    assert take(pending, FENCE, _clock) is None
    assert pending.future.result() is ANSWER


async def test_a_batch_completes_with_every_answer_in_order_and_records_progress():
    pending = await _exchange(expected=2)
    assert take(pending, ANSWER, _clock) is None and pending.progress_at == 7.0
    assert take(pending, OTHER, _clock) is None
    assert take(pending, FENCE, _clock) is None
    assert pending.future.result() == [ANSWER, OTHER]


@pytest.mark.parametrize("nonce", [NONCE, None], ids=["fenced", "unfenced"])
async def test_a_batch_stamps_each_answer_on_the_monotonic_clock_not_the_loops(nonce):
    """The timer's progress is on the loop's clock (its timers compare with it);
    each answer's arrival, from which a body's time is read, is on
    time.monotonic(): uvloop's loop clock is cached per iteration, in whole ms."""
    pending = await _exchange(nonce=nonce, expected=3)
    before = time.monotonic()
    assert take(pending, ANSWER, _clock) is None
    assert take(pending, OTHER, _clock) is None
    after = time.monotonic()
    assert pending.progress_at == 7.0
    assert len(pending.arrivals) == 2
    assert before <= pending.arrivals[0] <= pending.arrivals[1] <= after


@pytest.mark.parametrize(
    ("frames", "cause", "why"),
    [
        ([FENCE], "poisoned", "0 frames before the fence answer, not 1"),
        ([ANSWER, OTHER], "poisoned", "a frame more than the commands sent"),
        ([FOREIGN], "poisoned", "a foreign fence"),
    ],
    ids=["fence-too-early", "frame-too-many", "foreign-fence"],
)
async def test_any_frame_out_of_place_is_a_reason_to_poison(frames, cause, why):
    pending = await _exchange()
    verdicts = [take(pending, frame, _clock) for frame in frames]
    assert verdicts[:-1] == [None] * (len(frames) - 1)
    assert verdicts[-1][1] == cause and why in verdicts[-1][0], verdicts[-1]
    assert not pending.future.done()  # nothing is delivered


async def test_output_with_no_exchange_or_after_one_is_garbage_and_after_a_cancel_is_the_cancel():
    assert take(None, ANSWER, _clock)[1] == "garbage"
    answered = await _exchange()
    take(answered, ANSWER, _clock), take(answered, FENCE, _clock)
    assert take(answered, OTHER, _clock)[1] == "garbage"
    cancelled = await _exchange()
    cancelled.future.cancel()
    assert take(cancelled, ANSWER, _clock)[1] == "cancelled"


async def test_without_a_fence_the_frames_owed_complete_it():
    pending = await _exchange(nonce=None, expected=2)
    assert take(pending, ANSWER, _clock) is None and pending.progress_at == 7.0
    assert take(pending, OTHER, _clock) is None
    assert pending.future.result() == [ANSWER, OTHER]


async def test_an_answer_read_earlier_by_the_reader_thread_keeps_its_read_time():
    """worker/gathered.py hands answers over once per exchange: each keeps the time.monotonic()
    its read came (`at`), and the timer's progress is that moment on the loop's clock."""
    pending = await _exchange(expected=3)
    read_at = time.monotonic() - 0.25
    assert take(pending, ANSWER, _clock, read_at) is None
    assert pending.arrivals == [read_at]
    assert (
        6.5 < pending.progress_at <= 6.75
    )  # the loop's 7.0, less the 0.25 s (and more) since the read
