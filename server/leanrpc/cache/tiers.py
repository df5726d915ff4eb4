"""The result cache: memory, then disk, then Redis, behind one lookup.

Owns the order of the tiers, promotion on a hit, background writes and the
counters; imports the codec and the stores of this package only.

`lookup` tries memory (in process, no await), then disk, then Redis, and
copies a hit into the tiers above it. `store` puts the entry in memory at
once and writes disk and Redis in background tasks (`flush` waits for them),
so no caller waits for a disk or the network to get its answer. A corrupt
entry in any tier is a miss, logged as a warning, and removed from that tier.
Disk and Redis values are sealed (seal.Sealer, each tier's `sealer`): one
whose MAC fails is a miss too, counted in `forged`, logged once per tier.
`withdraw` removes entries from every tier (a poisoned worker's: provenance.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

from ..results import VerifyResult
from . import codec
from .memory import MemoryStore
from .seal import ForgedEntry

log = logging.getLogger("leanrpc.cache")


@dataclasses.dataclass
class CacheStats:
    lookups: int = 0
    hits: dict[str, int] = dataclasses.field(
        default_factory=lambda: {"memory": 0, "disk": 0, "redis": 0}
    )
    misses: int = 0
    too_slow: int = 0  # hits a caller's shorter timeout could not use
    joined: int = 0  # callers answered by an identical snippet in flight
    stored: int = 0
    not_cacheable: int = 0
    bypassed: int = 0
    corrupt: int = 0
    forged: int = 0  # disk/Redis entries whose MAC failed (leanrpc.cache.seal)
    store_errors: int = 0
    withdrawn: int = 0  # entries removed because their worker was poisoned (cache.provenance)
    revoked: int = 0  # a written-back copy from a poisoned worker, or not `proof`


class ResultCache:
    def __init__(self, memory: MemoryStore, *, disk=None, shared=None) -> None:
        self.memory = memory
        self.disk = disk
        self.shared = shared
        self.stats = CacheStats()
        self._writes: set[asyncio.Task] = set()
        self._warned: set = set()  # (kind, tier) of the forged or revoked entries already logged
        # (server, worker) of poisoned workers (cache.provenance): their entries are
        # withdrawn, and a sealed copy someone writes back is still never served.
        self.revoked: set[tuple[str, str]] = set()

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
            data = self._unseal(data, key, tier)
            found = self._decode(data, key, tier)
            if found is not None:
                self.stats.hits[tier.name] += 1
                # Promotion copies the stored bytes as they are.
                self.memory.put(key, data)
                for upper in above:
                    self._background(upper, key, upper.sealer.seal(key, data))
                return found, tier.name
            above.append(tier)
        self.stats.misses += 1
        return None

    def store(
        self, key: str, run: str, result: VerifyResult, provenance: codec.Provenance | None = None
    ) -> None:
        data = codec.encode(key, run, time.time(), result, provenance)
        self.memory.put(key, data)
        self.stats.stored += 1
        for tier in self.tiers:
            self._background(tier, key, tier.sealer.seal(key, data))

    def withdraw(self, entries: dict[str, str], *, shared: bool = True) -> int:
        """Removes each key's entry from memory (when it is still run `run`'s),
        and from disk and Redis (`shared`), in background deletes (`flush`
        waits for them). Returns how many keys were withdrawn."""
        for key, run in entries.items():
            data = self.memory.get(key)
            if data is not None:
                try:
                    if codec.decode(data, key).run == run:
                        self.memory.discard(key)
                except codec.CorruptEntry:
                    self.memory.discard(key)
            if shared:
                for tier in self.tiers:
                    self._discard(tier, key)
        self.stats.withdrawn += len(entries)
        return len(entries)

    async def flush(self) -> None:
        """Waits for every background write started so far."""
        while self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)

    async def close(self) -> None:
        await self.flush()
        if self.shared is not None:
            await self.shared.close()

    def _unseal(self, data: bytes | None, key: str, tier) -> bytes | None:
        """The entry inside a disk/Redis value, or None (a miss) when its MAC fails."""
        if data is None:
            return None
        try:
            return tier.sealer.open(key, data)
        except ForgedEntry as exc:
            self.stats.forged += 1
            if ("forged", tier.name) not in self._warned:
                self._warned.add(("forged", tier.name))
                log.warning(
                    "result cache: unauthenticated %s entry %s… (%s); treated as a miss and removed "
                    "(further ones are only counted: cache forged)",
                    tier.name,
                    key[:16],
                    exc,
                )
            self._discard(tier, key)
            return None

    def _discard(self, tier, key: str) -> None:
        task = asyncio.ensure_future(tier.discard(key))
        self._writes.add(task)
        task.add_done_callback(self._write_done)

    def memory_verdict(self, key: str) -> codec.CachedVerdict | None:
        """The memory tier's verdict for `key`, or None (a corrupt entry is
        counted, removed and a miss)."""
        return self._decode(self.memory.get(key), key, self.memory)

    def _decode(self, data: bytes | None, key: str, tier) -> codec.CachedVerdict | None:
        if data is None:
            return None
        try:
            verdict = codec.decode(data, key)
        except codec.CorruptEntry as exc:
            self.stats.corrupt += 1
            log.warning(
                "result cache: corrupt %s entry %s… (%s); treated as a miss and removed",
                tier.name,
                key[:16],
                exc,
            )
            self._drop(tier, key)
            return None
        origin = verdict.provenance
        poisoned = origin is not None and (origin.server, origin.worker) in self.revoked
        if origin is not None and (origin.policy != "proof" or poisoned):
            # A replayed copy of a withdrawn entry (its MAC is still good) or a
            # result no `proof` request produced: never an answer.
            self.stats.revoked += 1
            if ("revoked", tier.name) not in self._warned:
                self._warned.add(("revoked", tier.name))
                log.warning(
                    "result cache: %s entry %s… came from %s (policy %s); treated as a miss and "
                    "removed (further ones are only counted: cache revoked)",
                    tier.name,
                    key[:16],
                    "a poisoned worker" if poisoned else "another policy",
                    origin.policy,
                )
            self._drop(tier, key)
            return None
        return verdict

    def _drop(self, tier, key: str) -> None:
        if tier is self.memory:
            self.memory.discard(key)
        else:
            self._discard(tier, key)

    def _background(self, tier, key: str, data: bytes) -> None:
        task = asyncio.ensure_future(tier.put(key, data))
        task.set_name(f"leanrpc-cache-{tier.name}-write")
        self._writes.add(task)
        task.add_done_callback(self._write_done)

    def _write_done(self, task: asyncio.Task) -> None:
        self._writes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.stats.store_errors += 1
            log.warning(
                "result cache: background write failed (%s); the entry is only in the tiers above",
                task.exception(),
            )
