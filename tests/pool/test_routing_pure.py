"""Router.plan is pure: a snapshot of plain data in, decisions, counters and
rent changes out, and the snapshot unchanged (issue 27 item 5). The facts
here are plain tables (no prefix index, no sessions, no proofs); the rent
book is the dispatcher's own `RentBook`, applied as the pool applies it."""

from __future__ import annotations

import collections
import dataclasses

import pytest

from leanrpc.pool.dispatch import RentBook
from leanrpc.pool.plan import CostView, Mark, RentChange, Snapshot, View
from leanrpc.pool.routing import RENT_ENTRIES, Router
from routing_support import NOW, decided, job, view


class TableFacts:
    """PrefixFacts as two plain tables."""

    def __init__(self, held=None, holders=None) -> None:
        self.held_table = dict(held or {})
        self.holders = dict(holders or {})

    def held(self, job, worker: str) -> int:
        return self.held_table.get((job, worker), 0)

    def holder(self, job):
        return self.holders.get(job)


COST = CostView(known=True, per_char=0.01, overhead_s=0.05)  # 100 characters a second
BODY = "".join(f"theorem t{i} : {i} = {i} := rfl\n" for i in range(20))  # about 560 characters


def _waiting_situation(*, rent: float, busy_for: float = 0.5, marks=None, table=None):
    """`holder` (busy, done in `busy_for` s) elaborated all of the job's text;
    `other` is idle and holds only the header. Saved by waiting: the whole
    text, about 5.6 s at COST; the wait: busy_for plus the rent paid."""
    queued = job(body=BODY)
    key = hash((queued.scope, queued.text))
    facts = TableFacts(holders={queued: ("holder", len(queued.text))})
    workers = [
        view("holder", View.BUSY, busy_since=NOW, expected_busy_s=busy_for),
        view("other", View.IDLE),
    ]
    book = collections.OrderedDict(table if table is not None else {key: rent})
    snapshot = Snapshot(NOW, [queued], workers, facts, COST, True, book, dict(marks or {}))
    return snapshot, queued, key


# (situation, rent paid for the prefix, busy_for, decisions, waits, spreads, rent spent)
TABLE = [
    (
        "a cheap wait for the holder beats elaborating 560 characters again",
        0.0,
        0.5,
        [],
        1,
        0,
        False,
    ),
    (
        "the rent paid tips it over: the idle worker takes it and the rent is spent",
        6.0,
        0.5,
        [("assign", "other")],
        0,
        1,
        True,
    ),
    ("a holder far from done: elaborate it now", 0.0, 9.0, [("assign", "other")], 0, 1, True),
]


@pytest.mark.parametrize(
    "situation,rent,busy_for,expected,waits,spreads,spent", TABLE, ids=[row[0] for row in TABLE]
)
def test_rent_table(situation, rent, busy_for, expected, waits, spreads, spent):
    snapshot, queued, key = _waiting_situation(rent=rent, busy_for=busy_for)
    plan = Router(size=2).plan(snapshot)
    assert decided(plan) == expected
    assert (plan.stats.prefix_waits, plan.stats.prefix_spreads) == (waits, spreads)
    assert plan.rent.spent == ([key] if spent else [])
    if waits:
        assert plan.rent.marks == {queued: Mark(NOW, key)} and plan.wake_at is not None


def test_a_plan_leaves_its_snapshot_unchanged():
    # A job that waited 0.4 s (its mark), a rent book, busy and idle workers:
    # the plan charges, marks and decides, all in its output.
    snapshot, queued, key = _waiting_situation(rent=0.3)
    marked = dataclasses.replace(snapshot, marks={queued: Mark(NOW - 0.4, key)})
    before = (
        list(marked.rent.items()),
        dict(marked.marks),
        [dataclasses.astuple(w) for w in marked.workers],
        list(marked.jobs),
    )
    plan = Router(size=2).plan(marked)
    after = (
        list(marked.rent.items()),
        dict(marked.marks),
        [dataclasses.astuple(w) for w in marked.workers],
        list(marked.jobs),
    )
    assert after == before
    # what changed is in the plan: the 0.4 s charged to the prefix, the job marked again
    assert plan.rent.paid == [
        (key, pytest.approx(0.4))
    ] and plan.stats.prefix_wait_s == pytest.approx(0.4)
    assert (
        plan.rent.marks[queued] == Mark(NOW, key) and plan.stats.prefix_waits == 0
    )  # counted once, before


def test_the_same_snapshot_gives_the_same_plan():
    snapshot, _queued, _key = _waiting_situation(rent=0.0)
    router = Router(size=2)
    first, second = router.plan(snapshot), router.plan(snapshot)
    assert (first.decisions, first.wake_at, first.stats, first.rent) == (
        second.decisions,
        second.wake_at,
        second.stats,
        second.rent,
    )


def test_rent_the_book_drops_is_not_counted_by_the_plan_that_drops_it():
    # The book is full and its oldest entry is this prefix's 6 s of rent: a
    # charge for another prefix in the same plan pushes it out, so the job
    # waits (rent 0) instead of spreading on rent the book no longer holds.
    snapshot, queued, key = _waiting_situation(rent=6.0)
    other = job(body="theorem other : 2 = 2 := rfl\n")
    table = collections.OrderedDict([(key, 6.0)] + [(n, 0.1) for n in range(1, RENT_ENTRIES)])
    marks = {other: Mark(NOW - 1.0, -7)}  # a new key, charged first
    full = dataclasses.replace(snapshot, jobs=[queued, other], rent=table, marks=marks)
    plan = Router(size=2).plan(full)
    assert decided(plan) == [("assign", "other")] and plan.decisions[0].job is other
    # it waited (no spread, no rent spent); `other` then took the idle worker,
    # so its wait has no idle time to charge
    assert (plan.stats.prefix_waits, plan.stats.prefix_spreads, plan.rent.spent) == (1, 0, [])
    assert plan.rent.marks[queued] == Mark(None, key)
    book = RentBook()
    book.table, book.marks = collections.OrderedDict(table), dict(marks)
    book.apply(plan.rent)
    assert (
        key not in book.table
        and len(book.table) == RENT_ENTRIES
        and book.table[-7] == pytest.approx(1.0)
    )


def test_the_book_applies_a_change_in_order():
    book = RentBook()
    book.table.update({1: 1.0, 2: 2.0})
    book.apply(
        RentChange(paid=[(1, 0.5), (3, 0.25), (1, 0.5)], spent=[2], marks={"j": Mark(None, 1)})
    )
    assert list(book.table.items()) == [(3, 0.25), (1, 2.0)] and book.marks == {"j": Mark(None, 1)}
    assert not book.charging
    book.forget("j")
    assert book.marks == {}


def test_no_room_plans_nothing():
    # Every slot busy: nothing to decide (the dispatcher does not even ask).
    router = Router(size=2)
    busy = [view("w1", View.BUSY), view("w2", View.BUSY)]
    assert not router.has_room(busy)
    assert router.has_room(busy[:1]) and router.has_room([view("w1", View.IDLE), busy[1]])
    assert router.has_room([view("w1", View.GONE), busy[1]])
    assert Router(size=2).plan(Snapshot(NOW, [job()], busy, TableFacts())).decisions == []
