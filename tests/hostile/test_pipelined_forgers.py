"""Issue 38 item 6 under attack: a forging snippet in the middle of a pipelined
group (pool/pipeline.py: one batch's bodies in one exchange, one fence, one
audit) on the hostile fake REPL (tests/hostile/hostile_repl.py). Whatever the
forger's thread does (forge frames before, inside or after the next body's
answer, take over stdout, steal stdin, fences included), no honest body of the
group gets a wrong verdict, the forger never gets VALID, and every snippet gets
exactly one answer."""

from __future__ import annotations

import asyncio

import pytest

from hostile_support import DIRECTIVES, HEADER, forging, honest, start_service
from leanrpc.results import Status
from leanrpc.services.verify import VerifyOptions


async def _group(service, plan: list, stream: str) -> list:
    options = VerifyOptions(timeout_s=20, check_axioms=False)
    resolved = [
        service.resolve(sid, HEADER + body, options, stream_id=stream) for sid, body, _ in plan
    ]
    results = await asyncio.gather(*(service.run(r) for r in resolved))
    assert [r.id for r in results] == [sid for sid, _b, _t in plan]  # one answer each
    return results


@pytest.mark.parametrize("directive", DIRECTIVES)
async def test_a_forger_mid_group_gives_no_other_body_a_wrong_verdict(directive):
    service = await start_service(workers=1, pool__pipeline_bodies=8, pool__pipeline_group_s=3600.0)
    pool = service.pool
    try:
        plan = [(f"h{i}",) + honest(i, i % 2 == 0) for i in range(7)]
        plan.insert(3, ("f", forging(0, directive), None))
        results = await _group(service, plan, "group-1")
        assert pool.stats.pipelined_groups >= 1, pool.stats
        # Give delayed threads (idle forgers, the evasive thief) time to act,
        # then a second group on whatever process is left.
        await asyncio.sleep(0.15)
        later = [(f"k{i}",) + honest(10 + i, i % 2 == 1) for i in range(4)]
        results += await _group(service, later, "group-2")
        for (sid, _body, truth), result in zip(plan + later, results):
            if truth is None:
                assert result.status is not Status.VALID, (directive, result)
            else:
                assert result.status is truth, (directive, sid, result.status, result.error)
        caught = pool.stats.restarts["poisoned"] + pool.stats.restarts["garbage"]
        assert caught >= 1, (directive, dict(pool.stats.restarts))
    finally:
        await pool.close(2.0)
