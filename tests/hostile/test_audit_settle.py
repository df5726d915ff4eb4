"""The audit's settle wait (issue 28): a REPL that answered but is not back in its read yet.

On a loaded machine the REPL usually is one step from its read, waiting for the core the
server's wakeup took; an event-loop timer (epoll: whole milliseconds) kept it idle about
1.4 ms each time. The audit first sleeps a few times for 50 microseconds (the REPL gets the
core), and only then waits on loop timers, so a REPL that really is slow to come back (or
stuck) costs the event loop at most 0.2 ms of blocking. The REPL's own /proc files are
replaced by a script of looks here, so the test does not depend on the machine's speed
(tests/hostile/test_audit_dirs.py runs the real thing).
"""

from __future__ import annotations

import asyncio
import os

from leanrpc.worker import audit as audit_module
from leanrpc.worker.audit import PipeAudit, _Snapshot

_READER = (4242, 4242)


def _scripted(monkeypatch, looks: list[bool]) -> tuple[PipeAudit, list, list]:
    """An audit whose reader thread is in its read at the looks marked True (then always)."""
    audit = PipeAudit(os.getpid(), (1, 2, 3), settle_s=30.0)
    script = iter(looks)
    monkeypatch.setattr(audit, "_reader_reads", lambda: next(script, True))
    monkeypatch.setattr(audit, "_running", lambda: True)
    monkeypatch.setattr(audit, "_snapshot", lambda: _Snapshot({}, 1, [_READER], []))
    monkeypatch.setattr(audit, "_thread_io", lambda: (0, 0))
    slept: list[float] = []
    timers: list[float] = []
    real_sleep = asyncio.sleep

    async def timer(delay: float) -> None:
        timers.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(audit_module.time, "sleep", slept.append)
    monkeypatch.setattr(audit_module.asyncio, "sleep", timer)
    return audit, slept, timers


async def _baseline(audit: PipeAudit) -> None:
    audit._reader = _READER  # as the first baseline look would have found it
    assert await audit.record_baseline() is None


async def test_a_repl_one_step_from_its_read_gets_the_core_not_a_loop_timer(monkeypatch):
    audit, slept, timers = _scripted(monkeypatch, [True, False, False, True])
    await _baseline(audit)
    assert await audit.check() is None
    assert slept == [audit_module._NUDGE_S] * 2  # two short sleeps, then it was back
    assert timers == []


async def test_a_repl_slow_to_come_back_blocks_the_loop_briefly_then_waits_on_timers(
    monkeypatch,
):
    audit, slept, timers = _scripted(monkeypatch, [True] + [False] * 9)
    await _baseline(audit)
    assert await audit.check() is None
    assert len(slept) == audit_module._NUDGES
    assert sum(slept) <= 0.2e-3  # the most the loop is ever blocked by one audit
    assert len(timers) == 9 - audit_module._NUDGES  # the rest of the wait: on the loop
