"""Servers with different cache secrets share one Redis without touching each
other's entries (issue 43): keys carry a label of the secret
(seal.Sealer.namespace), so a foreign server neither reads, overwrites nor
drops them as forged. Servers with the same secret still share."""

from __future__ import annotations

import redis

from cache_support import TEST_SECRET, cached_server, theorem
from leanrpc.cache.seal import Sealer
from leanrpc.cache.shared import KEY_PREFIX

OTHER_SECRET = "another-cluster-secret-fedcba9876543210"


def test_the_label_depends_on_the_secret_and_does_not_show_it():
    mine, other = Sealer(TEST_SECRET.encode()), Sealer(OTHER_SECRET.encode())
    assert mine.namespace == Sealer(TEST_SECRET.encode()).namespace
    assert mine.namespace != other.namespace and len(mine.namespace) == 32
    assert TEST_SECRET not in mine.namespace and TEST_SECRET.encode().hex() not in mine.namespace


async def test_two_secrets_on_one_redis_never_touch_each_others_entries(
    redis_server, tmp_path, monkeypatch
):
    other_file = tmp_path / "other-secret"
    other_file.write_text(OTHER_SECRET)
    other_file.chmod(0o600)
    monkeypatch.setenv("LEANRPC_CACHE_SECRET", TEST_SECRET)
    raw = redis.Redis(port=redis_server.port)
    codes = [(f"s{i}", theorem(i, "rfl" if i % 2 else "exact Nat.nope")) for i in range(4)]
    try:
        async with cached_server(redis_url=redis_server.url) as (app_a, client_a):
            first = await client_a.verify(codes)
            await app_a.verify.cache.flush()
            prefix_a = app_a.verify.cache.shared.prefix
        mine = {k: raw.get(k) for k in raw.keys(prefix_a + "*")}
        assert len(mine) == 4 and set(raw.keys(KEY_PREFIX + "*")) == set(mine)

        # Another secret: it elaborates the same snippets itself and writes its own keys.
        async with cached_server(redis_url=redis_server.url, secret_file=str(other_file)) as (
            app_b,
            client_b,
        ):
            second = await client_b.verify(codes)
            await app_b.verify.cache.flush()
            stats_b, prefix_b = app_b.verify.cache.stats, app_b.verify.cache.shared.prefix
        assert [r.status for r in second] == [r.status for r in first]
        assert {r.cache_source for r in second} == {""}  # none of A's entries served
        assert stats_b.forged == 0 and stats_b.hits["redis"] == 0  # nor even read
        assert prefix_b != prefix_a and len(raw.keys(prefix_b + "*")) == 4
        assert {k: raw.get(k) for k in raw.keys(prefix_a + "*")} == mine  # untouched

        # A's own secret again (a restart, or another node of A's cluster): A's entries.
        async with cached_server(redis_url=redis_server.url) as (app_c, client_c):
            third = await client_c.verify(codes)
            assert {r.cache_source for r in third} == {"redis"}
            assert [r.original_run for r in third] == [r.original_run for r in first]
            assert app_c.pool.stats.jobs_finished == 0 and app_c.verify.cache.stats.forged == 0
    finally:
        raw.close()
