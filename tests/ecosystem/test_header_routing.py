"""Header-affinity routing across replicas (leanrpc.ray), tested without Ray:
consistent hashing with bounded loads."""

from __future__ import annotations

import collections
import math

import pytest

from eco_support import start_app
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


def test_shard_keeps_input_order_and_keeps_headers_on_their_owner_while_load_allows():
    ring = HeaderRing(["a:1", "b:1"])
    items = [(f"s{i}", f"{HEADERS[i % 4]}\n\ntheorem t{i} : True := trivial\n") for i in range(20)]
    shards = ring.shard(items)
    assert sorted(i for indices in shards.values() for i in indices) == list(range(20))
    for node, indices in shards.items():
        assert indices == sorted(indices)
        assert len(indices) <= math.ceil(1.25 * 20 / 2)
    for node, count in ring.loads.items():
        ring.release(node, count)
    assert set(ring.loads.values()) == {0}
    with pytest.raises(ValueError):
        HeaderRing([])


NODES = [f"10.0.0.{i}:50051" for i in range(1, 9)]


@pytest.mark.parametrize("epsilon", [0.1, 0.25, 1.0])
def test_one_header_spreads_over_8_nodes_within_the_bound(epsilon):
    ring = HeaderRing(NODES, epsilon=epsilon)
    placed = [ring.acquire("import Mathlib") for _ in range(1000)]
    counts = collections.Counter(placed)
    bound = math.ceil((1 + epsilon) * 1000 / 8)
    assert max(counts.values()) <= bound
    assert counts[ring.node_for("import Mathlib")] == bound  # the owner is filled first
    # Each node in use is near the bound, so about 8 / (1 + epsilon) are used.
    assert len(counts) >= math.ceil(8 / (1 + epsilon))
    assert sum(counts.values()) == 1000
    # Overflow follows the ring from the owner: the nodes used are a prefix
    # of the header's preference order.
    order = ring.preferences("import Mathlib")
    assert set(order[: len(counts)]) == set(counts)


def test_three_headers_keep_affinity_while_load_allows():
    ring = HeaderRing(NODES)
    headers = ["import Mathlib", "import Aesop", "import Batteries"]
    owners = {h: ring.node_for(h) for h in headers}
    # Light load: each request finishes before the next; all go to the owner.
    for i in range(300):
        header = headers[i % 3]
        node = ring.acquire(header)
        assert node == owners[header]
        ring.release(node)
    # Heavy load: 3 x 200 in flight at once. Each header fills its owner up
    # to the bound, then overflows along its own ring order, and no node
    # passes the bound.
    placed = collections.defaultdict(collections.Counter)
    for i in range(600):
        header = headers[i % 3]
        placed[header][ring.acquire(header)] += 1
    bound = math.ceil(1.25 * 600 / 8)
    assert max(ring.loads.values()) <= bound
    for header in headers:
        assert placed[header][owners[header]] == max(placed[header].values())
        used = set(placed[header])
        assert used <= set(ring.preferences(header)[: len(used) + 2])


def test_a_node_freed_again_takes_its_headers_back():
    ring = HeaderRing(NODES)
    held = [ring.acquire("import Mathlib") for _ in range(50)]
    owner = ring.node_for("import Mathlib")
    assert held.count(owner) < 50  # overflowed
    for node in held:
        ring.release(node)
    assert ring.acquire("import Mathlib") == owner


async def test_sharded_client_sends_each_header_to_one_replica():
    apps = [await start_app(workers=1), await start_app(workers=1)]
    addresses = [f"127.0.0.1:{app.port}" for app in apps]
    try:
        items = [
            (
                f"s{i}",
                f"{HEADERS[i % 4]}\n\ntheorem t{i} (x : Nat) : x + {i} = x + {i} := by\n  {'sorry' if i % 5 == 0 else 'rfl'}\n",
            )
            for i in range(40)
        ]
        async with ShardedClient(addresses, max_retries=0) as client:
            results = await client.verify(items)
            ring = client.ring
        assert [r.id for r in results] == [i for i, _ in items]
        assert [r.status for r in results] == [
            "SORRY" if i % 5 == 0 else "VALID" for i in range(40)
        ]
        # 4 headers over 2 replicas, each within the bound; the loads held
        # during the call are released after it.
        finished = [app.pool.stats.jobs_finished for app in apps]
        assert sum(finished) == 40
        assert max(finished) <= math.ceil(1.25 * 40 / 2)
        assert set(ring.loads.values()) == {0}
    finally:
        for app in apps:
            await app.stop(2.0)


def test_envoy_ring_hash_has_the_same_load_bound():
    import pathlib

    import yaml

    path = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "k8s" / "envoy.yaml"
    [config_map] = [
        d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == "ConfigMap"
    ]
    envoy = yaml.safe_load(config_map["data"]["envoy.yaml"])
    [cluster] = envoy["static_resources"]["clusters"]
    assert cluster["lb_policy"] == "RING_HASH"
    factor = cluster["common_lb_config"]["consistent_hashing_lb_config"]["hash_balance_factor"]
    assert factor == round(100 * (1 + HeaderRing(["a:1"]).epsilon))
