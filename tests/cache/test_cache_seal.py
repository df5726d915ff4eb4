"""Disk and Redis entries are authenticated: a forged, edited or foreign
entry is a counted, logged miss, never an answer (leanrpc.cache.seal)."""

from __future__ import annotations

import logging
import os
import sys

import pytest
import redis

from cache_support import TEST_SECRET, RedisServer, cached_config, live_redis_store
from leanrpc.cache import DiskStore, MemoryStore, ResultCache, codec
from leanrpc.cache.build import build_cache
from leanrpc.config import ConfigError
from leanrpc.results import Status, VerifyResult

KEY = "ab" + "0" * 62
OTHER_SECRET = b"another-cluster-secret-fedcba9876543210"


def result(status=Status.INVALID) -> VerifyResult:
    return VerifyResult(
        id="x", status=status, error="" if status is Status.VALID else "type mismatch"
    )


@pytest.fixture
def locked_redis(tmp_path):
    server = RedisServer(tmp_path, password="s3cret-pass")
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_forged_redis_entry_behind_a_password_is_never_served(locked_redis, caplog):
    # The password path: without it Redis refuses; with it in the URL it works.
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=locked_redis.port).get("x")
    raw = redis.Redis(port=locked_redis.port, password=locked_redis.password)
    store = live_redis_store(locked_redis.url, TEST_SECRET.encode())
    cache = ResultCache(MemoryStore(1 << 20), shared=store)
    try:
        # An attacker with write access sets VALID for a wrong proof, unsealed
        # (the old format) and sealed under a secret it guessed.
        forged = codec.encode(KEY, "forged", 0.0, result(Status.VALID))
        for value in (forged, OTHER_SECRET[:4] + b"\0" * 32 + forged):
            raw.set(store.prefix + KEY, value)
            with caplog.at_level(logging.WARNING, logger="leanrpc.cache"):
                assert await cache.lookup(KEY) is None
                await cache.flush()
            assert raw.get(store.prefix + KEY) is None  # removed
        assert cache.stats.forged == 2 and cache.stats.hits["redis"] == 0
        assert caplog.text.count("unauthenticated redis entry") == 1  # logged once
        # A genuine entry from a server with the same secret is shared.
        cache.store(KEY, "run-1", result())
        await cache.flush()
        fresh = ResultCache(
            MemoryStore(1 << 20),
            shared=live_redis_store(locked_redis.url, TEST_SECRET.encode()),
        )
        hit = await fresh.lookup(KEY)
        assert hit is not None and hit[1] == "redis" and hit[0].result.status is Status.INVALID
        await fresh.close()
        # A server with another secret never trusts it, nor even reads it: its keys
        # are its own secret's (issue 43).
        foreign = ResultCache(
            MemoryStore(1 << 20),
            shared=live_redis_store(locked_redis.url, OTHER_SECRET),
        )
        assert await foreign.lookup(KEY) is None and foreign.stats.forged == 0
        assert raw.get(store.prefix + KEY) is not None
        await foreign.close()
    finally:
        await cache.close()
        raw.close()


async def test_edited_disk_entry_is_never_served(tmp_path, caplog):
    store = DiskStore(tmp_path)  # no secret given: this server makes its own
    secret_file = tmp_path / ".secret"
    assert secret_file.exists() and secret_file.stat().st_mode & 0o077 == 0
    cache = ResultCache(MemoryStore(1 << 20), disk=store)
    cache.store(KEY, "run-1", result(Status.INVALID))
    await cache.flush()
    path = store.path_for(KEY)
    sealed = path.read_bytes()
    # Edit the verdict inside, keeping the old MAC, as an attacker with write access would.
    entry = codec.encode(KEY, "run-1", 0.0, result(Status.VALID))
    path.write_bytes(sealed[:36] + entry)
    restarted = ResultCache(MemoryStore(1 << 20), disk=DiskStore(tmp_path))
    with caplog.at_level(logging.WARNING, logger="leanrpc.cache"):
        assert await restarted.lookup(KEY) is None
        await restarted.flush()
    assert restarted.stats.forged == 1 and not path.exists()
    assert "unauthenticated disk entry" in caplog.text
    # The same directory under another server's secret: its entries are misses.
    cache.store(KEY, "run-1", result(Status.INVALID))
    await cache.flush()
    other = ResultCache(MemoryStore(1 << 20), disk=DiskStore(tmp_path, secret=OTHER_SECRET))
    assert await other.lookup(KEY) is None and other.stats.forged == 1
    # The genuine one still reads back under the server's own secret.
    cache.store(KEY, "run-1", result(Status.INVALID))
    await cache.flush()
    again = await ResultCache(MemoryStore(1 << 20), disk=DiskStore(tmp_path)).lookup(KEY)
    assert again is not None and again[0].result.status is Status.INVALID


