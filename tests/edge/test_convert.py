"""The wire Result built in place (issue 38 item 6) says exactly what the
keyword-built message said: same bytes, field presence included, for results
of every shape (durations of every sign and size, empty and full lists,
optional parts set or not)."""

from __future__ import annotations

import json
import random

from leanrpc.edge import convert
from leanrpc.edge.errors import duration_of
from leanrpc.repl.outcome import STANDARD_AXIOMS
from leanrpc.results import (
    JudgeCheck,
    JudgeLevel,
    Message,
    Position,
    ReferenceCheck,
    ReferenceReason,
    ReuseInfo,
    Severity,
    SorryInfo,
    Status,
    TacticInfo,
    Timings,
    VerifierIdentity,
    VerifyResult,
    checks_of,
)
from leanrpc.v1 import verifier_pb2 as pb


def keyword_built(result: VerifyResult) -> pb.Result:
    """The message as the door built it before: every part by keyword."""
    out = pb.Result(
        id=result.id,
        status=int(result.status),
        messages=[convert.message_to_pb(m) for m in result.messages],
        sorries=[convert.sorry_to_pb(s) for s in result.sorries],
        timings=pb.Timings(
            queue=duration_of(result.timings.queue_s),
            header=duration_of(result.timings.header_s),
            body=duration_of(result.timings.body_s),
            total=duration_of(result.timings.total_s),
            boot=duration_of(result.timings.boot_s),
        ),
        reuse=pb.Reuse(
            warm_header=result.reuse.warm_header,
            reused_prefix_chars=result.reuse.reused_prefix_chars,
            worker=result.reuse.worker,
            attempts=result.reuse.attempts,
            cache_source=result.reuse.cache_source,
            original_run=result.reuse.original_run,
        ),
        error=result.error,
        infotree_json=""
        if result.infotree is None
        else json.dumps(result.infotree, ensure_ascii=False),
        axioms=result.axioms,
        tactics=[convert.tactic_to_pb(t) for t in result.tactics],
        root_goals=[convert.sorry_to_pb(s) for s in result.root_goals],
        declarations_json=""
        if result.declarations is None
        else json.dumps(result.declarations, ensure_ascii=False),
    )
    if result.verifier is not None:
        out.verifier.CopyFrom(convert.identity_to_pb(result.verifier))
    if result.retry_after_s is not None:
        out.retry_after.CopyFrom(duration_of(result.retry_after_s))
    if result.reference is not None:
        out.reference.CopyFrom(convert.reference_to_pb(result.reference))
    if result.judge is not None:
        out.judge.CopyFrom(convert.judge_to_pb(result.judge))
    checks = checks_of(result, STANDARD_AXIOMS)
    out.checks.CopyFrom(
        pb.Checks(
            policy=checks.policy,
            axioms=int(checks.axioms),
            statement=int(checks.statement),
            judge=int(checks.judge),
        )
    )
    return out


def _seconds(rng: random.Random) -> float:
    return rng.choice(
        [0.0, 1e-9, 0.4e-9, 0.0123, 1.5, 59.999999999, 3600.25, -0.5, -2.000000001, 1e6 / 3]
    )


def _position(rng: random.Random) -> Position | None:
    return rng.choice([None, Position(1, 0), Position(12, 7), Position(-1, -3)])


def _result(rng: random.Random, n: int) -> VerifyResult:
    result = VerifyResult(id=rng.choice(["", str(n), "snippet-é"]), status=rng.choice(list(Status)))
    result.timings = Timings(*(_seconds(rng) for _ in range(5)))
    result.reuse = ReuseInfo(
        warm_header=rng.random() < 0.5,
        reused_prefix_chars=rng.choice([0, 17, 4000]),
        worker=rng.choice(["", "w1"]),
        attempts=rng.choice([0, 1, 3]),
        cache_source=rng.choice(["", "memory", "redis"]),
        original_run=rng.choice(["", "run-1"]),
    )
    result.error = rng.choice(["", "timeout after 5 s", "ü\nline"])
    if rng.random() < 0.5:
        result.messages = [
            Message(rng.choice(list(Severity)), Position(3, 2), _position(rng), "unsolved goals")
            for _ in range(rng.randint(1, 3))
        ]
    if rng.random() < 0.4:
        result.sorries = [SorryInfo(_position(rng), _position(rng), "⊢ 1 = 1")]
    if rng.random() < 0.3:
        result.infotree = [{"node": "x", "children": [], "text": "é"}]
    result.axioms = rng.choice([[], ["propext"], ["propext", "Classical.choice", "sorryAx"]])
    result.axioms_checked = rng.random() < 0.7
    result.policy = rng.choice(["", "proof", "trusted"])
    if rng.random() < 0.3:
        result.tactics = [TacticInfo("simp", _position(rng), _position(rng), "⊢ True", ["True"])]
    if rng.random() < 0.3:
        result.root_goals = [SorryInfo(Position(1, 0), Position(1, 0), "⊢ p")]
    result.declarations = rng.choice([None, [], [{"name": "t", "kind": "theorem"}]])
    if rng.random() < 0.5:
        result.verifier = VerifierIdentity("stand-in", "4.15.0", description="stand-in")
    result.retry_after_s = rng.choice([None, 0.0, 2.5])
    if rng.random() < 0.3:
        result.reference = ReferenceCheck(
            passed=rng.random() < 0.5,
            reason=rng.choice(list(ReferenceReason)),
            declaration="t",
            declarations=["t", "u"],
        )
    if rng.random() < 0.3:
        result.judge = JudgeCheck(rng.choice(list(JudgeLevel)), "j", "ok", _seconds(rng))
    return result


def test_the_in_place_result_has_the_keyword_built_bytes():
    rng = random.Random(38)
    for n in range(2000):
        result = _result(rng, n)
        built, expected = convert.result_to_pb(result), keyword_built(result)
        assert built == expected, (n, result)
        assert built.SerializeToString(deterministic=True) == expected.SerializeToString(
            deterministic=True
        ), (n, result)
        for field in ("timings", "reuse", "checks", "retry_after", "verifier", "reference"):
            assert built.HasField(field) == expected.HasField(field), (n, field)
        for field in ("queue", "header", "body", "total", "boot"):
            assert built.timings.HasField(field), (n, field)


def test_a_default_result_still_carries_its_timings_reuse_and_checks():
    built = convert.result_to_pb(VerifyResult(id="", status=Status.VALID))
    assert (
        built.SerializeToString()
        == keyword_built(VerifyResult(id="", status=Status.VALID)).SerializeToString()
    )
    assert built.HasField("timings") and built.HasField("reuse") and built.HasField("checks")
    assert built.timings.HasField("boot") and built.reuse.attempts == 1
