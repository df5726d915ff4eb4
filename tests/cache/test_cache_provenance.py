"""Entries record who produced them, and a worker poisoned after producing
entries takes them back from memory, disk and Redis (leanrpc.cache.provenance)."""

from __future__ import annotations

from pathlib import Path

import redis

from cache_support import TEST_SECRET, cached_config, theorem
from leanrpc.app import create_server
from leanrpc.cache import codec
from leanrpc.client import AsyncClient
from testkit import TRAPDOOR, wait_until


def _disk_entries(root: Path) -> set[str]:
    return {p.stem for p in root.glob("*/*.lrc")}


async def test_a_poisoned_workers_entries_are_withdrawn_from_every_tier(
    redis_server, tmp_path, monkeypatch
):
    monkeypatch.setenv("LEANRPC_CACHE_SECRET", TEST_SECRET)
    log = tmp_path / "trapdoor.log"
    config = cached_config(1, cache_dir=str(tmp_path / "cache"), redis_url=redis_server.url)
    config.repl.command = [*TRAPDOOR, "poison-on-trap", f"log={log}"]
    config.sandbox.mode = "off"
    config.pool.max_retries = 0
    app = await create_server(config)
    client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
    raw = redis.Redis(port=redis_server.port)
    cache = app.verify.cache
    key_prefix = cache.shared.prefix  # this secret's keys
    try:
        first = await client.verify([(f"a{i}", theorem(i)) for i in range(3)])
        assert [r.status for r in first] == ["VALID"] * 3
        [producer] = {r.worker for r in first}
        await cache.flush()
        keys = set(cache.memory._entries)
        assert len(keys) == 3 and _disk_entries(tmp_path / "cache") == keys
        assert {k.decode()[len(key_prefix) :] for k in raw.keys(key_prefix + "*")} == keys
        for key in keys:  # each entry names its producer and the policy
            verdict = codec.decode(cache.memory.get(key), key)
            assert verdict.provenance.worker == producer and verdict.provenance.policy == "proof"
            assert (
                verdict.provenance.pid > 0
                and verdict.provenance.server == app.verify.provenance.server
            )
        # What someone with write access to Redis keeps a copy of (sealed: its MAC stays good).
        copies = {key: raw.get(key_prefix + key) for key in keys}
        # The same worker is caught lying on its next command: its answer is
        # never delivered, and what it produced before is withdrawn.
        [trap] = await client.verify([("trap", theorem(9) + "-- TRAPDOOR\n")])
        assert trap.status != "VALID" and "forged frame" in log.read_text()
        await wait_until(lambda: cache.stats.withdrawn == 3, 30, "the withdrawal")
        await cache.flush()
        assert not keys & set(cache.memory._entries)
        assert not keys & _disk_entries(tmp_path / "cache")
        assert raw.keys(key_prefix + "*") == []
        # Written back into Redis, the withdrawn entries are still never served.
        for key, sealed in copies.items():
            raw.set(key_prefix + key, sealed)
        # Asked again, they are elaborated afresh (on a new worker) and cached again.
        again = await client.verify([(f"b{i}", theorem(i)) for i in range(3)])
        assert cache.stats.revoked == 3 and cache.stats.hits["redis"] == 0
        assert [(r.status, r.cache_source) for r in again] == [("VALID", "")] * 3
        assert {r.worker for r in again} != {producer}
        await cache.flush()
        assert len(raw.keys(key_prefix + "*")) == 3
    finally:
        raw.close()
        await client.close()
        await app.stop(2.0)


def test_an_entry_from_before_provenance_still_decodes():
    from leanrpc.results import Status, VerifyResult

    data = codec.encode("ab" * 32, "run", 0.0, VerifyResult(id="", status=Status.VALID))
    assert codec.decode(data, "ab" * 32).provenance is None
