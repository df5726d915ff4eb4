"""The canary writer: statements whose truth the server knows, written like client work.

Owns: `CanaryWriter.make`, one `pool.CanaryProbe` (Lean text of two or
three declarations, at least one true and one false, and each one's lines and
truth) with fresh random names, statements and layout each time. The pool
decides when to send one and judges the answer (pool/canary.py); this room
only writes them. May import: pool (the facade's CanaryProbe).

What a canary looks like: a `theorem <name>` (or an `example`) stating a
comparison of natural-number arithmetic, `a + b = c`, `a * b ≠ c`, `a < b`,
..., proved `by decide`, true or false, with a comment
or a doc comment before it now and then and the proof on one line or the next.
Only core Lean is used (`Nat`, `decide`), so it elaborates on any header, and
it is sent on the header env alone, none of the client's text. Real Lean
proves the true ones and answers a false one with "tactic 'decide' proved that
the proposition ... is false"; the stand-in REPL does the same.

Why not a library: the grammar is a few lines; a random source is all it
needs. `random.SystemRandom` (the OS's randomness), so a REPL cannot predict
the next canary from the ones it has seen.
"""

from __future__ import annotations

import random

from ..pool import CanaryProbe, Claim

__all__ = ["CanaryWriter"]

# No keyword (`calc`, `lemma`, `at`, ...) and at least two words a name: a root
# declaration of that name in the header's env would make a true canary fail.
_WORDS = (
    "aux key main step bound sum prod add mul basic simple check fact small arith goal claim "
    "part base helper test val num two three four five bridge easy quick sanity"
).split()
_COMMENTS = (
    "-- arithmetic fact\n",
    "-- a small check\n",
    "/-- A closed computation. -/\n",
    "/-- Auxiliary: decided by evaluation. -/\n",
    "-- by evaluation\n",
)
_PROOFS = (" := by decide", " := by\n  decide", " :=\n  by decide", " := by\n    decide")


class CanaryWriter:
    """`make()`: a new canary (implements pool.CanarySource)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.SystemRandom()

    def make(self) -> CanaryProbe:
        """Two or three declarations, at least one true and one false, in random order."""
        rng = self._rng
        truths = [True, False] + [rng.random() < 0.5 for _ in range(rng.randint(0, 1))]
        rng.shuffle(truths)
        parts: list[str] = []
        claims: list[Claim] = []
        line = 1
        names: set[str] = set()  # two of one name: "already declared" on a true one
        for holds in truths:
            text = self._declaration(holds, names)
            lines = text.count("\n") + 1
            claims.append(Claim(line, line + lines - 1, holds))
            parts.append(text)
            gap = rng.choice(("\n", "\n\n"))
            line += lines + gap.count("\n") - 1
            parts.append(gap)
        text = "".join(parts[:-1]) + ("\n" if rng.random() < 0.5 else "")
        return CanaryProbe(text, tuple(claims))

    def _declaration(self, holds: bool, names: set[str]) -> str:
        rng = self._rng
        statement = self._statement(holds)
        name = self._name()
        while name in names:
            name = self._name()
        names.add(name)
        head = "example" if rng.random() < 0.2 else f"theorem {name}"
        comment = rng.choice(_COMMENTS) if rng.random() < 0.3 else ""
        return f"{comment}{head} : {statement}{rng.choice(_PROOFS)}"

    def _name(self) -> str:
        rng = self._rng
        parts = rng.sample(_WORDS, rng.randint(2, 3))
        if rng.random() < 0.6:
            parts.append(str(rng.randint(0, 999)))
        name = "_".join(parts)
        return name + "'" if rng.random() < 0.1 else name

    def _statement(self, holds: bool) -> str:
        rng = self._rng
        a, b = rng.randint(2, 999), rng.randint(2, 999)
        kind = rng.choice(("+=", "*=", "+≠", "<", "≤"))
        if kind in ("+=", "*=", "+≠"):
            op = kind[0]
            value = a + b if op == "+" else a * b
            wrong = value + rng.choice((-1, 1)) * rng.randint(1, 3)  # value >= 4: never negative
            if kind[1] == "=":
                return f"{a} {op} {b} = {value if holds else wrong}"
            return f"{a} {op} {b} ≠ {wrong if holds else value}"
        low, high = sorted((a, a + rng.randint(1, 500)))
        if holds and kind == "≤" and rng.random() < 0.2:
            low = high  # equal: still holds for ≤
        return f"{low} {kind} {high}" if holds else f"{high} {kind} {low}"
