"""The in-process tier: entry bytes in an LRU bounded by their total size.

Owns only the LRU; imports nothing from leanrpc. Entries are the compressed
bytes from `codec`, so the bound counts what is really held.
An OrderedDict of our own rather than `cachetools.LRUCache(getsizeof=len)`:
that is not a dependency, and for these ~40 lines it would still need the
bytes-held and eviction counts the metrics read wrapped around it.
"""

from __future__ import annotations

import collections


class MemoryStore:
    """LRU of key -> entry bytes, at most `max_bytes` of entries in total."""

    name = "memory"

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self.max_bytes = max_bytes
        self.bytes_held = 0
        self.evictions = 0
        self._entries: collections.OrderedDict[str, bytes] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> bytes | None:
        data = self._entries.get(key)
        if data is not None:
            self._entries.move_to_end(key)
        return data

    def put(self, key: str, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return  # larger than the whole budget: never held
        self.discard(key)
        self._entries[key] = data
        self.bytes_held += len(data)
        while self.bytes_held > self.max_bytes:
            _old_key, old = self._entries.popitem(last=False)
            self.bytes_held -= len(old)
            self.evictions += 1

    def discard(self, key: str) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes_held -= len(old)
