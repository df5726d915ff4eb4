"""Routing situations without processes: queued jobs and worker views as routing
sees them, and `Routing` (Router.plan with what the dispatcher keeps between
plans). Shared by tests/pool's routing tables and tests/reuse's process tests."""

from __future__ import annotations

import dataclasses

from leanrpc.core.headers import split_header
from leanrpc.pool.cost import BodyCostModel
from leanrpc.pool.dispatch import IndexFacts, RentBook
from leanrpc.pool.job import BodyJob, CallJob, Job
from leanrpc.pool.plan import (
    Assign,
    CostView,
    Expire,
    Import,
    JobView,
    RoutingStats,
    Snapshot,
    Start,
    Switch,
    View,
    WorkerView,
)
from leanrpc.pool.prefix_index import PrefixIndex
from leanrpc.pool.routing import Router
from leanrpc.pool.ticket import Ticket

NOW = 1000.0
MATHLIB = "import Mathlib\n"
AESOP = "import Aesop\n"
BODY = "\n".join(f"theorem t{i} : {i} = {i} := rfl" for i in range(200)) + "\n"


def job(
    header: str = MATHLIB,
    body: str = "theorem x : 1 = 1 := rfl\n",
    *,
    age: float = 0.0,
    fresh_process: bool = False,
    **kw,
) -> JobView:
    """A queued job as routing sees it (a CallJob when given `call`): its
    ticket's view, accepted `age` seconds before NOW (no future: never answered)."""
    kind = CallJob if "call" in kw else BodyJob
    j: Job = kind(split=split_header(header + body), timeout_s=10, **kw)
    ticket = Ticket(j, None, NOW - age)
    if fresh_process:
        ticket.ask_fresh_process()
    return ticket.view


def key(header: str) -> str:
    return split_header(header + "theorem x : True := trivial\n").import_key


def view(
    name: str, state: View, header: str | None = MATHLIB, *, also: tuple = (), **kw
) -> WorkerView:
    """A worker whose current header is `header`, holding the headers in `also` too."""
    held = frozenset([key(h) for h in also] + ([key(header)] if header else []))
    return WorkerView(
        name=name, state=state, import_key=key(header) if header else None, header_keys=held, **kw
    )


class Routing:
    """Router.plan with what the pool keeps between plans (the rent book, the
    counters) and a prefix index; the dispatcher's bookkeeping without its processes."""

    def __init__(
        self, size: int = 2, *, costs=(), incrementality: bool = True, import_s=None, **kw
    ) -> None:
        self.router = Router(size=size, **kw)
        self.import_s = dict(import_s or {})  # measured header imports (HeaderCostModel.view)
        self.index = PrefixIndex()
        self.cost = BodyCostModel()
        for seconds, chars in costs:
            self.cost.observe(seconds, chars)
        self.incrementality = incrementality
        self.rent = RentBook()
        self.stats = RoutingStats()

    def snapshot(self, queue, workers, now: float) -> Snapshot:
        cost = (
            CostView(self.cost.known, self.cost.per_char, self.cost.overhead_s)
            if self.cost.known
            else CostView()
        )
        facts = IndexFacts(self.index, lambda profile: self.incrementality)
        return Snapshot(
            now,
            list(queue),
            list(workers),
            facts,
            cost,
            self.incrementality,
            self.rent.table,
            self.rent.marks,
            self.import_s,
        )

    def plan(self, queue, workers, now: float):
        plan = self.router.plan(self.snapshot(queue, workers, now))
        self.rent.apply(plan.rent)
        for field in dataclasses.fields(RoutingStats):
            setattr(
                self.stats,
                field.name,
                getattr(self.stats, field.name) + getattr(plan.stats, field.name),
            )
        return plan


def router(size: int = 2, *, costs=(), incrementality: bool = True, **kw) -> Routing:
    return Routing(size, costs=costs, incrementality=incrementality, **kw)


def decided(plan) -> list[tuple]:
    out = []
    for d in plan.decisions:
        if isinstance(d, Assign):
            out.append(("assign", d.worker))
        elif isinstance(d, Start):
            out.append(("start",))
        elif isinstance(d, Switch):
            out.append(("switch", d.victim))
        elif isinstance(d, Import):
            out.append(("import", d.worker))
        elif isinstance(d, Expire):
            out.append(("expire",))
    return out
