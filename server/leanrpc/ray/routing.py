"""Consistent-hash routing of snippets to leanrpc servers by import header."""

from __future__ import annotations

import asyncio
import bisect
import hashlib
from typing import Iterable, Sequence

from ..client import AsyncClient, Result, header_hash


def _point(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


class HeaderRing:
    """A consistent-hash ring of server addresses (`replicas` points each)."""

    def __init__(self, nodes: Iterable[str], replicas: int = 128) -> None:
        self.nodes = sorted(set(nodes))
        if not self.nodes:
            raise ValueError("a ring needs at least one node")
        points = sorted((_point(f"{node}#{i}"), node) for node in self.nodes for i in range(replicas))
        self._keys = [p for p, _n in points]
        self._owners = [n for _p, n in points]

    def node_for(self, key: str) -> str:
        index = bisect.bisect(self._keys, _point(key)) % len(self._keys)
        return self._owners[index]

    def node_for_code(self, code: str) -> str:
        return self.node_for(header_hash(code))

    def shard(self, items: Sequence[tuple[str, str]]) -> dict[str, list[int]]:
        """node -> indices of the (id, code) items it gets, in input order."""
        shards: dict[str, list[int]] = {}
        for index, (_id, code) in enumerate(items):
            shards.setdefault(self.node_for_code(code), []).append(index)
        return shards


class ShardedClient:
    """Verifies over several servers, each header on its ring owner."""

    def __init__(self, addresses: Iterable[str], *, token: str | None = None, **client_kwargs) -> None:
        self.ring = HeaderRing(addresses)
        self._clients = {a: AsyncClient(a, token=token, **client_kwargs) for a in self.ring.nodes}

    async def verify(self, snippets: Iterable[tuple[str, str]], **kwargs) -> list[Result]:
        items = [(str(i), c) for i, c in snippets]
        shards = self.ring.shard(items)

        async def run(address: str, indices: list[int]) -> list[tuple[int, Result]]:
            results = await self._clients[address].verify([items[i] for i in indices], **kwargs)
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
