"""TRL's shape: `LeanReward(server=…)` for `GRPOTrainer(reward_funcs=[…])`.

Owns the TRL adapter: TRL 1.16 calls each reward function once per step with the
whole batch, `f(prompts, completions, completion_ids, **dataset_columns,
trainer_state, log_extra, log_metric)`, wants one float or None per completion
(None becomes NaN: "no reward from this function"), logs `__name__`, and awaits
async callables together (`AsyncLeanReward`). Reads the statement from the
`formal_statement` column and its header from `header` (both configurable).
May import: .core, .problem, .formalization.

    from trl import GRPOTrainer
    from leanrpc.rewards import LeanReward
    trainer = GRPOTrainer(model=…, reward_funcs=[LeanReward(server="host:50051")], …)
    # autoformalization: the composite gated reward against the reference column
    LeanReward(server="host:50051", kind="formalization", reference_column="formal_statement")
"""

from __future__ import annotations

from typing import Any, Sequence

from .core import Detail, RewardCore
from .formalization import FormalizationReward
from .problem import Problem

KINDS = ("proof", "formalization")
# The per-sample details TRL shows in its completions table (log_extra).
LOGGED = ("status", "reason", "extraction_rule", "checks", "axioms", "time_s", "cache_source")


def completion_text(completion: Any) -> str:
    """TRL's completion: a str, or (conversational) a list of {"role", "content"} messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and all(isinstance(m, dict) for m in completion):
        return "\n".join(str(m.get("content", "")) for m in completion if m.get("role") != "user")
    raise TypeError(f"a completion is a str or a list of messages, not {type(completion).__name__}")


class LeanReward:
    """A TRL reward function over a leanrpc server (sync; `AsyncLeanReward` for async).

    `kind="proof"` (default): 1.0 for a proof the server verifies with its default
    checks (code policy, axioms, the statement pinned to `statement_column`), 0.0 for
    a failed one or no code, None for an infrastructure failure. `kind="formalization"`:
    the composite gated reward of each completion against `reference_column`.
    Other keywords: `token`, `fence`, `deadline_s`, `timeout_s`, `timeout_is_failure`,
    `header`, `check_axioms` / `pin_statement` (False is a weaker, explicit level),
    and for formalization `weights`, `triviality`.
    """

    def __init__(
        self,
        server: str = "",
        *,
        kind: str = "proof",
        statement_column: str = "formal_statement",
        header_column: str = "header",
        reference_column: str = "formal_statement",
        name: str | None = None,
        weights: dict | None = None,
        triviality: bool | None = None,
        **settings,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        self.kind = kind
        self.statement_column = statement_column
        self.header_column = header_column
        self.reference_column = reference_column
        self.__name__ = name or f"lean_{kind}"
        if kind == "proof":
            self._core: Any = RewardCore(server=server, **settings)
        else:
            self._core = FormalizationReward(
                server=server, weights=weights, triviality=triviality, **settings
            )
        self.last_details: list[Detail] = []

    def _inputs(self, completions: Sequence, columns: dict) -> tuple[list[str], tuple]:
        if isinstance(completions, str):
            raise TypeError("completions is one str; TRL passes a list, one per sample")
        texts = [completion_text(c) for c in completions]
        headers = columns.get(self.header_column) or [""] * len(texts)
        if self.kind == "formalization":
            if self.reference_column not in columns:
                raise ValueError(
                    f"no {self.reference_column!r} column: the reference to score against"
                )
            return texts, (list(columns[self.reference_column]), list(headers))
        statements = columns.get(self.statement_column)
        if statements is None:
            statements = [None] * len(texts)  # RewardCore refuses unless pin_statement=False
        problems = [None if s is None else Problem(s, h or "") for s, h in zip(statements, headers)]
        return texts, (problems,)

    def _report(self, details: list[Detail], columns: dict) -> list[float | None]:
        self.last_details = details
        log_extra, log_metric = columns.get("log_extra"), columns.get("log_metric")
        if log_extra is not None:
            logs = [d.as_log() for d in details]
            for key in LOGGED:
                log_extra(f"{self.__name__}/{key}", [str(log[key]) for log in logs])
        if log_metric is not None and details:
            infra = sum(d.reward is None for d in details)
            log_metric(f"{self.__name__}/infra_failures", infra / len(details))
            log_metric(
                f"{self.__name__}/duplicates", sum(d.duplicate for d in details) / len(details)
            )
        return [d.reward for d in details]

    def __call__(self, prompts=None, completions=(), completion_ids=None, **columns):
        texts, rest = self._inputs(completions, columns)
        return self._report(self._core.score_sync(texts, *rest), columns)


class AsyncLeanReward(LeanReward):
    """The same reward as a coroutine: TRL awaits async reward functions together."""

    async def __call__(self, prompts=None, completions=(), completion_ids=None, **columns):
        texts, rest = self._inputs(completions, columns)
        return self._report(await self._core.score(texts, *rest), columns)
