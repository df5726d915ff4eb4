"""The REPL's stdout read by the reader thread (worker/gathered.py, issue 38 item 6): the
loop is woken once per exchange, when the fence's answer came, not once per answer; a
batch's per-answer timer still restarts at each answer (the timer takes the bytes read so
far before it decides, each with the time it was read), so a batch of slow answers is not a
timeout and a stall after the first answer is timed out from that answer, not later. Between
batches the thread reads on and wakes the loop at every read: back-to-back batches never
pause or resume the loop's reader, and output between exchanges is still seen at once."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from leanrpc import repl
from leanrpc.config import LimitsConfig
from leanrpc.errors import WorkerOutOfMemory, WorkerTimeout
from leanrpc.worker import gathered
from leanrpc.worker.fence import FenceSettings
from leanrpc.worker.launcher import Launcher, LaunchSpec
from leanrpc.worker.worker import Worker

FAKE = [sys.executable, str(Path(__file__).with_name("batch_repl.py"))]

pytestmark = pytest.mark.skipif(
    gathered._native is None, reason="the extensions are off: the loop reads (test_stdout_sink)"
)


async def _worker() -> Worker:
    worker = Worker(
        "wg", LaunchSpec(argv=list(FAKE)), Launcher(), LimitsConfig(), fence=FenceSettings()
    )
    await worker.start(30)
    assert worker._channel._stdout.gathered
    return worker


async def test_a_batch_wakes_the_loop_once_when_its_fence_answer_came():
    worker = await _worker()
    try:
        gatherer = gathered._Process.gatherer_now()
        env = worker.next_env
        before = gatherer.signals
        answers = await worker.request_batch(
            [repl.command(f"example : True := trivial -- pace {k}", None) for k in range(6)], 30
        )
        assert [a.env for a in answers] == list(range(env, env + 6))
        # Six answers 50 ms apart, then the fence's: read by the thread as they came, the
        # loop woken for the fence's only (the first answers wait for it).
        assert gatherer.signals - before == 1
    finally:
        await worker.stop(2.0)


async def test_slow_answers_restart_the_batch_timer_at_each_answer():
    worker = await _worker()
    try:
        started = time.monotonic()
        arrivals: list = []
        answers = await worker._channel.exchange_batch(
            [repl.command(f"example : True := trivial -- slow {k}", None) for k in range(4)],
            timeout=1.0,
            arrivals=arrivals,
        )
        assert len(answers) == 4 and time.monotonic() - started > 1.2  # over one timeout
        # Each answer's time is when the thread read it, about 0.3 s apart, not when it was
        # handed over (the first three together, when the timer took them at 1.0 s).
        assert len(arrivals) == 4
        assert all(later - earlier > 0.1 for earlier, later in zip(arrivals, arrivals[1:]))
    finally:
        await worker.stop(2.0)


async def test_a_stall_after_an_answer_times_out_from_that_answer():
    worker = await _worker()
    try:
        started = time.monotonic()
        with pytest.raises(WorkerTimeout) as caught:
            await worker._channel.exchange_batch(
                [
                    repl.command("example : True := trivial -- slow", None),
                    repl.command("example : True := trivial -- stall", None),
                ],
                timeout=1.0,
            )
        waited = time.monotonic() - started
        assert caught.value.batch_index == 1  # the first answer came; the second did not
        # The first answer at 0.3 s restarts the timer: out at 1.3 s (the timer first fires at
        # 1.0 s, takes the answer read at 0.3 s, and waits until 1.3 s: not out at 1.0 s, and
        # not at 2.0 s, as if the answer had come when it was handed over).
        assert 1.2 < waited < 1.9, waited
    finally:
        await worker.stop(2.0)


async def test_a_verdict_mid_batch_counts_the_answers_the_thread_already_read():
    """The memory watch fails a batch with the command it came during: the answers read by
    the thread but not yet handed over count (else an honest earlier body would be charged)."""
    worker = await _worker()
    try:
        gatherer = gathered._Process.gatherer_now()
        channel = worker._channel
        reads = gatherer.reads
        batch = asyncio.ensure_future(
            channel.exchange_batch(
                [
                    repl.command("example : True := trivial -- pace", None),
                    repl.command("example : True := trivial -- stall", None),
                ],
                timeout=30,
            )
        )
        for _ in range(500):  # until the thread read the first answer
            if gatherer.reads > reads:
                break
            await asyncio.sleep(0.01)
        assert gatherer.reads > reads and not batch.done()
        assert channel._pending.frames == []  # read, not handed over: the fence has not come
        channel.fail_pending(WorkerOutOfMemory("over its limit"))
        with pytest.raises(WorkerOutOfMemory) as caught:
            await batch
        assert caught.value.batch_index == 1  # during the second command, not the first
    finally:
        await worker.stop(2.0)


async def test_one_command_at_a_time_is_read_by_the_loop_and_the_thread_reads_no_byte():
    """A single exchange (one snippet per call, a session's tactic) stays the loop's: the
    thread would add its own wakeups to the loop's one. After a batch the loop reads again."""
    worker = await _worker()
    try:
        gatherer = gathered._Process.gatherer_now()
        reads = gatherer.reads
        answer = await worker.request(repl.command("example : True := trivial", None), 30)
        assert answer.env is not None and gatherer.reads == reads
        await worker.request_batch(
            [repl.command(f"example : True := trivial -- {k}", None) for k in range(3)], 30
        )
        after_batch = gatherer.reads
        assert after_batch > reads
        answer = await worker.request(repl.command("example : True := trivial", None), 30)
        assert answer.env is not None and gatherer.reads == after_batch
    finally:
        await worker.stop(2.0)


async def test_between_batches_the_thread_reads_on_and_stray_output_poisons_at_once():
    """After a batch the loop's reader stays paused and the thread wakes the loop at every
    read (uvloop leaves a paused pipe in its epoll set until its next byte: a batch that paused
    it afresh was woken for nothing at its first answer). Output between exchanges is seen as
    it comes, as the loop's reader would see it: the worker is poisoned before any next
    request."""
    worker = await _worker()
    try:
        gatherer = gathered._Process.gatherer_now()
        pipe = worker._channel._stdout._gathered._pipe
        await worker.request_batch(
            [repl.command(f"example : True := trivial -- {k}", None) for k in range(3)], 30
        )
        signals = gatherer.signals
        assert not pipe.is_reading()  # the thread reads on between batches
        await worker.request_batch(
            [repl.command(f"example : True := trivial -- {k}", None) for k in range(3)], 30
        )
        assert gatherer.signals - signals == 1 and not pipe.is_reading()  # its fence's alone
        await worker.request_batch(
            [repl.command(f"example : True := trivial -- {k}", None) for k in ("later", "")], 30
        )
        deadline = time.monotonic() + 5
        while worker._channel.poisoned is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert "unsolicited output" in (worker._channel.poisoned or "")
    finally:
        await worker.stop(2.0)