def test_shared_tier_refuses_to_start_without_a_secret(monkeypatch, tmp_path):
    monkeypatch.delenv("LEANRPC_CACHE_SECRET", raising=False)
    section = cached_config(redis_url="redis://127.0.0.1:1/0").cache
    with pytest.raises(ConfigError, match="needs a cache secret"):
        build_cache(section)
    loose = tmp_path / "secret"
    loose.write_text(TEST_SECRET)
    loose.chmod(0o644)
    section.secret_file = str(loose)
    with pytest.raises(ConfigError, match="readable by group or others"):
        build_cache(section)
    loose.chmod(0o600)
    assert build_cache(section).shared is not None


def test_redis_url_without_the_redis_package_names_the_extra(monkeypatch):
    monkeypatch.setenv("LEANRPC_CACHE_SECRET", TEST_SECRET)
    monkeypatch.setitem(sys.modules, "redis", None)  # import redis -> ModuleNotFoundError
    monkeypatch.setitem(sys.modules, "redis.asyncio", None)
    section = cached_config(redis_url="redis://127.0.0.1:1/0").cache
    with pytest.raises(ConfigError, match=r"leanrpc\[redis\]"):
        build_cache(section)


def test_a_disk_secret_that_others_can_read_is_refused(tmp_path):
    DiskStore(tmp_path)
    os.chmod(tmp_path / ".secret", 0o644)
    with pytest.raises(ConfigError, match="owner-only"):
        DiskStore(tmp_path)


async def test_servers_with_different_secrets_on_one_redis_never_serve_each_others(
    redis_server, monkeypatch
):
    from cache_support import cached_server, theorem

    settings = dict(redis_url=redis_server.url)
    monkeypatch.setenv("LEANRPC_CACHE_SECRET", TEST_SECRET)
    async with cached_server(**settings) as (app_a, client_a):
        monkeypatch.setenv(
            "LEANRPC_CACHE_SECRET", OTHER_SECRET.decode()
        )  # read when B builds its cache
        async with cached_server(**settings) as (app_b, client_b):
            codes = [(f"s{i}", theorem(i)) for i in range(4)]
            assert [r.status for r in await client_a.verify(codes)] == ["VALID"] * 4
            await app_a.verify.cache.flush()
            answers = await client_b.verify(codes)
            assert [(r.status, r.cache_source) for r in answers] == [
                ("VALID", "")
            ] * 4  # elaborated itself
            # B never even reads A's keys (issue 43: namespaced by the secret), so
            # it drops none of them as forged.
            assert app_b.pool.stats.jobs_finished == 4 and app_b.verify.cache.stats.forged == 0
            assert app_b.verify.cache.stats.hits["redis"] == 0


async def test_a_forged_entry_is_counted_in_the_metrics(tmp_path, monkeypatch):
    """`leanrpc_result_cache_events_total{event="forged"}` on /metrics: the
    miss an edited disk entry becomes is counted where an operator looks."""
    import asyncio
    import urllib.request

    from cache_support import cached_server, theorem
    from testkit import free_port

    monkeypatch.setenv("LEANRPC_CACHE_SECRET", TEST_SECRET)
    cache_dir = tmp_path / "cache"
    async with cached_server(cache_dir=str(cache_dir)) as (app, client):
        [first] = await client.verify([("a", theorem(1))])
        assert first.status == "VALID"
        await app.verify.cache.flush()
    [path] = list(cache_dir.glob("*/*.lrc"))
    sealed = path.read_bytes()
    path.write_bytes(sealed[:-1] + bytes([sealed[-1] ^ 1]))  # one bit of the entry changed
    config = cached_config(cache_dir=str(cache_dir))
    config.server.metrics_port = free_port()
    from leanrpc.app import create_server
    from leanrpc.client import AsyncClient

    app = await create_server(config)
    client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
    try:
        [again] = await client.verify([("a", theorem(1))])
        assert (
            again.status == "VALID" and again.cache_source == ""
        )  # elaborated, not the edited entry
        url = f"http://127.0.0.1:{config.server.metrics_port}/metrics"
        text = await asyncio.to_thread(
            lambda: urllib.request.urlopen(url, timeout=30).read().decode()
        )
        assert 'leanrpc_result_cache_events_total{event="forged"} 1.0' in text
        assert 'leanrpc_result_cache_hits_total{tier="disk"} 0.0' in text
    finally:
        await client.close()
        await app.stop(2.0)
