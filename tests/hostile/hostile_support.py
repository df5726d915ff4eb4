"""Drive the real Pool and VerifyService over the hostile fake REPL."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import random
import sys
from pathlib import Path

from leanrpc.pool.pool import Pool
from leanrpc.results import Status
from leanrpc.services.verify import VerifyOptions, VerifyService
from testkit import loopback_config

HOSTILE = [sys.executable, str(Path(__file__).with_name("hostile_repl.py"))]
HEADER = "import Mathlib\n\n"
DIRECTIVES = [
    "forge-self",
    "forge-next",
    "forge-after",
    "forge-idle",
    "garbage-idle",
    "dup-stdout",
    "steal",
    "steal-evasive",
    "threads=200",
]


async def start_service(workers: int = 1, **overrides) -> VerifyService:
    config = loopback_config(workers, repl__command=list(HOSTILE), **overrides)
    pool = Pool(config)
    await pool.start()
    return VerifyService(pool, config)


def honest(i: int, good: bool) -> tuple[str, Status]:
    if good:
        return f"theorem t{i} : True := trivial\n", Status.VALID
    return f"theorem t{i} : False := bad_proof\n", Status.INVALID


def forging(i: int, directive: str) -> str:
    # A wrong proof that tries to get a VALID verdict for itself or others.
    return f"theorem f{i} : False := bad_proof\n--@hostile: {directive}\n"


async def verify(service: VerifyService, sid: str, body: str):
    # The hostile fake answers no `#print axioms`: these tests are about frames, not axioms.
    return await service.verify(sid, HEADER + body, VerifyOptions(timeout_s=20, check_axioms=False))


@dataclasses.dataclass
class Tally:
    wrong: list = dataclasses.field(default_factory=list)  # (id, truth, got)
    forger_valid: list = dataclasses.field(default_factory=list)
    statuses: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    forger_statuses: collections.Counter = dataclasses.field(default_factory=collections.Counter)


async def interleaved_run(
    service: VerifyService, snippets: int, forgers: int, concurrency: int, seed: int = 7
) -> Tally:
    """`snippets` honest snippets (half good, half bad) with `forgers` forging
    ones spread among them; returns what came back wrong."""
    rng = random.Random(seed)
    plan: list[tuple[str, str, Status | None]] = []
    for i in range(snippets):
        body, truth = honest(i, rng.random() < 0.5)
        plan.append((f"h{i}", body, truth))
    for j in range(forgers):
        position = rng.randrange(len(plan) + 1)
        plan.insert(position, (f"f{j}", forging(j, DIRECTIVES[j % len(DIRECTIVES)]), None))
    tally = Tally()
    queue: asyncio.Queue = asyncio.Queue()
    for item in plan:
        queue.put_nowait(item)

    async def client() -> None:
        while not queue.empty():
            sid, body, truth = queue.get_nowait()
            result = await verify(service, sid, body)
            if truth is None:
                tally.forger_statuses[result.status.name] += 1
                if result.status is Status.VALID:
                    tally.forger_valid.append(sid)
            else:
                tally.statuses[result.status.name] += 1
                if result.status is not truth:
                    tally.wrong.append((sid, truth.name, result.status.name, result.error[:200]))

    await asyncio.gather(*(client() for _ in range(concurrency)))
    return tally
