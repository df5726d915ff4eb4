"""What a request costs the stand-in process in CPU time and memory.

A real REPL pays for a Mathlib header once per process (``--import-cost``,
``--base-memory-mb``), again, smaller, for each later header
(``--reimport-cost``, ``--header-memory-mb``; the fork only for headers it has
not loaded before), and per 1000 characters of body or tactic text
(``--cost-per-kchar``). With ``incrementality`` the fork re-elaborates only
from the first line that differs from an earlier command on the same env, so
it is charged for that suffix alone. Replayed Kimina proofs may burn their
recorded time (``--replay-time-scale``). Nothing is charged in record mode.

Owns: ``Costs``, the per-process cost state (headers loaded, texts seen per
env for incrementality). The primitives that burn CPU and hold memory are in
``faults.py``.
May import: the stand-in's ``elab``, ``faults``, ``state`` and the standard library.
"""

from __future__ import annotations

import bisect
import os

from . import elab, faults
from .state import Options

__all__ = ["Costs"]


class Costs:
    def __init__(self, opts: Options, enabled: bool = True):
        self.o = opts
        self.enabled = enabled  # False in record mode
        self._mathlib_loaded = False
        self._headers: set[str] = set()
        self._incr: dict[
            str, list[str]
        ] = {}  # env id -> sorted texts run on it (the fork's prefix trie)

    def header(self, mods: list[str]) -> None:
        """A fresh env's header import."""
        if not self.enabled or not any(elab.is_mathlib(m) for m in mods):
            return
        key = "\n".join(mods)
        if not self._mathlib_loaded:
            self._mathlib_loaded = True
            self._headers.add(key)
            faults.grow(self.o.base_memory_mb)
            faults.burn(self.o.import_cost)
        elif self.o.fork and key in self._headers:
            return
        else:
            # A second header in the same process: the .olean files are mapped
            # and shared, but its env is built again (time and memory; upstream
            # even for a header it loaded before, the fork only for new ones).
            self._headers.add(key)
            faults.grow(self.o.header_memory_mb)
            faults.burn(self.o.reimport_cost)

    def body(self, base: str, text: str, body_chars: int, incremental: bool) -> None:
        """A command's body of `body_chars` characters, run on env `base` ("-" for a fresh one)."""
        if not self.enabled:
            return
        cost = self.o.cost_per_kchar
        if self.o.fork:
            texts = self._incr.setdefault(base, [])
            if incremental and cost > 0 and texts:
                reuse = 0
                k = bisect.bisect_left(texts, text)
                for j in (k - 1, k):
                    if 0 <= j < len(texts):
                        p = len(os.path.commonprefix([texts[j], text]))
                        reuse = max(reuse, p)
                if reuse < len(text):
                    reuse = text.rfind("\n", 0, reuse) + 1
                body_chars = min(body_chars, len(text) - reuse)
            k = bisect.bisect_left(texts, text)
            if k >= len(texts) or texts[k] != text:
                texts.insert(k, text)
        if cost > 0 and body_chars > 0:
            faults.burn(cost * body_chars / 1000.0)

    def tactic(self, text: str) -> None:
        if self.enabled and self.o.cost_per_kchar > 0:
            faults.burn(self.o.cost_per_kchar * len(text) / 1000.0)

    def replayed(self, seconds: float) -> None:
        """A Kimina proof answered from its recording, which took `seconds` on real Lean."""
        if self.enabled and seconds > 0 and self.o.replay_time_scale > 0:
            faults.burn(seconds * self.o.replay_time_scale)
