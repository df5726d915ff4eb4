"""One poll timer for every worker's memory watch (issue 38 item 6): each watch
in flight is looked at every `memory_poll_s`, one over its limit is stopped
alone, an idle server has no timer, and a failing look stops only its watch."""

from __future__ import annotations

import asyncio

from leanrpc.config import LimitsConfig
from leanrpc.worker import memwatch
from leanrpc.worker.memwatch import MemoryWatch

POLL_S = 0.02
LIMIT_MB = 100


class Tree:
    """A fake tree: its memory, the limits it was asked with, and the over-verdicts."""

    def __init__(self, name: str, mb: int = 10) -> None:
        self.name, self.mb, self.asked, self.killed = name, mb, [], []
        self.watch = MemoryWatch(
            name,
            LimitsConfig(max_worker_rss_mb=LIMIT_MB, memory_poll_s=POLL_S),
            self,
            lambda: "",
            on_over=self.killed.append,
        )
        self.watch.start()

    def memory(self, limit: int) -> int:
        self.asked.append(limit)
        return self.mb << 20

    tree_within = memory

    def tree_plan(self) -> None:
        return None  # no numbers for the C thread: the loop's timer looks


async def _until(condition, within_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the watch did not look"
        await asyncio.sleep(POLL_S / 10)


def _timers(loop) -> int:
    return sum(1 for t in loop._scheduled if not t.cancelled())


async def test_watches_share_one_timer_and_each_is_looked_at_every_period():
    loop = asyncio.get_running_loop()
    trees = [Tree(f"w{n}") for n in range(4)]
    for tree in trees:
        tree.watch.exchanging(True)
    assert _timers(loop) == 1
    await _until(lambda: len(trees[0].asked) >= 5)
    # One tick looks at all of them: each was looked at as often as the others.
    assert [len(tree.asked) for tree in trees] == [len(trees[0].asked)] * 4
    for tree in trees:
        assert tree.asked[0] == LIMIT_MB << 20  # the poll asks with the limit
        assert tree.killed == []
    # One grows over its limit: it alone is stopped, at the next tick.
    trees[1].mb = LIMIT_MB + 1
    seen = [len(tree.asked) for tree in trees]
    await _until(lambda: trees[1].killed)
    assert [str(e.message) for e in trees[1].killed] == [
        f"worker w1 used {LIMIT_MB + 1} MB, over the {LIMIT_MB} MB limit; killed"
    ]
    assert [len(tree.asked) for tree in trees] == [n + 1 for n in seen]  # at the next tick
    await _until(lambda: len(trees[0].asked) >= seen[0] + 4)
    assert len(trees[1].asked) == seen[1] + 1  # no more looks at the killed one
    assert [len(trees[n].asked) for n in (2, 3)] == [len(trees[0].asked)] * 2
    # Commands end: each leaves at its next look; then no timer is left.
    for tree in trees:
        tree.watch.exchanging(False)
    await asyncio.sleep(POLL_S * 2)
    assert _timers(loop) == 0
    asked = [len(tree.asked) for tree in trees]
    await asyncio.sleep(POLL_S * 2)
    assert [len(tree.asked) for tree in trees] == asked


async def test_a_watch_joining_mid_period_is_looked_at_within_one_period():
    first, late = Tree("first"), Tree("late", mb=LIMIT_MB + 5)
    first.watch.exchanging(True)
    await _until(lambda: len(first.asked) >= 2)
    await asyncio.sleep(POLL_S / 2)  # mid-period
    late.watch.exchanging(True)
    before = len(first.asked)
    await _until(lambda: late.killed)
    assert len(first.asked) == before + 1  # the late one was looked at the timer's next tick
    first.watch.exchanging(False)


async def test_a_failing_look_stops_only_that_watch_and_a_stopped_worker_leaves():
    loop = asyncio.get_running_loop()
    errors = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context["exception"]))
    broken, good, gone = Tree("broken"), Tree("good"), Tree("gone")

    def fail(limit: int) -> int:
        raise OSError("unreadable")

    broken.watch._tree_memory = fail
    for tree in (broken, good, gone):
        tree.watch.exchanging(True)
    await asyncio.sleep(POLL_S * 2.5)
    assert [type(e) for e in errors] == [OSError]
    gone.watch.stop()  # the worker died: it leaves the timer at once
    seen = len(gone.asked)
    count = len(good.asked)
    await asyncio.sleep(POLL_S * 3)
    assert len(good.asked) > count and len(gone.asked) == seen
    # The broken watch joins again with its next command.
    broken.watch._tree_memory = broken.memory
    broken.watch.exchanging(True)
    await asyncio.sleep(POLL_S * 2.5)
    assert broken.asked
    for tree in (broken, good):
        tree.watch.exchanging(False)
    await asyncio.sleep(POLL_S * 2)
    assert _timers(loop) == 0


async def test_no_timer_without_a_limit_or_before_the_handshake():
    loop = asyncio.get_running_loop()
    off = MemoryWatch(
        "off",
        LimitsConfig(max_worker_rss_mb=-1, memory_poll_s=POLL_S),
        Tree("off"),
        lambda: "",
        on_over=lambda exc: None,
    )
    off.start()
    off.exchanging(True)
    booting = Tree("booting")
    booting.watch._watching = False  # before start(): the boot probe
    booting.watch.exchanging(True)
    assert _timers(loop) == 0
    assert memwatch._Ticker._of.get(loop, {}).get(POLL_S) is None or not (
        memwatch._Ticker._of[loop][POLL_S]._watches
    )


def test_the_shared_timer_runs_on_uvloop_too():
    """`[server] event_loop = "uvloop"`: the timer's loop is a uvloop Loop (weakly keyed)."""
    import uvloop

    async def run() -> list:
        calm, over = Tree("calm"), Tree("over", mb=LIMIT_MB + 1)
        calm.watch.exchanging(True)
        over.watch.exchanging(True)
        await _until(lambda: over.killed and len(calm.asked) >= 3)
        calm.watch.exchanging(False)
        await asyncio.sleep(POLL_S * 2)
        return [len(over.asked), calm.killed]

    loop = uvloop.new_event_loop()
    try:
        assert loop.run_until_complete(run()) == [1, []]
    finally:
        loop.close()
