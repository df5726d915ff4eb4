"""Which worker elaborated which text: the pool trie and per-worker histories.

Owns: the pool-level trie ("<scope>\\0<text>\\0<worker>" for every text a
live worker still remembers, plus texts being elaborated right now) and each
worker's bounded history of texts per scope. A scope names what a text is
elaborated on (header, preamble, session env) in worker-independent terms,
so this room needs no REPL env ids. May import: core.trie only. No clock,
no processes, no asyncio.
"""

from __future__ import annotations

import collections

from ..core.trie import PrefixTrie

__all__ = ["PrefixIndex"]


def _snap_to_line(text: str, length: int) -> int:
    """Lean reuses whole commands: cut a shared prefix back to a line start."""
    cut = text.rfind("\n", 0, length)
    return 0 if cut < 0 else cut + 1


class PrefixIndex:
    """`history_limit` texts per worker, and at most `history_mb` million
    characters of them (0: no bound but the count) (the newest text is always kept): a deep chain of long tactics,
    whose call texts each repeat the chain so far, stays bounded by characters
    instead of growing with the square of its depth (docs/RELIABILITY.md)."""

    def __init__(self, history_limit: int = 64, history_mb: float = 0) -> None:
        self.history_limit = history_limit
        self.history_chars = int(history_mb * 1_000_000) or None
        # Per worker, the characters its history holds.
        self._chars: dict[str, int] = {}
        # Payload: the worker name.
        self._pool = PrefixTrie()
        self._histories: dict[str, PrefixTrie] = {}
        # Per worker, its history keys oldest first (bounded history).
        self._order: dict[str, collections.deque[str]] = {}

    def __len__(self) -> int:
        """Entries in the pool trie (remembered and in-flight texts)."""
        return len(self._pool)

    def __iter__(self):
        """The pool trie's keys ("<scope>\0<text>\0<worker>")."""
        return iter(self._pool)

    def history_size(self, worker: str) -> int:
        """How many texts `worker` remembers."""
        return len(self._order.get(worker, ()))

    def history_chars_of(self, worker: str) -> int:
        """How many characters of text `worker`'s history holds."""
        return self._chars.get(worker, 0)

    @staticmethod
    def _key(worker: str, scope: str, text: str) -> str:
        return f"{scope}\x00{text}\x00{worker}"

    def reserve(self, worker: str, scope: str, text: str) -> str | None:
        """Marks `text` as being elaborated on `worker`, so routing can wait
        for it; returns the key to `unreserve` (None if already known)."""
        key = self._key(worker, scope, text)
        if key in self._pool:
            return None
        self._pool.insert(key, worker)
        return key

    def unreserve(self, key: str) -> None:
        self._pool.remove(key)

    def remember(self, worker: str, scope: str, text: str, reserved: str | None = None) -> None:
        """Records that `worker` elaborated `text` in `scope`. A reservation
        for the same text becomes the history's entry (the caller drops it)."""
        key = self._key(worker, scope, text)
        if key not in self._pool:
            self._pool.insert(key, worker)
        history = self._histories.setdefault(worker, PrefixTrie())
        order = self._order.setdefault(worker, collections.deque())
        local = f"{scope}\x00{text}"
        if local in history:
            return
        history.insert(local, None)
        order.append(local)
        self._chars[worker] = self._chars.get(worker, 0) + len(local)
        while len(order) > self.history_limit or (
            self.history_chars is not None
            and len(order) > 1
            and self._chars[worker] > self.history_chars
        ):
            old = order.popleft()
            history.remove(old)
            self._chars[worker] -= len(old)
            old_scope, _sep, old_text = old.partition("\x00")
            old_key = self._key(worker, old_scope, old_text)
            if old_key != reserved:
                self._pool.remove(old_key)

    def reusable_prefix(self, worker: str, scope: str, text: str) -> int:
        """Characters of `text` that `worker` elaborated before in `scope`."""
        history = self._histories.get(worker)
        if not history:
            return 0
        prefix = f"{scope}\x00"
        length = history.common_prefix_length(prefix + text) - len(prefix)
        if length <= 0:
            return 0
        return _snap_to_line(text, length)

    def holder(self, scope: str, text: str) -> tuple[str, int] | None:
        """The worker holding the longest prefix of `text` in `scope` (any
        state), and its length in whole lines unless it is all of `text`."""
        head = scope + "\x00"
        found = self._pool.common_prefix(head + text)
        if found is None:
            return None
        length, worker = found
        length = min(length - len(head), len(text))
        if length <= 0:
            return None
        if length < len(text):
            length = text.rfind("\n", 0, length) + 1
        return worker, length

    def forget_worker(self, worker: str) -> None:
        """Drops everything a dead worker remembered."""
        self._histories.pop(worker, None)
        self._chars.pop(worker, None)
        for local in self._order.pop(worker, ()):
            scope, _sep, text = local.partition("\x00")
            self._pool.remove(self._key(worker, scope, text))
