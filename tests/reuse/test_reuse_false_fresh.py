"""`reuse=false` runs on a freshly started REPL process (issue 28 item 4).

The proto: "With false a fresh process runs the whole snippet". Before the
fix, three reuse=false calls ran on the same warm worker (same REPL pid):
the router handed them to an idle worker that already held the header, or
imported it in-process.
"""

from __future__ import annotations

from leanrpc.pool.plan import View, WorkerView
from reuse_support import start, stop
from routing_support import MATHLIB, NOW, decided, job, router, view

SNIPPET = "import Mathlib\n\ntheorem t : 1 + 1 = 2 := rfl\n"


def snippet(n: int) -> str:
    """Distinct texts, so the result cache (its own `cache` option) answers none of them."""
    return SNIPPET.replace("theorem t ", f"theorem t{n} ")


def _plan(workers, queue, size: int = 1):
    return decided(router(size).plan(queue, workers, NOW))


def test_no_reuse_never_takes_a_used_process():
    warm = view("w1", View.IDLE)
    # warm and holding the header: reuse takes it, reuse=false starts a new process in its place
    assert _plan([warm], [job()]) == [("assign", "w1")]
    assert _plan([warm], [job(reuse=False)]) == [("switch", "w1")]
    # one that could import the header in-process: not for reuse=false either
    other = view("w1", View.IDLE, "import Aesop\n")
    assert _plan([other], [job(reuse=False)]) == [("switch", "w1")]
    # a free slot: a new worker, not waiting for one that will hold the header
    assert _plan([view("w1", View.BUSY, MATHLIB)], [job(reuse=False)], size=2) == [("start",)]
    # no header but it ran a job: not fresh; never ran one: it is
    used = WorkerView(name="w1", state=View.IDLE, served=True)
    assert _plan([used], [job(reuse=False)]) == [("switch", "w1")]
    assert _plan([WorkerView(name="w1", state=View.IDLE)], [job(reuse=False)]) == [("assign", "w1")]


async def test_three_reuse_false_calls_run_on_three_fresh_processes():
    app, client = await start(1)
    try:
        [warm] = await client.verify([SNIPPET])  # the one worker is warm now
        assert warm.status == "VALID"
        seen = [(warm.worker, {w.name: w.pid for w in app.pool.workers}[warm.worker])]
        for n in range(3):
            [result] = await client.verify([snippet(n)], reuse=False)
            assert result.status == "VALID", result.error
            assert not result.warm_header and result.reused_prefix_chars == 0
            pids = {w.name: w.pid for w in app.pool.workers}
            seen.append((result.worker, pids[result.worker]))
        names, pids = [n for n, _ in seen], [p for _, p in seen]
        assert len(set(names)) == 4 and len(set(pids)) == 4, seen
        [again] = await client.verify([snippet(9)])  # reuse=true takes the warm one left
        assert again.warm_header and again.worker == names[-1]
    finally:
        await stop(app, client)
