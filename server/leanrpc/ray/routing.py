"""Consistent hashing with bounded loads: snippets to leanrpc servers by header.

Owns the ring and the per-node load accounting; imports only the client.

Plain consistent hashing sends every snippet of a header to one node, and a
training run has one dominant header (`import Mathlib`): it would scale to
one machine. `HeaderRing` is consistent hashing with bounded loads (Mirrokni,
Thorup and Zadimoghaddam, 2018; Envoy's `hash_balance_factor` does the same):
no node takes more than `ceil((1 + epsilon) * mean load)`, counting the item
being placed. A key goes to the first node clockwise from its point that is
under that bound, so it stays on its owner while load allows and overflows to
the *same* next node on the ring each time (which then warms the header too).
`node_for` is the owner, ignoring load.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import hashlib
import math
from typing import Iterable, Sequence

from ..client import AsyncClient, Result, header_hash

DEFAULT_EPSILON = 0.25  # Envoy: hash_balance_factor 125


def _point(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


class HeaderRing:
    """A consistent-hash ring of server addresses with bounded loads."""

    def __init__(
        self, nodes: Iterable[str], replicas: int = 128, epsilon: float = DEFAULT_EPSILON
    ) -> None:
        self.nodes = sorted(set(nodes))
        if not self.nodes:
            raise ValueError("a ring needs at least one node")
        if epsilon <= 0:
            raise ValueError(
                "epsilon must be > 0 (a bound of exactly the mean cannot always be met)"
            )
        self.epsilon = epsilon
        points = sorted(
            (_point(f"{node}#{i}"), node) for node in self.nodes for i in range(replicas)
        )
        self._keys = [p for p, _n in points]
        self._owners = [n for _p, n in points]
        self.loads: dict[str, int] = {node: 0 for node in self.nodes}
        self.preferences = functools.lru_cache(maxsize=4096)(self._preferences)

    def node_for(self, key: str) -> str:
        """The key's owner on the ring, whatever the load."""
        index = bisect.bisect(self._keys, _point(key)) % len(self._keys)
        return self._owners[index]

    def node_for_code(self, code: str) -> str:
        return self.node_for(header_hash(code))

    def _preferences(self, key: str) -> tuple[str, ...]:
        """Every node once, in ring order from the key's point: owner first."""
        start = bisect.bisect(self._keys, _point(key))
        seen: dict[str, None] = {}
        for step in range(len(self._keys)):
            seen.setdefault(self._owners[(start + step) % len(self._keys)], None)
            if len(seen) == len(self.nodes):
                break
        return tuple(seen)

    def capacity(self) -> int:
        """The most any node may hold once one more item is placed."""
        total = sum(self.loads.values()) + 1
        return math.ceil((1 + self.epsilon) * total / len(self.nodes))

    def acquire(self, key: str) -> str:
        """Places one item of `key`: its node's load goes up until `release`."""
        bound = self.capacity()
        for node in self.preferences(key):
            if self.loads[node] < bound:
                self.loads[node] += 1
                return node
        raise AssertionError("unreachable: some node is always under a bound above the mean")

    def release(self, node: str, count: int = 1) -> None:
        self.loads[node] = max(0, self.loads[node] - count)

    def acquire_code(self, code: str) -> str:
        return self.acquire(header_hash(code))

    def shard(self, items: Sequence[tuple[str, str]]) -> dict[str, list[int]]:
        """node -> indices of the (id, code) items it gets, in input order.

        The items are placed (and held) on top of the loads already there;
        the caller releases them when they are answered.
        """
        shards: dict[str, list[int]] = {}
        for index, (_id, code) in enumerate(items):
            shards.setdefault(self.acquire_code(code), []).append(index)
        return shards


class ShardedClient:
    """Verifies over several servers, each header on its ring owner while its
    load allows, overflowing to the next node on the ring."""

    def __init__(
        self,
        addresses: Iterable[str],
        *,
        token: str | None = None,
        epsilon: float = DEFAULT_EPSILON,
        **client_kwargs,
    ) -> None:
        self.ring = HeaderRing(addresses, epsilon=epsilon)
        self._clients = {a: AsyncClient(a, token=token, **client_kwargs) for a in self.ring.nodes}

    async def verify(self, snippets: Iterable[tuple[str, str]], **kwargs) -> list[Result]:
        items = [(str(i), c) for i, c in snippets]
        shards = self.ring.shard(items)

        async def run(address: str, indices: list[int]) -> list[tuple[int, Result]]:
            try:
                results = await self._clients[address].verify([items[i] for i in indices], **kwargs)
            finally:
                self.ring.release(address, len(indices))
            return list(zip(indices, results))

        merged: list[Result | None] = [None] * len(items)
        for part in await asyncio.gather(*(run(a, idx) for a, idx in shards.items())):
            for index, result in part:
                merged[index] = result
        return merged  # type: ignore[return-value]

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self._clients.values()))

    async def __aenter__(self) -> "ShardedClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
