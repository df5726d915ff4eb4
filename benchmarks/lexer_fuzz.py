"""The lexer fuzzer's differential check (tests/policy/test_lexer_fuzz.py),
run longer than CI does: random token soups for a time budget, each read by
the code policy and by the independent reference reading of Lean's tokenizer
(tests/policy/lean_reference.py); either they agree or the policy refuses.
Prints how many soups were tried, refused, allowed, and the first failure.

    python -m benchmarks.lexer_fuzz [--seconds 60] [--seed 43] [--max-pieces 24] [--more]

`--more` adds pieces CI's soups do not use (`EXTRA`: `#`-words of Mathlib's that
may be no token, Mathlib's glued notations, escapes, quotation syntax), so a long
run also tries what CI's fixed examples never reach.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

EXTRA = [
    "#align", "#simp", "#norm_num", "#where", "#S", "#v[", "0#", "Type*", "![", "!![", "ℝ≥0",
    "%", "eval%", "$", "<|", "|>.", "·", "λ", "fun", "↦", "@", "‹", "›", "`(", "``(", "$(",
    "x'", "«x»'", "h.2", "1.", "\\n", "\\u{41}", "\\x41", "/--a-/", "--a\n", "local",
    "scoped", "-", "simp", "instance", "(since := \"x\")", "m!", "f!\"{", "r##\"", "\"#",
]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=43)
    parser.add_argument("--max-pieces", type=int, default=24)
    parser.add_argument("--more", action="store_true", help="add the EXTRA pieces")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "policy"))
    from leanrpc.policy import scan
    from test_lexer_fuzz import PIECES, check

    pieces = PIECES + EXTRA if args.more else PIECES
    rng = random.Random(args.seed)
    tried = refused = 0
    stop = time.monotonic() + args.seconds
    while time.monotonic() < stop:
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, args.max_pieces)))
        tried += 1
        refused += bool(scan(text).refused)
        try:
            check(text)
        except AssertionError as failure:
            print(f"FAILED after {tried} soups: {failure}")
            return 1
    print(f"{tried} soups, {refused} refused, {tried - refused} allowed: all agree")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
