"""The memory watch on its C thread (worker/memwatch.py `_NativeTicker`, issue 38 item 6):
a real tree (worker/memory.py `TreeMemory`) is armed there for each exchange, the loop
gets no timer and no look while the tree stays within its limit, a tree that grows over it
is stopped at a tick, and a tree the thread cannot answer for (its own cgroup) is watched
by the loop's timer as before. Where the extensions are off, every watch is on the loop's."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from leanrpc.config import LimitsConfig
from leanrpc.worker import memory, memwatch
from leanrpc.worker.memory import TreeMemory
from leanrpc.worker.memwatch import MemoryWatch

POLL_S = 0.02
LIMIT_MB = 200

# A child that allocates and touches 300 MB when it reads a line.
_GROWER = """
import sys
print("ready", flush=True)
held = []
for line in sys.stdin:
    held.append(bytearray(300 << 20))
    print("grown", flush=True)
"""


@pytest.fixture
def grower():
    child = subprocess.Popen(
        [sys.executable, "-c", _GROWER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout.readline().strip() == "ready"
    yield child
    child.kill()
    child.wait()


class Watched:
    """A real tree's watch, counting the samples the loop takes."""

    def __init__(self, pid: int, *, cgroup_dir: str | None = None) -> None:
        self.tree = TreeMemory(pid, cgroup_dir=cgroup_dir)
        self.samples, self.killed = 0, []
        self.watch = MemoryWatch(
            f"tree{pid}",
            LimitsConfig(max_worker_rss_mb=LIMIT_MB, memory_poll_s=POLL_S),
            self,
            lambda: "",
            on_over=self.killed.append,
        )
        self.watch.start()

    def tree_within(self, limit: int) -> int:  # as worker/process.py's ReplProcess
        self.samples += 1
        return self.tree.sample(limit=limit)

    def tree_plan(self):
        return self.tree.native_plan()


def _timers(loop) -> int:
    return sum(1 for t in loop._scheduled if not t.cancelled())


async def _until(condition, within_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the watch did not act"
        await asyncio.sleep(POLL_S / 4)


@pytest.mark.skipif(memory._native is None, reason="the extensions are off (next test)")
async def test_the_c_thread_watches_a_real_tree_and_stops_it_over_its_limit(grower):
    loop = asyncio.get_running_loop()
    watched = Watched(grower.pid)
    watched.watch.exchanging(True)
    native = memwatch._NativeTicker.of(POLL_S)
    assert watched.watch._native is native and _timers(loop) == 0
    ticks = native._watcher.ticks
    await asyncio.sleep(POLL_S * 8)
    assert native._watcher.ticks >= ticks + 3  # looked at on the C thread
    # Within the limit: the loop looked only when the tree's first list and scan were due.
    assert watched.samples <= 2 and watched.killed == []
    grower.stdin.write("grow\n")
    grower.stdin.flush()
    assert grower.stdout.readline().strip() == "grown"
    await _until(lambda: watched.killed)
    assert f"over the {LIMIT_MB} MB limit" in str(watched.killed[0].message)
    assert watched.watch._native is None and _timers(loop) == 0  # not armed again


@pytest.mark.skipif(memory._native is None, reason="the extensions are off (next test)")
async def test_an_exchange_end_pauses_the_arming_and_the_next_start_resumes_it(grower):
    """Back-to-back exchanges keep one arming; one that ends with no exchange after it is
    released at the thread's next tick; a stopped worker is disarmed at once."""
    watched = Watched(grower.pid)
    native = memwatch._NativeTicker.of(POLL_S)
    armed = native._watcher.armed
    watched.watch.exchanging(True)
    key = native._key_of[watched.watch]
    assert native._watcher.armed == armed + 1
    watched.watch.exchanging(False)
    watched.watch.exchanging(True)  # before the next tick: the same arming, resumed
    assert native._key_of[watched.watch] == key and native._watcher.armed == armed + 1
    await asyncio.sleep(POLL_S * 4)
    assert native._watcher.armed == armed + 1  # looked at, not released
    watched.watch.exchanging(False)
    await _until(lambda: native._watcher.armed == armed)  # released at a tick
    watched.watch.exchanging(True)  # armed afresh
    assert native._key_of[watched.watch] != key and native._watcher.armed == armed + 1
    watched.watch.stop()  # the worker is gone
    assert native._watcher.armed == armed and watched.watch._native is None


async def test_a_tree_in_its_own_cgroup_is_watched_by_its_memory_stat(grower, tmp_path):
    """The sample reads the worker cgroup's memory.stat alone: so does the C thread (or,
    with the extensions off, the loop's timer), and a tree over its limit is stopped."""
    loop = asyncio.get_running_loop()
    (tmp_path / "memory.stat").write_text("anon 1000\nfile 99999999999\nshmem 0\n")
    watched = Watched(grower.pid, cgroup_dir=str(tmp_path))
    watched.watch.exchanging(True)
    if memory._native is not None:
        assert watched.watch._native is not None and _timers(loop) == 0
        await asyncio.sleep(POLL_S * 5)
        assert watched.samples == 0  # never handed back: within, by memory.stat
    else:
        assert _timers(loop) == 1
        await _until(lambda: watched.samples >= 3)
    (tmp_path / "memory.stat").write_text(f"anon {(LIMIT_MB - 1) << 20}\nshmem {2 << 20}\n")
    await _until(lambda: watched.killed)
    assert _timers(loop) == 0 and watched.watch._native is None


async def test_a_tree_the_c_thread_cannot_answer_for_is_on_the_loops_timer(grower):
    """Shared-memory files seen in the tree: every sample scans them, so no plan for the C
    thread; the loop's shared timer looks, and still stops a tree over its limit."""
    loop = asyncio.get_running_loop()
    watched = Watched(grower.pid)
    watched.tree.shmem_seen = True
    watched.watch.exchanging(True)
    assert watched.watch._native is None and _timers(loop) == 1
    await _until(lambda: watched.samples >= 3)
    grower.stdin.write("grow\n")
    grower.stdin.flush()
    assert grower.stdout.readline().strip() == "grown"
    await _until(lambda: watched.killed)
    assert _timers(loop) == 0


async def test_without_a_thread_the_loops_timer_looks(grower, monkeypatch):
    """The C thread cannot be started (eventfd refused): the request is still watched."""
    loop = asyncio.get_running_loop()

    def refused(period: float):
        raise OSError("eventfd failed")

    monkeypatch.setattr(memwatch._NativeTicker, "of", classmethod(lambda cls, p: refused(p)))
    watched = Watched(grower.pid)
    watched.watch.exchanging(True)
    assert watched.watch._native is None and _timers(loop) == 1
    await _until(lambda: watched.samples >= 2)
    watched.watch.exchanging(False)
