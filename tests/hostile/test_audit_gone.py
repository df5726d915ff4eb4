"""A REPL killed while the audit looks at it is a crash, not a forgery.

A kill -9 that lands during the fence audit makes a look fail first (a /proc file
gone, a thread leaving its read), and the worker used to be counted "poisoned"
(1 of about 40 kills in the reliability report). The answer is withheld either way;
now a failed look of a REPL that is no longer running raises ProcessGone (the
channel's crash path), and a failed look of a live one stays a poisoning.
"""

from __future__ import annotations

import os

import pytest

from leanrpc.worker.audit import PipeAudit, ProcessGone, _Snapshot

_READER = (4242, 4242)


def _audit(monkeypatch, running: bool) -> PipeAudit:
    """An audit past its baseline whose every look is fine but the I/O accounting
    read, which fails (as a dying thread's /proc file does)."""
    audit = PipeAudit(os.getpid(), (1, 2, 3), settle_s=30.0)
    looks = _Snapshot({}, 1, [_READER], [])
    monkeypatch.setattr(audit, "_snapshot", lambda: looks)
    monkeypatch.setattr(audit, "_reader_reads", lambda: True)
    monkeypatch.setattr(audit, "_running", lambda: running)
    audit._baseline, audit._reader, audit._reader_io = looks, _READER, (0, 0)

    def gone_file():
        raise FileNotFoundError("/proc/4242/task/4242/io")

    monkeypatch.setattr(audit, "_thread_io", gone_file)
    return audit


async def test_a_failed_look_at_a_dead_repl_is_its_death(monkeypatch):
    with pytest.raises(ProcessGone):
        await _audit(monkeypatch, running=False).check()


async def test_a_failed_look_at_a_live_repl_stays_a_poisoning(monkeypatch):
    problem = await _audit(monkeypatch, running=True).check()
    assert problem is not None and "I/O accounting" in problem
