"""The one reward core: (completion, problem) pairs in, a reward and its details out.

Owns `RewardCore` (its settings, and `score` / `score_sync` for proofs,
`score_formalizations` / its twin for the composite gated reward), `Detail` (what
each reward reports) and the verdict table. Every adapter (trl, verl, openrlhf,
verifiers, the gateway's POST /reward) calls it; none maps a verdict itself.
May import: the client (AsyncClient, ClientError), .extraction, .problem, .connection.

One call per batch: the completions' code is extracted, assembled with the
problem's statement, and identical programs are sent once, in one Verify call.
Each verdict becomes a reward by `VERDICTS`; an infrastructure failure is None
(never 0): the server unreachable or overloaded after the client's retries, the
adapter's own deadline, a CRASH after the pool's retries, a snippet refused unrun.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
from typing import Any, Sequence

from .._types import ClientError, Result
from .connection import async_client, sync_runner
from .extraction import EXTRACTION_VERSION, FENCE_LAST, NO_CODE, extract
from .problem import Problem

# Verdict -> reward; "limit" follows `timeout_is_failure`, "infra" is None.
VERDICTS = {
    "VALID": 1.0,
    "INVALID": 0.0,
    "SORRY": 0.0,
    "REJECTED": 0.0,  # refused by the code policy or the axiom check (unrun refusals: infra)
    "TIMEOUT": "limit",
    "OUT_OF_MEMORY": "limit",
    "CRASH": "infra",
    "CANCELLED": "infra",
}
# The adapter's own deadline, below the trainers' (OpenRLHF waits 180 s).
DEFAULT_DEADLINE_S = 150.0
# Client errors that are the request's fault, not the infrastructure's.
_REQUEST_CODES = {"INVALID_ARGUMENT", "PERMISSION_DENIED", "UNAUTHENTICATED", "NOT_FOUND"}


@dataclasses.dataclass
class Detail:
    """One sample's reward and why; `as_log()` is what adapters log as extras."""

    reward: float | None
    status: str  # the Verify status, NO_CODE, or INFRA
    reason: str = ""
    extraction_rule: str = ""
    extraction_version: str = EXTRACTION_VERSION
    shape: str = ""  # "file" or "proof"
    pinned: bool = False
    checks: dict = dataclasses.field(default_factory=dict)
    axioms: list = dataclasses.field(default_factory=list)
    time_s: float = 0.0  # the server's total for this program
    cache_source: str = ""
    infra_error: str = ""
    verifier: str = ""
    duplicate: bool = False  # the same program as an earlier sample of the call
    extra: dict = dataclasses.field(default_factory=dict)  # kind-specific (formalization gates)

    def as_log(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.update(out.pop("extra"))
        return out


@dataclasses.dataclass(frozen=True)
class Settings:
    server: str = ""  # "" = $LEANRPC_SERVER, else 127.0.0.1:50051
    token: str | None = None  # None = $LEANRPC_TOKEN
    fence: str = FENCE_LAST
    check_axioms: bool = True
    pin_statement: bool = True
    timeout_is_failure: bool = True
    timeout_s: float = 0.0  # per program, in Lean; 0 = the server's default
    deadline_s: float = DEFAULT_DEADLINE_S
    header: str = ""  # used when a problem has none
    max_retries: int = 3

    def address(self) -> str:
        return self.server or os.environ.get("LEANRPC_SERVER", "") or "127.0.0.1:50051"

    def bearer(self) -> str | None:
        return self.token if self.token is not None else os.environ.get("LEANRPC_TOKEN") or None


def _reward_of(result: Result, settings: Settings, pinned: bool) -> Detail:
    verdict = VERDICTS.get(result.status, "infra")
    infra = ""
    if result.status == "REJECTED" and result.retry_after_s is not None:
        verdict, infra = "infra", f"refused unrun: {result.error}"
    elif verdict == "infra":
        infra = f"{result.status}: {result.error}"
    elif verdict == "limit":
        if settings.timeout_is_failure:
            verdict = 0.0
        else:
            verdict, infra = "infra", f"{result.status} (timeout_is_failure=False)"
    checks = dataclasses.asdict(result.checks) if result.checks is not None else {}
    reason = result.error
    if verdict == 1.0:  # fail closed: VALID counts only with the asked checks passed
        missing = [
            name
            for name, asked in (("axioms", settings.check_axioms), ("statement", pinned))
            if asked and checks.get(name) != "PASSED"
        ]
        if missing:
            verdict, reason = 0.0, f"VALID without the {' and '.join(missing)} check passed"
    return Detail(
        reward=None if verdict == "infra" else float(verdict),
        status="INFRA" if verdict == "infra" else result.status,
        reason=reason,
        checks=checks,
        axioms=list(result.axioms),
        time_s=result.time_total_s,
        cache_source=result.cache_source,
        infra_error=infra,
        verifier=result.verifier,
    )


class InfraFailure(RuntimeError):
    """No reward: the verifier failed, not the completion (`details` per sample).
    Raised by the adapters whose trainer cannot take a None (OpenRLHF, verifiers v1)."""

    def __init__(self, why: str, details: list) -> None:
        super().__init__(f"leanrpc: infrastructure failure, no reward: {why}")
        self.details = details


def infra_details(n: int, why: str) -> list[Detail]:
    return [Detail(reward=None, status="INFRA", reason=why, infra_error=why) for _ in range(n)]


@dataclasses.dataclass
class Plan:
    details: list[Detail | None]  # None: waits for its program's result
    programs: list[tuple[str, str]]  # distinct (code, reference)
    slot: list[int]  # sample -> index into programs (-1: answered already)


class RewardCore:
    """Settings plus the scoring; one per adapter instance, cheap to build."""

    def __init__(self, **settings) -> None:
        self.settings = Settings(**settings)

    def plan(self, completions: Sequence[str], problems: Sequence[Problem | None]) -> Plan:
        """Extraction, assembly and deduplication: what to verify, and the answers
        already known (NO_CODE). A door with its own way to verify (the gateway's
        POST /reward) runs `plan.programs` and hands the results to `finish`."""
        if isinstance(completions, str):
            raise TypeError("completions is one str; pass a list with one completion per sample")
        if len(completions) != len(problems):
            raise ValueError(f"{len(completions)} completions but {len(problems)} problems")
        plan = Plan([], [], [])
        index: dict[tuple[str, str], int] = {}
        for completion, problem in zip(completions, problems):
            found = extract(completion, fence=self.settings.fence)
            if found.rule == NO_CODE:
                plan.details.append(Detail(0.0, NO_CODE, "no Lean code in the completion", NO_CODE))
                plan.slot.append(-1)
                continue
            if problem is None or not problem.statement.strip():
                if self.settings.pin_statement:
                    raise ValueError(
                        "no formal statement for a sample: pass the dataset's statement, or "
                        "pin_statement=False to verify completions unpinned (a weaker check)"
                    )
                code, shape, reference = found.code, "file", ""
            else:
                if not problem.header and self.settings.header:
                    problem = Problem(problem.statement, self.settings.header)
                code, shape = problem.program(found.code)
                reference = problem.reference if self.settings.pin_statement else ""
            key = (code, reference)
            plan.details.append(None)
            plan.slot.append(index.setdefault(key, len(index)))
            if plan.slot[-1] == len(plan.programs):
                plan.programs.append(key)
            plan.details[-1] = Detail(None, "", extraction_rule=found.rule, shape=shape)
            plan.details[-1].pinned = bool(reference)
        return plan

    def finish(self, plan: Plan, results: Sequence[Result] | None, why: str) -> list[Detail]:
        """One Detail per sample: `results` answer `plan.programs` in order; None
        means the call failed for the infrastructure's reason `why`."""
        out: list[Detail] = []
        seen: set[int] = set()
        for detail, slot in zip(plan.details, plan.slot):
            if slot < 0:
                out.append(detail)
                continue
            if results is None:
                got = infra_details(1, why)[0]
            else:
                got = _reward_of(results[slot], self.settings, detail.pinned)
            got.extraction_rule, got.shape, got.pinned = (
                detail.extraction_rule,
                detail.shape,
                detail.pinned,
            )
            got.duplicate = slot in seen
            seen.add(slot)
            out.append(got)
        return out

    async def _verify(self, programs: list[tuple[str, str]]) -> tuple[list[Result] | None, str]:
        if not programs:
            return [], ""
        s = self.settings
        client = async_client(s.address(), s.bearer(), s.max_retries)
        call = client.verify_batch(
            [code for code, _ in programs],
            references=[ref for _, ref in programs],
            check_axioms=s.check_axioms,
            timeout_s=s.timeout_s,
            deadline_s=s.deadline_s,
        )
        try:
            return await asyncio.wait_for(call, s.deadline_s), ""
        except asyncio.TimeoutError:
            return None, f"the reward's deadline ({s.deadline_s:g} s) passed"
        except ClientError as exc:
            if exc.code.name in _REQUEST_CODES:
                raise
            return None, f"{exc.code.name}: {exc.details}"

    async def score(
        self, completions: Sequence[str], problems: Sequence[Problem | None]
    ) -> list[Detail]:
        """One Detail per completion, in order (async; one Verify call)."""
        plan = self.plan(completions, problems)
        results, why = await self._verify(plan.programs)
        return self.finish(plan, results, why)

    def score_sync(
        self, completions: Sequence[str], problems: Sequence[Problem | None]
    ) -> list[Detail]:
        """`score` for callers without an event loop (or inside one: it runs on the
        process's own client thread)."""
        return sync_runner().run(self.score(completions, problems))


def rewards_of(details: Sequence[Detail]) -> list[float | None]:
    return [d.reward for d in details]


def nan_if_none(value: float | None) -> float:
    return math.nan if value is None else value
