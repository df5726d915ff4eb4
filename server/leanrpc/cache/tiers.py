"""The result cache: memory, then disk, then Redis, behind one lookup.

Owns the order of the tiers, promotion on a hit, background writes and the
counters; imports the codec and the stores of this package only.

`lookup` tries memory (in process, no await), then disk, then Redis, and
copies a hit into the tiers above it. `store` puts the entry in memory at
once and writes disk and Redis in background tasks (`flush` waits for them),
so no caller waits for a disk or the network to get its answer. A corrupt
entry in any tier is a miss, logged as a warning, and removed from that tier.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

from ..results import VerifyResult
from . import codec
from .memory import MemoryStore

log = logging.getLogger("leanrpc.cache")


@dataclasses.dataclass
class CacheStats:
    lookups: int = 0
    hits: dict[str, int] = dataclasses.field(default_factory=lambda: {"memory": 0, "disk": 0, "redis": 0})
    misses: int = 0
    too_slow: int = 0  # hits a caller's shorter timeout could not use
    joined: int = 0  # callers answered by an identical snippet in flight
    stored: int = 0
    not_cacheable: int = 0
    bypassed: int = 0
    corrupt: int = 0
    store_errors: int = 0


class ResultCache:
    def __init__(self, memory: MemoryStore, *, disk=None, shared=None) -> None:
        self.memory = memory
        self.disk = disk
        self.shared = shared
        self.stats = CacheStats()
        self._writes: set[asyncio.Task] = set()

    @property
    def tiers(self) -> list:
        return [t for t in (self.disk, self.shared) if t is not None]

    async def lookup(self, key: str) -> tuple[codec.CachedVerdict, str] | None:
        """The stored verdict for `key` and the tier it came from, or None."""
        self.stats.lookups += 1
        found = self._decode(self.memory.get(key), key, self.memory)
        if found is not None:
            self.stats.hits["memory"] += 1
            return found, "memory"
        above: list = []
        for tier in self.tiers:
            try:
                data = await tier.get(key)
            except Exception as exc:  # a broken disk is a miss too
                log.warning("result cache: %s read failed (%s); treated as a miss", tier.name, exc)
                data = None
            found = self._decode(data, key, tier)
            if found is not None:
                self.stats.hits[tier.name] += 1
                # Promotion copies the stored bytes as they are.
                self.memory.put(key, data)
                for upper in above:
                    self._background(upper, key, data)
                return found, tier.name
            above.append(tier)
        self.stats.misses += 1
        return None

    def store(self, key: str, run: str, result: VerifyResult) -> None:
        data = codec.encode(key, run, time.time(), result)
        self.memory.put(key, data)
        self.stats.stored += 1
        for tier in self.tiers:
            self._background(tier, key, data)

    async def flush(self) -> None:
        """Waits for every background write started so far."""
        while self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)

    async def close(self) -> None:
        await self.flush()
        if self.shared is not None:
            await self.shared.close()

    def _decode(self, data: bytes | None, key: str, tier) -> codec.CachedVerdict | None:
        if data is None:
            return None
        try:
            return codec.decode(data, key)
        except codec.CorruptEntry as exc:
            self.stats.corrupt += 1
            log.warning("result cache: corrupt %s entry %s… (%s); treated as a miss and removed", tier.name, key[:16], exc)
            if tier is self.memory:
                self.memory.discard(key)
            else:
                task = asyncio.ensure_future(tier.discard(key))
                self._writes.add(task)
                task.add_done_callback(self._write_done)
            return None

    def _background(self, tier, key: str, data: bytes) -> None:
        task = asyncio.ensure_future(tier.put(key, data))
        task.set_name(f"leanrpc-cache-{tier.name}-write")
        self._writes.add(task)
        task.add_done_callback(self._write_done)

    def _write_done(self, task: asyncio.Task) -> None:
        self._writes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.stats.store_errors += 1
            log.warning("result cache: background write failed (%s); the entry is only in the tiers above", task.exception())
