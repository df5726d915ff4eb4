"""The ScoreFormalization door: protobuf in, formalize.reward's scores out.

Owns the request's resolution (weights with their defaults, gates, the compile
gate's options, checked once here) and the conversion of each
`formalize.reward.FormalizationScore` to its message. The scoring itself is
formalize/reward.py's, the one implementation every adapter reaches. The
VerifierServicer delegates its `ScoreFormalization` method here.
May import: formalize.reward, services (ports, resolve), errors, v1, edge.convert.
"""

from __future__ import annotations

import dataclasses

from ..errors import RequestError
from ..formalize import reward
from ..results import Status, VerifyResult
from ..services.ports import Verifier
from ..v1 import verifier_pb2 as pb
from . import convert

_GATES = {
    "": pb.FORMALIZATION_GATE_UNSPECIFIED,
    reward.WELL_FORMED: pb.FORMALIZATION_GATE_WELL_FORMED,
    reward.COMPILES: pb.FORMALIZATION_GATE_COMPILES,
    reward.TRIVIALITY: pb.FORMALIZATION_GATE_TRIVIALITY,
    reward.INFRASTRUCTURE: pb.FORMALIZATION_GATE_INFRASTRUCTURE,
}


def weights_from_pb(request: pb.ScoreFormalizationRequest) -> reward.Weights:
    given = request.weights
    defaults = reward.Weights()
    weights = reward.Weights(
        **{
            f.name: getattr(given, f.name) if given.HasField(f.name) else getattr(defaults, f.name)
            for f in dataclasses.fields(reward.Weights)
        }
    )
    problem = weights.problem()
    if problem:
        raise RequestError(problem, field="weights")
    return weights


def weights_to_pb(weights: reward.Weights) -> pb.FormalizationWeights:
    return pb.FormalizationWeights(**dataclasses.asdict(weights))


def score_to_pb(candidate_id: str, s: reward.FormalizationScore) -> pb.FormalizationScore:
    out = pb.FormalizationScore(
        id=candidate_id,
        failed_gate=_GATES[s.failed_gate],
        statement=s.statement,
        well_formed=s.well_formed,
        compiled=s.compiled,
        reason=s.reason,
        trivial_reason=s.trivial_reason,
        infra_error=s.infra_error,
    )
    if s.reward is not None:
        out.reward = s.reward
    if s.faithfulness is not None:
        out.faithfulness = s.faithfulness
    if s.verify is not None:
        out.compile_result.CopyFrom(convert.result_to_pb(s.verify))
    return out


async def score_formalization(
    verify: Verifier,
    request: pb.ScoreFormalizationRequest,
    *,
    client_id: str,
    stream_id: str,
    deadline: float | None,
) -> pb.ScoreFormalizationResponse:
    candidates = list(request.candidates)
    if not candidates:
        raise RequestError("no candidates: send at least one", field="candidates")
    limit = verify.config.server.max_snippets_per_batch
    if len(candidates) > limit:
        raise RequestError(
            f"{len(candidates)} candidates, over the limit of {limit}; split them",
            field="candidates",
        )
    for n, c in enumerate(candidates):
        if not c.reference.strip():
            raise RequestError(
                f"candidate {n} has no reference formalization: faithfulness needs one",
                field=f"candidates[{n}].reference",
            )
    weights = weights_from_pb(request)
    options = convert.options_from_pb(request.options if request.HasField("options") else None)
    # Bad options (an unknown profile, a negative timeout) are the caller's error, not a score.
    verify.resolver.resolve(
        "options", reward.DEFAULT_HEADER + "\n", options, client_id=client_id, deadline=deadline
    )
    verify.admission(len(candidates))

    async def compile_one(code: str) -> VerifyResult:
        try:
            return await verify.verify(
                "formalization",
                code,
                options,
                deadline=deadline,
                client_id=client_id,
                stream_id=stream_id,
            )
        except RequestError as exc:  # this statement's own fault (too large, refused header)
            return VerifyResult(id="formalization", status=Status.REJECTED, error=exc.message)

    scores = await reward.score_many(
        [(c.completion, c.reference, c.header) for c in candidates],
        compile_one,
        weights=weights,
        triviality=request.triviality if request.HasField("triviality") else True,
        timeout_is_failure=request.timeout_is_failure
        if request.HasField("timeout_is_failure")
        else True,
    )
    return pb.ScoreFormalizationResponse(
        scores=[score_to_pb(c.id or str(n), s) for n, (c, s) in enumerate(zip(candidates, scores))],
        weights=weights_to_pb(weights),
    )
