"""The needle search: where the constructs a reader of Lean text looks at
could be, before anything is lexed (the lexing is leanrpc.core.lexer's,
Lean's tokenizer ported; this room only finds candidates).

Owns: `positions` (every occurrence of some needles: the compiled twin in
leanrpc._native.policy, one pass over the text whatever the needles, or
`positions_py`, one str.find pass per needle, under LEANRPC_NO_EXTENSIONS=1).
Two hot paths use it on every snippet: the code policy (policy/reading.py:
text with no candidate is never lexed, and text after the last candidate is
not lexed either) and the axiom plan's declaration scan (core/declarations.py:
its keywords and scope words, and core/masking.py's comment openers, found in
one pass instead of one str.find pass per word, which on a non-ASCII text
costs a few microseconds each).
May import: core._impl, _native.policy (its compiled twin).
"""

from __future__ import annotations

from ._impl import extensions_disabled

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
