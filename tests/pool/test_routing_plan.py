"""Router.plan as a table: a situation (a snapshot: queue, worker views,
prefix facts, rent, now) and the decisions it must give. No processes, no
clock, no event loop; `Routing` keeps between plans what the pool's
dispatcher keeps (the rent book, the counters) and nothing else."""

from __future__ import annotations

import dataclasses

import pytest

from leanrpc.pool.admission import Admission
from leanrpc.pool.job import Job
from leanrpc.pool.plan import (
    JobView,
    View,
)
from routing_support import AESOP, BODY, MATHLIB, NOW, Routing, decided, job, key, router, view

# -- header rent: waiting for a busy holder of the header, or importing it ------------


def _header_situation(**kw):
    """`busy` holds Mathlib and runs; `idle` holds Aesop and may import one
    more header; importing Mathlib was measured at 0.3 s."""
    r = router(import_s={key(MATHLIB): 0.3}, **kw)
    return r, view("idle", View.IDLE, AESOP), view("busy", View.BUSY, MATHLIB)


def test_an_idle_worker_imports_a_busy_holders_header_once_the_wait_cost_one_import():
    r, idle, busy = _header_situation()
    waiting = job(MATHLIB)
    plan = r.plan([waiting], [idle, busy], NOW)
    assert decided(plan) == [] and plan.wake_at == pytest.approx(NOW + 0.3)
    assert r.rent.marks[waiting].since == NOW and r.rent.marks[waiting].header
    plan = r.plan([waiting], [idle, busy], NOW + 0.2)  # 0.2 s of idle time charged
    assert decided(plan) == [] and plan.wake_at == pytest.approx(NOW + 0.3)
    assert r.stats.header_wait_s == pytest.approx(0.2) and r.stats.prefix_wait_s == 0
    # 0.31 s paid >= the 0.3 s import: the idle worker imports it (long before the 2 s bound)
    assert decided(r.plan([waiting], [idle, busy], NOW + 0.31)) == [("import", "idle")]
    assert r.stats.header_spreads == 1 and r.stats.header_wait_s == pytest.approx(0.31)
    assert not any(r.rent.table.values())  # spent: the header's rent starts again from 0


def test_header_rent_adds_up_over_the_jobs_that_waited():
    r, idle, busy = _header_situation()
    first, second = job(MATHLIB), job(MATHLIB, "theorem y : 2 = 2 := rfl\n")
    assert decided(r.plan([first], [idle, busy], NOW)) == []
    # 0.2 s later the holder is free and takes the first job: 0.2 s charged to the header
    free = dataclasses.replace(busy, state=View.IDLE)
    assert decided(r.plan([first], [idle, free], NOW + 0.2)) == [("assign", "busy")]
    assert r.stats.header_wait_s == pytest.approx(0.2)
    # the second job of the header waits again while the holder runs the first ...
    plan = r.plan([second], [idle, busy], NOW + 0.3)
    assert decided(plan) == [] and plan.wake_at == pytest.approx(NOW + 0.4)
    # ... and 0.1 s more makes one import's worth: the idle worker imports it
    assert decided(r.plan([second], [idle, busy], NOW + 0.4)) == [("import", "idle")]


def test_without_a_measured_import_the_fixed_bound_decides():
    r = router()
    idle, busy = view("idle", View.IDLE, AESOP), view("busy", View.BUSY, MATHLIB)
    waiting = job(MATHLIB)
    assert decided(r.plan([waiting], [idle, busy], NOW)) == []
    assert decided(r.plan([waiting], [idle, busy], NOW + 1.9)) == []
    assert r.stats.header_wait_s == 0  # nothing charged: no import cost to weigh it against
    assert decided(r.plan([waiting], [idle, busy], NOW + 2.0)) == [("import", "idle")]


def test_header_rent_never_switches_a_worker_that_may_not_import():
    r, _idle, busy = _header_situation()
    full = view("idle", View.IDLE, AESOP, can_import=False)  # count or memory bound reached
    waiting = job(MATHLIB)
    for t in (0.0, 0.5, 1.0):
        assert decided(r.plan([waiting], [full, busy], NOW + t)) == []
    # a new process only at the fixed bound, as before
    assert decided(r.plan([waiting], [full, busy], NOW + 2.0)) == [("switch", "idle")]


