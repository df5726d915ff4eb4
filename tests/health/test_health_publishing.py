"""The health loop publishes a change of state, and only a change (issue 38 item 6:
each publication takes the health service's lock once per service, on a server
that is otherwise asleep). tests/health/test_no_worker_health.py watches the real
server's changes end to end; here the loop's own rule, on a pool whose state the
test sets."""

from __future__ import annotations

import asyncio
import types

from leanrpc import app as app_module


class _Health:
    def __init__(self) -> None:
        self.sets: list[tuple[str, int]] = []

    async def set(self, service: str, status: int) -> None:
        self.sets.append((service, status))


async def test_the_loop_publishes_changes_only():
    health = _Health()
    fake = types.SimpleNamespace(
        pool=types.SimpleNamespace(serving=True), formalize=None, health=health
    )
    published = await app_module._update_health(fake)
    assert published == (True, False) and len(health.sets) == 4
    loop_task = asyncio.create_task(app_module._health_loop(fake, published))
    try:
        await asyncio.sleep(1.2)  # two looks, nothing changed
        assert len(health.sets) == 4
        fake.pool.serving = False
        for _ in range(200):  # the next look, however slow the machine
            if len(health.sets) > 4:
                break
            await asyncio.sleep(0.05)
        not_serving = app_module.health_pb2.HealthCheckResponse.NOT_SERVING
        assert health.sets[4:] == [
            (app_module.VERIFIER_SERVICE, not_serving),
            ("", not_serving),
            (app_module.PROVER_SERVICE, not_serving),
            (app_module.FORMALIZER_SERVICE, not_serving),
        ]
        await asyncio.sleep(1.2)  # two more looks
        assert len(health.sets) == 8  # published once
    finally:
        loop_task.cancel()
