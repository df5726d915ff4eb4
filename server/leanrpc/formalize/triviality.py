"""The triviality gate: flags compiled statements that are trivially true or vacuous.

Owns `probes(candidate)` and `check_trivial(candidate, header, verify)`. Imports
wellformed.py and leanrpc.results only.

A statement that type-checks can still be an unfaithful formalization: the most
common failures are a goal that closes by itself (`1 = 1`, a decidable numeral
fact) and contradictory hypotheses (everything follows). Two cheap Lean runs,
in parallel, catch both without a second model:

    theorem <name> <binders> : <type> := by first | trivial | decide | simp
    example <binders> : False := by simp_all          (only when there are binders)

A probe that Lean accepts without errors and without sorry (VALID) marks the
candidate `suspect_trivial`; the statement still counts as formalized (the
client decides). Any other answer (errors, timeout, a verify failure) means
"not shown trivial". The REPL stand-in type-checks nothing and accepts every
probe, so its answers are ignored (never flagged).
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from leanrpc.results import Status, VerifyResult

from .wellformed import signature_parts

Verify = Callable[[str], Awaitable[VerifyResult]]

CLOSES = "first | trivial | decide | simp"
REFUTES = "simp_all"


def probes(candidate: str) -> list[tuple[str, str]]:
    """(reason, Lean declaration) pairs to try; empty when the signature cannot be parsed."""
    parts = signature_parts(candidate)
    if parts is None:
        return []
    head, binders, goal = parts
    out = [
        (f"`by {CLOSES}` proves it", f"{head} {binders} : {goal} := by {CLOSES}".replace("  ", " "))
    ]
    if binders:
        out.append(
            (
                f"its hypotheses are contradictory (`by {REFUTES}` proves False)",
                f"example {binders} : False := by {REFUTES}",
            )
        )
    return out


async def check_trivial(candidate: str, header: str, verify: Verify) -> str:
    """The reason the candidate looks trivial, or "" (not shown trivial)."""
    tries = probes(candidate)
    if not tries:
        return ""

    async def one(code: str) -> bool:
        try:
            result = await verify(f"{header.rstrip()}\n\n{code}\n")
        except asyncio.CancelledError:
            raise
        except Exception:
            return False
        if result.verifier is not None and result.verifier.kind == "stand-in":
            return False  # accepts any tactic proof: no evidence either way
        return result.status == Status.VALID

    verdicts = await asyncio.gather(*(one(code) for _, code in tries))
    return next((reason for (reason, _), ok in zip(tries, verdicts) if ok), "")