# (situation, workers, queue, decisions)
TABLE = [
    (
        "an idle worker holding the header takes the job",
        [view("w1", View.IDLE), view("w2", View.BUSY)],
        [job()],
        [("assign", "w1")],
    ),
    (
        "the most recently used of two warm idle workers",
        [view("w1", View.IDLE, last_used=5), view("w2", View.IDLE, last_used=9)],
        [job()],
        [("assign", "w2")],
    ),
    (
        "a fresh idle worker (no header) takes a job of any header",
        [view("w1", View.IDLE, header=None)],
        [job(AESOP)],
        [("assign", "w1")],
    ),
    (
        "no idle worker, a free slot: start one",
        [view("w1", View.BUSY, AESOP)],
        [job()],
        [("start",)],
    ),
    (
        "no idle worker, no free slot: nothing",
        [view("w1", View.BUSY), view("w2", View.BUSY)],
        [job()],
        [],
    ),
    (
        "a stopping worker still holds its slot",
        [view("w1", View.STOPPING), view("w2", View.BUSY)],
        [job()],
        [],
    ),
    (
        "a dead worker holds no slot",
        [view("w1", View.GONE), view("w2", View.BUSY)],
        [job()],
        [("start",)],
    ),
    (
        "only another header idle, nobody will hold ours: the idle one imports ours in-process",
        [view("w1", View.IDLE, AESOP), view("w2", View.BUSY, AESOP)],
        [job()],
        [("import", "w1")],
    ),
    (
        "the same when it may not import another (count or memory bound): switch it",
        [view("w1", View.IDLE, AESOP, can_import=False), view("w2", View.BUSY, AESOP)],
        [job()],
        [("switch", "w1")],
    ),
    (
        "another header idle, but a busy worker holds ours: wait for it",
        [view("w1", View.IDLE, AESOP), view("w2", View.BUSY)],
        [job()],
        [],
    ),
    (
        "the same, once the job waited max_wait_for_warm_s: import",
        [view("w1", View.IDLE, AESOP), view("w2", View.BUSY)],
        [job(age=2.5)],
        [("import", "w1")],
    ),
    (
        "of two importers, the least recently used (same count) imports",
        [view("w1", View.IDLE, AESOP, last_used=9), view("w2", View.IDLE, AESOP, last_used=1)],
        [job()],
        [("import", "w2")],
    ),
    (
        "of two importers, the one holding fewer headers imports (the cheapest import)",
        [
            view("w1", View.IDLE, AESOP, last_used=1, also=("import Lean\n",)),
            view("w2", View.IDLE, AESOP, last_used=9),
        ],
        [job()],
        [("import", "w2")],
    ),
    (
        "a worker holding the header among others takes the job, no import",
        [view("w1", View.IDLE, AESOP, also=(MATHLIB,)), view("w2", View.IDLE, AESOP)],
        [job()],
        [("assign", "w1")],
    ),
    (
        "jobs of two headers, one worker holding both and one holding one: each gets one",
        [view("w1", View.IDLE, AESOP, also=(MATHLIB,)), view("w2", View.IDLE, AESOP)],
        [job(), job(AESOP)],
        [("assign", "w1"), ("assign", "w2")],
    ),
    (
        "the least recently used idle worker is the one switched",
        [
            view("w1", View.IDLE, AESOP, last_used=9, can_import=False),
            view("w2", View.IDLE, AESOP, last_used=1, can_import=False),
        ],
        [job()],
        [("switch", "w2")],
    ),
    (
        "another profile's idle worker never imports our header: it is switched",
        [view("w1", View.IDLE, AESOP, profile="v2"), view("w2", View.BUSY, AESOP)],
        [job()],
        [("switch", "w1")],
    ),
    (
        "a fresh worker of another profile is not ours either",
        [view("w1", View.IDLE, header=None, profile="v2"), view("w2", View.BUSY, AESOP)],
        [job()],
        [("switch", "w1")],
    ),
    (
        "a job of a profile takes that profile's fresh worker",
        [view("w1", View.IDLE, header=None, profile="v2"), view("w2", View.BUSY, AESOP)],
        [job(profile="v2")],
        [("assign", "w1")],
    ),
    (
        "a header of one profile is not held by a worker of another (keys are qualified)",
        [view("w1", View.IDLE, MATHLIB), view("w2", View.BUSY)],
        [job(profile="v2")],
        [("switch", "w1")],
    ),
    (
        "a job past its deadline expires, the next one runs",
        [view("w1", View.IDLE)],
        [job(deadline=NOW - 1), job()],
        [("expire",), ("assign", "w1")],
    ),
    (
        "two jobs, one idle warm worker and one free slot",
        [view("w1", View.IDLE)],
        [job(), job(AESOP)],
        [("assign", "w1"), ("start",)],
    ),
    (
        "while a worker spawns, a job whose header a busy worker holds does not start another",
        [view("w1", View.BUSY), view("w2", View.SPAWNING, header=None)],
        [job()],
        [],
    ),
    # A fresh retry (pool/runner.py: it failed on a process another job ran on).
    (
        "a fresh retry takes the warm worker no job ran on, not the more recent used one",
        [view("w1", View.IDLE, last_used=1.0), view("w2", View.IDLE, served=True, last_used=9.0)],
        [job(fresh_process=True)],
        [("assign", "w1")],
    ),
    (
        "a fresh retry never takes a worker a job ran on: it switches one",
        [view("w1", View.IDLE, served=True), view("w2", View.BUSY, served=True)],
        [job(fresh_process=True)],
        [("switch", "w1")],
    ),
    (
        "a fresh retry waits for the pool's replacement warming up rather than switch",
        [view("w1", View.IDLE, served=True), view("w2", View.WARMING, served=False)],
        [job(fresh_process=True)],
        [],
    ),
    (
        "a worker spawning for another job is no replacement to wait for",
        [view("w1", View.IDLE, served=True), view("w2", View.SPAWNING, header=None, served=True)],
        [job(fresh_process=True)],
        [("switch", "w1")],
    ),
    (
        "reuse=false (the proto's promise) takes no warm worker, even one no job ran on",
        [view("w1", View.IDLE), view("w2", View.BUSY, served=True)],
        [job(reuse=False)],
        [("switch", "w1")],
    ),
]


