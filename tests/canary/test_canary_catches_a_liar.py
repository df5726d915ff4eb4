"""A planted liar is caught by a canary (issue 43 item 5).

The liar is tests/hostile/trapdoor_repl.py in `lie-after-trap` mode: an honest
stand-in until a command holding `TRAPDOOR` arrives (code that got past the
policy), then it strips every error from later answers, so wrong proofs, every
client's, come back clean. Before its next job for another client the worker
gets a canary; a false canary answered VALID poisons it, the entries it
produced are withdrawn from the cache, and the other client's job runs on a
fresh worker and gets its true verdict.
"""

from __future__ import annotations

import pytest

from cache_support import TEST_SECRET, theorem
from canary_support import TOKENS, WRONG, trapdoor_config
from leanrpc.app import create_server
from leanrpc.client import AsyncClient
from testkit import TRAPDOOR, queued_behind_gate, wait_until

pytestmark = pytest.mark.timeout(180)


async def test_a_canary_poisons_a_liar_before_it_serves_another_client(tmp_path, monkeypatch):
    monkeypatch.setenv("LEANRPC_CACHE_SECRET", TEST_SECRET)
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    log = tmp_path / "liar.log"
    # rate 0: only the canary before another client's job can catch it.
    config = trapdoor_config(tmp_path, [*TRAPDOOR, "lie-after-trap", f"log={log}"], rate=0.0)
    app = await create_server(config)
    address = f"127.0.0.1:{app.port}"
    alice = AsyncClient(address, token=TOKENS[0], max_retries=0)
    bob = AsyncClient(address, token=TOKENS[1], max_retries=0)
    cache, canaries = app.verify.cache, app.pool.runner.canaries
    try:
        first = await alice.verify([(f"a{i}", theorem(i)) for i in range(3)])
        assert [r.status for r in first] == ["VALID"] * 3
        [liar] = {r.worker for r in first}
        [trap] = await alice.verify([("trap", theorem(7) + "-- TRAPDOOR\n")])
        assert trap.status == "VALID" and "trap sprung" in log.read_text()
        # The liar now lies to its own client: a wrong proof comes back VALID (the
        # limit of canaries: nothing tells this from an honest answer) and is cached.
        [own] = await alice.verify([("own", theorem(8, WRONG))])
        assert own.status == "VALID" and own.worker == liar
        await cache.flush()
        produced = set(cache.memory._entries)
        assert len(produced) == 5 and canaries.stats.sent == 0

        # Another client: a canary first. The liar strips the false canary's
        # error, is poisoned, and bob's wrong proof runs on a fresh worker.
        [other] = await bob.verify([("other", theorem(9, WRONG))])
        assert other.status == "INVALID" and other.worker != liar, (other.status, other.worker)
        assert canaries.stats.failed == 1 and canaries.stats.by_reason == {"client switch": 1}
        assert "stripped" in log.read_text()
        await wait_until(lambda: cache.stats.withdrawn == 5, 30, "the liar's entries withdrawn")
        await cache.flush()
        assert not produced & set(cache.memory._entries)
        assert app.pool.stats.restarts.get("poisoned") == 1

        # Alice's lie is no longer served: asked again it is elaborated afresh.
        [again] = await alice.verify([("own", theorem(8, WRONG))])
        assert (again.status, again.cache_source) == ("INVALID", "")
        # The canary's own work never reached a client or the cache.
        assert app.pool.stats.jobs_finished == 7  # 3 + trap + own + bob's + again
        assert cache.stats.stored == 7  # 5 from the liar, 2 from the fresh worker
    finally:
        await alice.close()
        await bob.close()
        await app.stop(2.0)


