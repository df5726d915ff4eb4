"""The code policy's needle search: where the constructs it looks at could
be, before anything is lexed (the lexing is leanrpc.core.lexer's, Lean's
tokenizer ported; this room only finds candidates).

Owns: `positions` (every occurrence of some needles: the compiled twin in
leanrpc._native.policy, or `positions_py`, one str.find pass per needle,
under LEANRPC_NO_EXTENSIONS=1). The policy runs on every snippet, so this is
a hot path: text with no candidate is never lexed, and text after the last
candidate is not lexed either.
May import: core._impl, _native.policy (its compiled twin).
"""

from __future__ import annotations

from ..core._impl import extensions_disabled

__all__ = ["IMPLEMENTATION", "positions", "positions_py"]


def positions_py(text: str, needles: tuple[str, ...], until: int | None = None) -> list[int]:
    """Sorted offsets of every occurrence of each needle (starting before `until`)."""
    found = []
    find = text.find
    end = len(text) if until is None else min(len(text), until + max(map(len, needles)))
    for needle in needles:
        at = find(needle, 0, end)
        while 0 <= at and (until is None or at < until):
            found.append(at)
            at = find(needle, at + 1, end)
    found.sort()
    return found


if extensions_disabled():
    positions = positions_py
    IMPLEMENTATION = "python"
else:  # the compiled twin (native/policy.pyx): one pass instead of one per needle
    from .._native.policy import positions

    IMPLEMENTATION = "native"
