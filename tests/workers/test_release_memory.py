"""The memory read when a command ends (issue 38 item 6): the exact sum (a status read per
process of the tree) only when the import estimate it feeds is due, the memory watch's
cheap bound in between, and a tree over the limit still told at every release.

A real child tree measured through /proc (worker/memory.py `TreeMemory`); only the clock
that says how old the last exact read is, is the test's.
"""

from __future__ import annotations

import subprocess
import sys
import types

import psutil
import pytest

from leanrpc.worker import process as process_module
from leanrpc.worker.memory import TreeMemory
from leanrpc.worker.process import ReplProcess

GIB = 2**30


@pytest.fixture
def measured(monkeypatch):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    clock = [1000.0]
    # Only process.py's clock: the tree's own refresh clock (worker/memory.py) stays real.
    monkeypatch.setattr(process_module, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    repl = ReplProcess("w", None, None)  # never launched: only its tree is measured
    repl.memory = TreeMemory(child.pid)
    repl._psutil = psutil.Process(child.pid)
    try:
        yield repl, clock
    finally:
        child.kill()
        child.wait()


def test_exact_when_due_and_the_bound_in_between(measured):
    repl, clock = measured
    reads = lambda: repl.memory.exact_reads  # noqa: E731
    value, exact = repl.memory_at_release(4 * GIB, headers=1)
    assert exact and value > 0 and reads() == 1  # the first release: exact
    value, exact = repl.memory_at_release(4 * GIB, headers=1)
    assert not exact and value >= 0 and reads() == 1  # within a second, same headers: the bound
    _value, exact = repl.memory_at_release(4 * GIB, headers=2)
    assert exact and reads() == 2  # an import since: exact again
    clock[0] += 0.5
    assert repl.memory_at_release(4 * GIB, headers=2)[1] is False and reads() == 2
    clock[0] += 0.6  # over a second since the last exact read
    assert repl.memory_at_release(4 * GIB, headers=2)[1] is True and reads() == 3


def test_a_tree_over_the_limit_is_told_by_the_bound_path_too(measured):
    repl, _clock = measured
    exact, _ = repl.memory_at_release(4 * GIB, headers=1)
    over, is_exact = repl.memory_at_release(1024, headers=1)  # a limit the tree is over
    assert not is_exact and over > 1024  # over the bound: the exact sum decides
    assert repl.memory.exact_reads == 2 and over == pytest.approx(exact, rel=0.5)


def test_the_worker_keeps_only_exact_reads_for_its_import_estimate(monkeypatch):
    from leanrpc.worker.worker import Worker

    answers = iter([(300, True), (900, False), (400, True)])
    worker = Worker.__new__(Worker)
    worker.headers, worker.rss_at_release = {"h": 1}, 0
    worker._process = type("P", (), {"memory_at_release": lambda self, *a: next(answers)})()
    assert worker.memory_at_release(GIB) == 300 and worker.rss_at_release == 300
    assert worker.memory_at_release(GIB) == 900 and worker.rss_at_release == 300
    assert worker.memory_at_release(GIB) == 400 and worker.rss_at_release == 400