async def test_canaries_on_an_honest_worker_pass_and_are_never_a_clients_work(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("LEANRPC_CACHE_SECRET", TEST_SECRET)
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    config = trapdoor_config(tmp_path, config_command(), rate=1.0)  # a canary before every job
    config.pool.pipeline_bodies = 1  # one job per attempt (a pipelined group is one attempt)
    app = await create_server(config)
    alice = AsyncClient(f"127.0.0.1:{app.port}", token=TOKENS[0], max_retries=0)
    try:
        codes = [(f"s{i}", theorem(i, "rfl" if i % 2 else WRONG)) for i in range(8)]
        results = await alice.verify(codes)
        assert [r.id for r in results] == [c[0] for c in codes]  # one answer each, no more
        assert [r.status for r in results] == ["INVALID", "VALID"] * 4
        stats = app.pool.runner.canaries.stats
        assert stats.sent == 8 and stats.passed == 8 and stats.failed == stats.lost == 0
        assert app.pool.stats.jobs_finished == 8 and app.pool.stats.jobs_submitted == 8
        await app.verify.cache.flush()
        assert app.verify.cache.stats.stored == 8  # the clients' verdicts only
        assert app.pool.stats.restarts.get("poisoned", 0) == 0
    finally:
        await alice.close()
        await app.stop(2.0)


async def test_a_pipelined_group_gets_its_canary_before_its_one_exchange(tmp_path, monkeypatch):
    monkeypatch.setenv("LEANRPC_CACHE_SECRET", TEST_SECRET)
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    config = trapdoor_config(tmp_path, config_command(), rate=1.0)
    config.pool.pipeline_bodies = 8
    config.pool.pipeline_group_s = 3600.0  # only the count bounds the group, on any machine
    app = await create_server(config)
    alice = AsyncClient(f"127.0.0.1:{app.port}", token=TOKENS[0], max_retries=0)
    try:
        codes = [(f"s{i}", theorem(i, "rfl" if i % 2 else WRONG)) for i in range(8)]
        results = await alice.verify(codes)
        assert [r.status for r in results] == ["INVALID", "VALID"] * 4
        stats = app.pool.runner.canaries.stats
        # One canary per attempt (rate 1: the lead's draw; the riders draw only when it
        # gave none): at least one, at most one per job, every one passed.
        assert 1 <= stats.sent <= 8 and stats.passed == stats.sent and stats.failed == 0
        assert app.pool.stats.jobs_finished == 8
    finally:
        await alice.close()
        await app.stop(2.0)


class _Draws:
    """The guard's draws, in order, then none under any rate."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0) if self.values else 0.99


async def test_a_groups_riders_draw_their_own_canary_and_catch_a_liar(tmp_path, monkeypatch):
    """A group of eight whose lead drew no canary: its seven riders draw one with the
    chance that one of them alone would have (pool/canary.py `riders_due`). Here it comes,
    and the liar (sprung by alice's own trap) is caught before the group's exchange; the
    group runs again on a fresh process, every wrong proof INVALID. Before the riders drew,
    a group was one draw: a liar went uncaught by all but one in 20 groups."""
    monkeypatch.setenv("LEANRPC_CACHE_SECRET", TEST_SECRET)
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    log, gate = tmp_path / "liar.log", tmp_path / "gate"
    command = [*TRAPDOOR, "lie-after-trap", f"gate={gate}", f"log={log}"]
    config = trapdoor_config(tmp_path, command, rate=0.05)
    config.pool.pipeline_bodies = 8
    config.pool.pipeline_group_s = 3600.0  # only the count bounds the group, on any machine
    app = await create_server(config)
    canaries = app.pool.runner.canaries
    # trap, held, the group's lead: no canary; the riders' draw: one (then none again).
    canaries._rng = _Draws(0.99, 0.99, 0.99, 0.0)
    alice = AsyncClient(f"127.0.0.1:{app.port}", token=TOKENS[0], max_retries=0)
    try:
        [trap] = await alice.verify([("trap", theorem(7) + "-- TRAPDOOR\n")])
        assert trap.status == "VALID" and "trap sprung" in log.read_text()
        # The one worker is held until the eight are queued: they form one group.
        codes = [(f"s{i}", theorem(i, "rfl" if i % 2 else WRONG)) for i in range(8)]
        _held, results = await queued_behind_gate(
            app.pool,
            log,
            gate,
            alice.verify([("held", theorem(99) + "-- GATE\n")], timeout_s=120),
            alice.verify(codes),
            len(codes),
        )
        assert [r.status for r in results] == ["INVALID", "VALID"] * 4, [
            (r.id, r.status) for r in results
        ]
        assert canaries.stats.sent == canaries.stats.failed == 1, canaries.stats
        assert canaries.stats.by_reason == {"rate": 1}
        assert app.pool.stats.restarts.get("poisoned") == 1
        # Each body ran once: the group the riders' canary stopped is not counted, since it
        # never ran (counted where the riders were taken, it made 15 bodies of these 8).
        stats = app.pool.stats
        assert 1 <= stats.pipelined_groups and stats.pipelined_bodies <= len(codes), stats
    finally:
        await alice.close()
        await app.stop(2.0)


def config_command():
    from leanrpc.config import _default_repl_command

    return _default_repl_command()
