"""The supervisor's re-warm of a lost worker's header, put off while jobs wait.

Found under CPU stress (tests/reuse/test_warm_spares.py): a timeout kill
reaped while the next caller's job sat in the queue skipped the re-warm
("dispatch starts workers on demand"), but that job found another warm worker,
so no worker was ever started and the pool stayed a worker short. Now the
re-warm waits for an empty queue, and is dropped only if dispatch filled the
slot meanwhile. A fake pool port, no processes."""

from __future__ import annotations

from leanrpc.config import Config
from leanrpc.pool.supervisor import Supervisor

KEY = "import Mathlib"


class _Port:
    def __init__(self) -> None:
        self.config = Config()  # 2 workers
        self.closing = False
        self.queued = 0
        self.free = 1

    @property
    def admission(self) -> list:  # the supervisor only asks its length
        return [None] * self.queued

    def free_slots(self) -> int:
        return self.free


def _supervisor():
    port = _Port()
    supervisor = Supervisor(port)
    supervisor.imports_text[KEY] = ("import Mathlib\n", "")
    preloaded: list = []
    supervisor.preload_header = lambda imports, profile="": preloaded.append((imports, profile))
    return port, supervisor, preloaded


def test_a_rewarm_put_off_while_jobs_wait_happens_once_the_queue_is_empty():
    port, supervisor, preloaded = _supervisor()
    port.queued = 1
    supervisor.rewarm(KEY)
    supervisor.rewarm_deferred()
    assert preloaded == []  # jobs still wait: dispatch may start one on demand
    port.queued = 0  # the job took another warm worker: the slot is still free
    supervisor.rewarm_deferred()
    assert preloaded == [("import Mathlib\n", "")]
    supervisor.rewarm_deferred()
    assert len(preloaded) == 1  # once


def test_a_rewarm_put_off_is_dropped_when_dispatch_filled_the_slot():
    port, supervisor, preloaded = _supervisor()
    port.queued = 1
    supervisor.rewarm(KEY)
    port.queued, port.free = 0, 0  # dispatch started a worker for the job
    supervisor.rewarm_deferred()
    port.free = 1  # a later free slot is not this loss's to fill
    supervisor.rewarm_deferred()
    assert preloaded == []


def test_an_empty_queue_rewarms_at_once():
    _port, supervisor, preloaded = _supervisor()
    supervisor.rewarm(KEY)
    assert preloaded == [("import Mathlib\n", "")]
