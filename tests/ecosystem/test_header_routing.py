"""Header-affinity routing across replicas (leanrpc.ray), tested without Ray."""

from __future__ import annotations

import collections

import pytest

from eco_support import start_app
from leanrpc.client import header_hash
from leanrpc.ray import HeaderRing, ShardedClient

HEADERS = ["import Mathlib", "import Mathlib.Tactic", "import Aesop", "import Batteries"]


def test_ring_spreads_keys_and_remaps_little_when_a_node_leaves():
    nodes = ["10.0.0.1:50051", "10.0.0.2:50051", "10.0.0.3:50051"]
    ring = HeaderRing(nodes)
    keys = [f"header-{i}" for i in range(600)]
    owners = {k: ring.node_for(k) for k in keys}
    counts = collections.Counter(owners.values())
    assert set(counts) == set(nodes)
    assert min(counts.values()) > 600 / 3 / 2  # no node starves
    assert HeaderRing(reversed(nodes)).node_for("header-7") == owners["header-7"]  # order-free
    smaller = HeaderRing(nodes[:2])
    for key, owner in owners.items():
        if owner != nodes[2]:
            assert smaller.node_for(key) == owner  # only the leaving node's keys move


def test_shard_keeps_input_order_and_groups_by_header():
    ring = HeaderRing(["a:1", "b:1"])
    items = [(f"s{i}", f"{HEADERS[i % 4]}\n\ntheorem t{i} : True := trivial\n") for i in range(20)]
    shards = ring.shard(items)
    assert sorted(i for indices in shards.values() for i in indices) == list(range(20))
    for node, indices in shards.items():
        assert indices == sorted(indices)
        assert all(ring.node_for(header_hash(items[i][1])) == node for i in indices)
    with pytest.raises(ValueError):
        HeaderRing([])


async def test_sharded_client_sends_each_header_to_one_replica():
    apps = [await start_app(workers=1), await start_app(workers=1)]
    addresses = [f"127.0.0.1:{app.port}" for app in apps]
    try:
        items = [
            (f"s{i}", f"{HEADERS[i % 4]}\n\ntheorem t{i} (x : Nat) : x + {i} = x + {i} := by\n  {'sorry' if i % 5 == 0 else 'rfl'}\n")
            for i in range(40)
        ]
        async with ShardedClient(addresses, max_retries=0) as client:
            results = await client.verify(items)
            ring = client.ring
        assert [r.id for r in results] == [i for i, _ in items]
        assert [r.status for r in results] == ["SORRY" if i % 5 == 0 else "VALID" for i in range(40)]
        expected = collections.Counter(ring.node_for_code(code) for _id, code in items)
        for address, app in zip(addresses, apps):
            assert app.pool.stats.jobs_finished == expected.get(address, 0)
    finally:
        for app in apps:
            await app.stop(2.0)
