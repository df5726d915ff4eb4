"""Two servers share verdicts through a real redis-server, and lose nothing
when it stops mid-run."""

from __future__ import annotations

import asyncio
import logging
import time

from cache_support import TEST_SECRET, cached_server, theorem

EXPECTED = {0: "VALID", 1: "SORRY", 2: "INVALID"}
PROOFS = {0: "rfl", 1: "sorry", 2: "exact Nat.nonexistent_lemma x"}
# The servers' Redis timeout, below cache_support.REDIS_TIMEOUT_S: a stopped Redis refuses at
# once, so the timeout does not bound how long its failures take, and the elapsed bound below
# stays near what the test means; a live Redis still has ample time for a pause of this process.
TIMEOUT_S = 2.0


def snippets(start: int, count: int) -> list[tuple[str, str, str]]:
    return [
        (f"s{i}", theorem(i, PROOFS[i % 3]), EXPECTED[i % 3]) for i in range(start, start + count)
    ]


async def test_two_servers_share_results_and_survive_redis_stopping(
    redis_server, caplog, monkeypatch
):
    monkeypatch.setenv("LEANRPC_CACHE_SECRET", TEST_SECRET)  # the same on both: they share
    settings = dict(
        redis_url=redis_server.url,
        redis_timeout_s=TIMEOUT_S,
        breaker_failures=2,
        breaker_cooldown_s=0.5,
    )
    async with (
        cached_server(**settings) as (app_a, client_a),
        cached_server(**settings) as (app_b, client_b),
    ):
        first = snippets(0, 9)
        answers_a = await client_a.verify([(i, c) for i, c, _ in first])
        assert [r.status for r in answers_a] == [e for _, _, e in first]
        await app_a.verify.cache.flush()
        answers_b = await client_b.verify([(i, c) for i, c, _ in first])
        assert [r.status for r in answers_b] == [e for _, _, e in first]
        assert {r.cache_source for r in answers_b} == {"redis"}
        assert [r.original_run for r in answers_b] == [r.original_run for r in answers_a]
        assert app_b.pool.stats.jobs_finished == 0

        redis_server.stop()  # mid-run
        second = snippets(100, 12)
        with caplog.at_level(logging.WARNING, logger="leanrpc.cache"):
            started = time.monotonic()
            for app, client in ((app_a, client_a), (app_b, client_b)):
                for snippet_id, code, expected in second:
                    [result] = await client.verify([(snippet_id, code)])
                    assert (result.id, result.status) == (snippet_id, expected)
                await app.verify.cache.flush()
            elapsed = time.monotonic() - started
            [again] = await client_b.verify([("again", first[0][1])])
        assert again.status == "VALID" and again.cache_source == "memory"
        assert "Redis" in caplog.text and "treated as a miss" in caplog.text
        # The breaker keeps a dead Redis off the path: a handful of failed
        # calls, not one timeout per lookup and per write.
        for app in (app_a, app_b):
            shared = app.verify.cache.shared
            assert shared.breaker.trips >= 1
            assert shared.failures <= 6
        assert app_b.pool.stats.jobs_finished == 12  # its own elaborations, none lost
        assert elapsed < 24 * TIMEOUT_S + 15

        redis_server.start()  # same port: it comes back empty
        await asyncio.sleep(0.6)  # past the breaker cooldown
        code = theorem(500)
        [warm_up] = await client_a.verify([("probe", theorem(499))])  # the half-open probe
        [fresh] = await client_a.verify([("x", code)])
        await app_a.verify.cache.flush()
        [shared_again] = await client_b.verify([("y", code)])
        assert warm_up.status == fresh.status == shared_again.status == "VALID"
        assert shared_again.cache_source == "redis"
