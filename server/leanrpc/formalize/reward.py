"""The composite gated reward of autoformalization: one completion, one reference, one score.

Owns `Weights`, `FormalizationScore` and `score(completion, reference, header, verify)`,
the one implementation behind the `ScoreFormalization` RPC (edge/rewards.py), the
client's `LeanReward(kind="formalization")` and the Formalize GRPO recipe (docs/REWARDS.md).
Imports wellformed.py, triviality.py, metrics.py and leanrpc.results only.

The gates run in the order the design names them; each one that fails ends the score
with the credit of the gates passed before it:

1. well-formedness (`wellformed.check` on the candidate `extract_candidate` takes out
   of the completion): fails -> 0;
2. compilation of the statement with `sorry` through Verify (SORRY or VALID):
   fails -> w_well_formed;
3. the triviality gate (`triviality.check_trivial`): a statement that closes by
   `trivial/decide/simp`, or whose hypotheses refute themselves, keeps the first two
   credits and gets no faithfulness credit -> w_well_formed + w_compiles;
4. faithfulness against the reference: `metrics.faithfulness`, the difflib sequence
   ratio of the canonical forms (comments, the theorem name, the proof and hypothesis
   names removed), the definition the evaluation harness uses ->
   w_well_formed + w_compiles + w_faithfulness * ratio.

An infrastructure failure in the compile gate (CRASH after the pool's retries, a
CANCELLED or refused-unrun snippet, the verify call raising) is no score at all:
`reward` is None and `infra_error` says why, never a silent 0. A TIMEOUT or
OUT_OF_MEMORY statement is a failed compile by default (`timeout_is_failure`).

From TRL (GRPOTrainer), through the client's adapter, one RPC per step:

    from leanrpc.rewards import LeanReward
    reward = LeanReward(server="host:50051", kind="formalization",
                        reference_column="formal_statement",  # the dataset's reference
                        weights={"well_formed": 0.1, "compiles": 0.2, "faithfulness": 0.7})
    GRPOTrainer(model=…, reward_funcs=[reward], train_dataset=…)  # None = infra failure

`AsyncLeanReward` is the async twin; `FormalizationReward(server=…).score(…)` returns
the per-gate details (`Detail.extra`) for a recipe that logs them itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from typing import Awaitable, Callable

from leanrpc.results import Status, VerifyResult

from .metrics import faithfulness
from .triviality import check_trivial
from .wellformed import check, extract_candidate

Verify = Callable[[str], Awaitable[VerifyResult]]

DEFAULT_HEADER = "import Mathlib"
# Gate names, in order; `failed_gate` is one of them or "" (every gate passed).
WELL_FORMED, COMPILES, TRIVIALITY, INFRASTRUCTURE = (
    "well_formed",
    "compiles",
    "triviality",
    "infrastructure",
)
_COMPILED = (Status.SORRY, Status.VALID)
_LIMITS = (Status.TIMEOUT, Status.OUT_OF_MEMORY)


@dataclasses.dataclass(frozen=True)
class Weights:
    """Credit per gate; the reward is at most their sum (1.0 with the defaults).

    Defaults: the design names the three terms and their order (well-formedness,
    compilation, faithfulness) and gives no numbers; these put most of the reward on
    faithfulness, the term only a correct statement earns, so that a policy cannot
    farm the cheap gates (docs/REWARDS.md, "Composite gated reward").
    """

    well_formed: float = 0.1
    compiles: float = 0.2
    faithfulness: float = 0.7

    def problem(self) -> str:
        """'' when usable, else what is wrong (each weight finite and >= 0, not all 0)."""
        values = dataclasses.asdict(self)
        for name, value in values.items():
            if not math.isfinite(value) or value < 0:
                return f"weight {name} must be a finite number >= 0, not {value!r}"
        if not any(values.values()):
            return "at least one weight must be above 0"
        return ""


@dataclasses.dataclass
class FormalizationScore:
    reward: float | None  # None: an infrastructure failure (see infra_error)
    failed_gate: str = ""  # "" when every gate passed
    statement: str = ""  # the candidate taken out of the completion
    well_formed: bool = False
    reason: str = ""  # why the failed gate failed
    compiled: bool = False
    verify: VerifyResult | None = None  # the compile gate's result
    trivial_reason: str = ""
    faithfulness: float | None = None  # only computed past the triviality gate
    infra_error: str = ""


def _infra_error(result: VerifyResult) -> str:
    """Why this compile result is the infrastructure's, or ''."""
    if result.status == Status.CRASH:
        return f"the REPL crashed on every retry: {result.error or 'no detail'}"
    if result.status == Status.CANCELLED:
        return "the verify was cancelled"
    if result.status == Status.REJECTED and result.retry_after_s is not None:
        return f"refused unrun (overload or shutdown): {result.error or 'no detail'}"
    return ""


async def score(
    completion: str,
    reference: str,
    verify: Verify,
    *,
    header: str = "",
    weights: Weights = Weights(),
    triviality: bool = True,
    timeout_is_failure: bool = True,
) -> FormalizationScore:
    """The composite gated reward of one completion against its reference formalization."""
    statement = extract_candidate(completion)
    wf = check(statement)
    out = FormalizationScore(reward=0.0, statement=statement, well_formed=wf.ok)
    if not wf.ok:
        out.failed_gate, out.reason = WELL_FORMED, wf.reason
        return out
    credit = weights.well_formed
    head = (header or DEFAULT_HEADER).rstrip()
    try:
        result = await verify(f"{head}\n\n{statement}\n")
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the door's errors (overload, not serving) are not a verdict
        return _infra(out, f"verify failed: {type(exc).__name__}: {exc}")
    out.verify = result
    why = _infra_error(result)
    if why or (result.status in _LIMITS and not timeout_is_failure):
        return _infra(out, why or f"the statement hit a resource limit ({result.status.name})")
    if result.status not in _COMPILED:
        out.reward, out.failed_gate = credit, COMPILES
        out.reason = result.error or _first_error(result) or result.status.name
        return out
    out.compiled = True
    credit += weights.compiles
    if triviality:
        out.trivial_reason = await check_trivial(statement, head, verify)
        if out.trivial_reason:
            out.reward, out.failed_gate, out.reason = credit, TRIVIALITY, out.trivial_reason
            return out
    out.faithfulness = faithfulness(statement, extract_candidate(reference))
    out.reward = credit + weights.faithfulness * out.faithfulness
    return out


def _infra(out: FormalizationScore, why: str) -> FormalizationScore:
    out.reward, out.failed_gate, out.infra_error, out.reason = None, INFRASTRUCTURE, why, why
    return out


def _first_error(result: VerifyResult) -> str:
    for message in result.messages:
        if message.severity.name == "ERROR":
            return message.text
    return ""


async def score_many(
    items: list[tuple[str, str, str]],
    verify: Verify,
    **options,
) -> list[FormalizationScore]:
    """Scores (completion, reference, header) triples; completions whose extracted
    statements are identical (with the same reference and header) are scored once."""
    keys = [(extract_candidate(c), r, h) for c, r, h in items]
    distinct: dict[tuple[str, str, str], int] = {}
    for key in keys:
        distinct.setdefault(key, len(distinct))
    scored = await asyncio.gather(
        *(score(s, r, verify, header=h, **options) for s, r, h in distinct)
    )
    return [scored[distinct[key]] for key in keys]
