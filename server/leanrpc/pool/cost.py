"""Cost models routing weighs: bodies (seconds ≈ overhead + per_char × chars) and header imports.

Routing weighs "wait for the busy worker that holds a longer prefix" against
"elaborate the extra text on an idle worker now"; both sides need the cost of
one elaborated character. A plain ratio (mean seconds / mean characters) folds
the fixed per-request overhead into it: after a run of short edits (50 new
characters, 0.25 s of mostly overhead) it priced a 10 000-character prefix at
50 s instead of 1.5 s, so jobs always waited for the busy holder and the
other worker sat idle (issue 5 follow-up: trie slower than no-trie).

Header imports (`HeaderCostModel`): what loading each import header took, as
measured, so routing can weigh "wait for the busy worker that holds this
header" against "import it on an idle worker" (pool/routing.py: a header's
waits cost idle time until they add up to one import, then the idle worker
imports it; ski rental). May import: the standard library only.
"""

from __future__ import annotations

import collections
import types
from collections.abc import Mapping

# Weight of the newest observation.
_WEIGHT = 0.1
# Below this spread of observed sizes (characters²) the slope is not
# identifiable; keep the last fitted one.
_MIN_VARIANCE = 256.0**2


class BodyCostModel:
    """Exponentially weighted least squares of body seconds on elaborated chars."""

    def __init__(self, weight: float = _WEIGHT) -> None:
        self._weight = weight
        self._mean_chars: float | None = None
        self._mean_s = 0.0
        self._var_chars = 0.0
        self._cov = 0.0
        self._slope: float | None = None

    @property
    def known(self) -> bool:
        return self._mean_chars is not None

    def observe(self, seconds: float, chars: int) -> None:
        if self._mean_chars is None:
            self._mean_chars, self._mean_s = float(chars), seconds
            return
        w = self._weight
        d_chars = chars - self._mean_chars
        d_s = seconds - self._mean_s
        self._mean_chars += w * d_chars
        self._mean_s += w * d_s
        self._var_chars = (1 - w) * (self._var_chars + w * d_chars * d_chars)
        self._cov = (1 - w) * (self._cov + w * d_chars * d_s)
        if self._var_chars >= _MIN_VARIANCE:
            self._slope = max(0.0, self._cov / self._var_chars)

    @property
    def per_char(self) -> float:
        """Seconds per elaborated character (0 before any observation)."""
        if self._mean_chars is None:
            return 0.0
        if self._slope is not None:
            return self._slope
        # Only one size seen so far: the ratio is an upper bound.
        return self._mean_s / max(1.0, self._mean_chars)

    @property
    def overhead_s(self) -> float:
        if self._mean_chars is None:
            return 0.0
        return max(0.0, self._mean_s - self.per_char * self._mean_chars)

    def seconds(self, chars: int) -> float:
        """Expected body time for `chars` elaborated characters."""
        return self.overhead_s + self.per_char * max(0, chars)


# Import keys whose import time is kept (the most recently loaded).
_HEADER_KEYS = 256


class HeaderCostModel:
    """Seconds a header's import took, per import key (exponentially weighted
    over its loads, cold or next to other headers in the same process)."""

    def __init__(self, weight: float = _WEIGHT * 3, keys: int = _HEADER_KEYS) -> None:
        self._weight = weight
        self._keys = keys
        self._seconds: collections.OrderedDict[str, float] = collections.OrderedDict()
        self.view: Mapping[str, float] = types.MappingProxyType(self._seconds)

    def observe(self, import_key: str, seconds: float) -> None:
        old = self._seconds.pop(import_key, None)
        self._seconds[import_key] = seconds if old is None else old + self._weight * (seconds - old)
        while len(self._seconds) > self._keys:
            self._seconds.popitem(last=False)

    def seconds(self, import_key: str) -> float | None:
        """The expected import time of `import_key`; None before its first load."""
        return self._seconds.get(import_key)