@pytest.mark.parametrize("situation,workers,queue,expected", TABLE, ids=[row[0] for row in TABLE])
def test_plan(situation, workers, queue, expected):
    assert decided(router(size=2).plan(queue, workers, NOW)) == expected


def test_a_waiting_job_asks_to_be_woken_when_its_wait_bound_passes():
    plan = router().plan([job(age=0.5)], [view("w1", View.IDLE, AESOP), view("w2", View.BUSY)], NOW)
    assert plan.decisions == [] and plan.wake_at == pytest.approx(NOW + 1.5)


def test_a_plan_does_not_change_the_views_it_was_given():
    workers = [view("w1", View.IDLE)]
    router().plan([job()], workers, NOW)
    assert workers[0].state is View.IDLE


# -- prefix routing ------------------------------------------------------------


def _holder_situation(expected_busy_s: float, costs=((1.3, None), (0.3, 50))):
    """`holder` is busy and elaborated a 200-line prefix of the job; `other`
    is idle and holds nothing. Measured: a full body 1.3 s, a 50-character
    edit 0.3 s (1 s of text plus 0.3 s overhead)."""
    old = job(body=BODY)
    new = job(body=BODY + "theorem z : 0 = 0 := rfl\n")
    r = router(costs=[(s, c if c is not None else len(old.text)) for s, c in costs])
    r.index.remember("holder", old.scope, old.text)
    holder = view("holder", View.BUSY, busy_since=NOW, expected_busy_s=expected_busy_s)
    other = view("other", View.IDLE)
    return r, new, holder, other, old


def test_a_job_waits_for_a_busy_worker_holding_a_much_longer_prefix():
    r, new, holder, other, old = _holder_situation(0.05, costs=((1.0, None),))
    plan = r.plan([new], [holder, other], NOW)
    assert decided(plan) == [] and r.stats.prefix_waits == 1
    assert plan.wake_at is not None and plan.wake_at > NOW
    # once it has waited max_wait_for_warm_s it takes the idle worker
    new = dataclasses.replace(new, enqueued_at=NOW - 2.5)
    assert decided(r.plan([new], [holder, other], NOW)) == [("assign", "other")]
    # and when the holder is idle it is simply the best candidate
    holder = dataclasses.replace(holder, state=View.IDLE)
    assert decided(r.plan([new], [other, holder], NOW)) == [("assign", "holder")]
    assert r.index.reusable_prefix("holder", new.scope, new.text) == len(old.text)


