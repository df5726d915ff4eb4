"""The composite gated reward of autoformalization, as the adapters call it.

Owns `FormalizationReward`: (completion, reference formalization, header) triples in,
one `Detail` each out, through the server's `ScoreFormalization` RPC, the one
implementation (server: leanrpc.formalize.reward; gates well-formedness, compile
with `sorry`, triviality, then faithfulness; docs/REWARDS.md). The client only sends
the batch and maps the answer: an unset reward or a failed call is None, never 0.
May import: the client, .core (Detail, Settings), .connection.
"""

from __future__ import annotations

import asyncio
from typing import Sequence

from .._convert import result_from_pb
from .._types import ClientError
from .connection import async_client, sync_runner
from .core import _REQUEST_CODES, Detail, Settings, infra_details

_GATE_NAMES = {
    0: "",
    1: "well_formed",
    2: "compiles",
    3: "triviality",
    4: "infrastructure",
}


def _detail_of(score) -> Detail:
    compiled = result_from_pb(score.compile_result) if score.HasField("compile_result") else None
    gate = _GATE_NAMES.get(score.failed_gate, str(score.failed_gate))
    reward = score.reward if score.HasField("reward") else None
    return Detail(
        reward=reward,
        status="INFRA" if reward is None else ("PASSED" if not gate else f"FAILED_{gate.upper()}"),
        reason=score.reason,
        # The server takes the statement out (formalize.wellformed.extract_candidate).
        extraction_rule="server:extract_candidate",
        extraction_version="",
        checks={} if compiled is None or compiled.checks is None else vars(compiled.checks).copy(),
        axioms=[] if compiled is None else list(compiled.axioms),
        time_s=0.0 if compiled is None else compiled.time_total_s,
        cache_source="" if compiled is None else compiled.cache_source,
        infra_error=score.infra_error,
        verifier="" if compiled is None else compiled.verifier,
        extra={
            "failed_gate": gate,
            "statement": score.statement,
            "well_formed": score.well_formed,
            "compiled": score.compiled,
            "trivial_reason": score.trivial_reason,
            "faithfulness": score.faithfulness if score.HasField("faithfulness") else None,
        },
    )


class FormalizationReward:
    """`weights`: {"well_formed", "compiles", "faithfulness"} credits (unset: the
    server's defaults, 0.1 / 0.2 / 0.7); `triviality=False` turns that gate off."""

    def __init__(
        self, *, weights: dict | None = None, triviality: bool | None = None, **settings
    ) -> None:
        self.settings = Settings(**settings)
        self.weights = dict(weights or {})
        self.triviality = triviality

    async def score(
        self,
        completions: Sequence[str],
        references: Sequence[str],
        headers: Sequence[str] | None = None,
    ) -> list[Detail]:
        if isinstance(completions, str):
            raise TypeError("completions is one str; pass a list with one completion per sample")
        if len(completions) != len(references):
            raise ValueError(f"{len(completions)} completions but {len(references)} references")
        s = self.settings
        headers = list(headers) if headers is not None else [s.header] * len(completions)
        candidates = [
            {"id": str(n), "completion": c, "reference": r, "header": h or s.header}
            for n, (c, r, h) in enumerate(zip(completions, references, headers))
        ]
        if not candidates:
            return []
        client = async_client(s.address(), s.bearer(), s.max_retries)
        call = client.score_formalization(
            candidates,
            weights=self.weights,
            triviality=self.triviality,
            timeout_is_failure=s.timeout_is_failure,
            timeout_s=s.timeout_s,
            deadline_s=s.deadline_s,
        )
        try:
            response = await asyncio.wait_for(call, s.deadline_s)
        except asyncio.TimeoutError:
            return infra_details(
                len(candidates), f"the reward's deadline ({s.deadline_s:g} s) passed"
            )
        except ClientError as exc:
            if exc.code.name in _REQUEST_CODES:
                raise
            return infra_details(len(candidates), f"{exc.code.name}: {exc.details}")
        return [_detail_of(score) for score in response.scores]

    def score_sync(self, completions, references, headers=None) -> list[Detail]:
        return sync_runner().run(self.score(completions, references, headers))