def test_a_job_takes_the_idle_worker_when_the_holder_is_far_from_done():
    r, new, holder, other, _old = _holder_situation(expected_busy_s=5.0)
    assert decided(r.plan([new], [holder, other], NOW + 0.1)) == [("assign", "other")]
    assert r.stats.prefix_waits == 0 and r.stats.prefix_spreads == 1


def test_a_holder_past_its_estimate_is_expected_to_overrun_by_as_much_again():
    r, new, holder, other, _old = _holder_situation(expected_busy_s=0.2)
    assert decided(r.plan([new], [holder, other], NOW + 0.1)) == []
    assert decided(r.plan([new], [holder, other], NOW + 1.5)) == [("assign", "other")]


def test_waiting_rent_spreads_a_hot_prefix_to_the_idle_worker():
    r, new, holder, other, _old = _holder_situation(expected_busy_s=0.3)
    assert decided(r.plan([new], [holder, other], NOW)) == []
    assert r.stats.prefix_waits == 1 and r.rent.marks[new].since == NOW
    # it waited 0.8 s with `other` idle, and the holder took another request
    holder = dataclasses.replace(holder, busy_since=NOW + 0.8)
    # 0.3 s more + 0.8 s already paid >= 1 s of text: elaborate it on `other`
    assert decided(r.plan([new], [holder, other], NOW + 0.8)) == [("assign", "other")]
    assert abs(r.stats.prefix_wait_s - 0.8) < 1e-9
    assert r.stats.prefix_spreads == 1 and r.stats.prefix_waits == 1


def test_without_incrementality_prefixes_do_not_route():
    r, new, holder, other, _old = _holder_situation(0.05)
    r.incrementality = False
    assert decided(r.plan([new], [holder, other], NOW)) == [("assign", "other")]


# -- fair admission order ------------------------------------------------------


def queued(**kw) -> Job:
    """A job as the queue holds it (the pool's own object)."""
    return job(**kw).job


def test_fair_order_takes_one_job_per_client_then_per_stream():
    queue = Admission(queue_limit=100)
    big = [queued(client_id="big", stream_id="s1") for _ in range(5)]
    big2 = [queued(client_id="big", stream_id="s2") for _ in range(2)]
    small = [queued(client_id="small") for _ in range(2)]
    for j in big + big2 + small:
        queue.push(j)
    order = queue.ordered(100)
    # newest client first (it had nothing queued), then one per client in turn;
    # within "big", its streams in arrival order (s1, then s2)
    assert order[:4] == [small[0], big[0], small[1], big2[0]]
    assert len(order) == 9 and set(order) == set(big + big2 + small)
    # the client just served goes to the back of the rotation
    queue.take(small[0])
    assert queue.ordered(2) == [big[0], small[1]]


def test_one_clients_unary_calls_are_served_in_arrival_order():
    """Each unary Verify is a stream of its own: a new stream must not jump ahead of the
    client's older ones (it did: LIFO, p99 latency 1.7x LeanInteract's in the mixed compare)."""
    queue = Admission(queue_limit=100)
    calls = [queued(client_id="peer:ipv4:127.0.0.1", stream_id=f"batch-{n}") for n in range(5)]
    for j in calls:
        queue.push(j)
    assert queue.ordered(100) == calls
    queue.take(calls[0])
    queue.push(late := queued(client_id="peer:ipv4:127.0.0.1", stream_id="batch-5"))
    assert queue.ordered(100) == calls[1:] + [late]


def test_admission_check_is_the_queue_limit():
    from leanrpc.errors import OverloadedError

    queue = Admission(queue_limit=2)
    queue.check(2)
    queue.push(queued())
    with pytest.raises(OverloadedError) as info:
        queue.check(2)
    assert info.value.retry_after_s > 0
    assert len(queue) == 1 and queue.remove(queue.ordered(1)[0]) and len(queue) == 0


class _StateCall:
    """A WorkerCall whose state `held` workers hold (all of its work but the tactic)."""

    def __init__(self, name: str, held: tuple[str, ...]) -> None:
        self.scope, self.text, self.held = (
            f"proof:{name}",
            f"theorem {name} : True := by\n  trivial\n",
            held,
        )

    def held_chars(self, worker_name: str) -> int:
        return len(self.text) - 10 if worker_name in self.held else 0


def _call_job(name: str, held: tuple[str, ...], *, age: float = 0.0) -> JobView:
    return job(call=_StateCall(name, held), client_id=name, stream_id=name, age=age)


def test_an_idle_worker_takes_a_state_it_holds_before_one_it_would_rebuild():
    # a's state is on the busy worker w1, b's on the idle w2: fair order says a
    # first, but running a on w2 would rebuild a state w1 holds while w2's own
    # b waits; w2 takes b and a waits for its holder.
    r = router(costs=[(0.01, 100)])
    a, b = _call_job("a", ("w1",)), _call_job("b", ("w2",))
    w1 = view("w1", View.BUSY, busy_since=NOW, expected_busy_s=0.05)
    w2 = view("w2", View.IDLE)
    assert decided(r.plan([a, b], [w1, w2], NOW)) == [("assign", "w2")]
    plan = r.plan([a, b], [w1, w2], NOW)
    assert [d.job for d in plan.decisions] == [b]
    # with nothing of its own queued, the idle worker rebuilds a's state (spreads)
    assert [d.job for d in r.plan([a], [w1, w2], NOW).decisions] == [a]
    # and once the oldest job has waited max_wait_for_warm_s, fair order alone decides
    old_a = _call_job("a", ("w1",), age=2.5)
    assert [d.job for d in r.plan([old_a, b], [w1, w2], NOW).decisions] == [old_a]


def test_a_state_the_idle_worker_holds_goes_before_one_nobody_holds():
    # a's state was lost with its worker (nobody holds it), b is held by both
    # workers: the idle one runs b at once and a is rebuilt by the next free worker.
    r = router(costs=[(0.01, 100)])
    a, b = _call_job("a", ()), _call_job("b", ("w1", "w2"))
    w1 = view("w1", View.BUSY, busy_since=NOW, expected_busy_s=0.05)
    w2 = view("w2", View.IDLE)
    assert [d.job for d in r.plan([a, b], [w1, w2], NOW).decisions] == [b]


def test_a_job_avoiding_a_worker_takes_another_idle_one_but_not_none():
    """The Prover's whole-proof check (issue 28): not on the worker that found the
    proof while another idle worker holds the header; on it when it is the only one."""
    r = router(incrementality=False)
    both = [view("w1", View.IDLE, last_used=5), view("w2", View.IDLE, last_used=9)]
    assert decided(r.plan([job()], both, NOW)) == [("assign", "w2")]  # the control: most recent
    assert decided(r.plan([job(avoid_worker="w2")], both, NOW)) == [("assign", "w1")]
    alone = [view("w1", View.BUSY), view("w2", View.IDLE, last_used=9)]
    assert decided(r.plan([job(avoid_worker="w2")], alone, NOW)) == [("assign", "w2")]


class _TimedStateCall(_StateCall):
    """A `_StateCall` with a measured price (the Prover's `char_s`: its command and
    tactics as timed, per character of its text)."""

    def __init__(self, name: str, held: tuple[str, ...], char_s: float) -> None:
        super().__init__(name, held)
        self.char_s = char_s


def test_a_state_waits_for_its_busy_holder_when_its_rebuild_costs_more_than_the_wait():
    # A search-only server: no body was ever measured, so the body cost model knows
    # nothing; the call's own measured price decides. a's state (26 characters of
    # work, 2 ms each: a 52 ms rebuild) is on the busy w1; w2 is idle.
    r = router()
    assert not r.cost.known
    a = job(call=_TimedStateCall("a", ("w1",), char_s=0.002), client_id="a")
    w2 = view("w2", View.IDLE)
    soon = view("w1", View.BUSY, busy_since=NOW, expected_busy_s=0.02)
    plan = r.plan([a], [soon, w2], NOW)
    assert plan.decisions == [] and r.stats.prefix_waits == 1  # 20 ms of wait < 52 ms of rebuild
    assert plan.wake_at is not None and plan.wake_at > NOW
    late = view("w1", View.BUSY, busy_since=NOW, expected_busy_s=0.2)
    [decision] = Routing().plan([a], [late, w2], NOW).decisions
    assert (decision.worker, decision.job) == ("w2", a)  # 200 ms of wait > the rebuild
    # Its expected time on w2 is its whole text at its own price (w1's wait estimates use it).
    assert abs(decision.expected_s - 0.002 * len(a.text)) < 1e-12
    # The control: without a price (the call before it was timed) it never waits.
    unpriced = _call_job("a", ("w1",))
    assert [d.job for d in router().plan([unpriced], [soon, w2], NOW).decisions] == [unpriced]
