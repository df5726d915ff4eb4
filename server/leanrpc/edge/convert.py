"""Protobuf <-> internal types. The only module besides the servicers that
imports the generated stubs."""

from __future__ import annotations

import dataclasses
import json

from ..errors import RequestError
from ..repl.outcome import STANDARD_AXIOMS
from ..results import (
    JudgeCheck,
    Message,
    Position,
    ReferenceCheck,
    SorryInfo,
    TacticInfo,
    VerifierIdentity,
    VerifyResult,
    checks_of,
)
from ..services.verify import VerifyOptions
from ..v1 import verifier_pb2 as pb
from .errors import duration_of

_INFOTREE_NAMES = {
    pb.INFOTREE_MODE_UNSPECIFIED: None,
    pb.INFOTREE_MODE_ORIGINAL: "original",
    pb.INFOTREE_MODE_SUBSTANTIVE: "substantive",
    pb.INFOTREE_MODE_TACTICS: "tactics",
    pb.INFOTREE_MODE_FULL: "full",
}


def options_from_pb(
    options: pb.VerifyOptions | None, *, default_infotree: str | None = None
) -> VerifyOptions:
    if options is None:
        return VerifyOptions(infotree=default_infotree)
    if options.infotree not in _INFOTREE_NAMES:
        raise RequestError(f"unknown infotree mode {options.infotree}", field="options.infotree")
    infotree = _INFOTREE_NAMES[options.infotree] or default_infotree
    return VerifyOptions(
        timeout_s=_timeout_s(options),
        infotree=infotree,
        reuse=options.reuse if options.HasField("reuse") else True,
        check_axioms=options.check_axioms
        if options.HasField("check_axioms")
        else None,  # None: [axioms] check
        session=options.session,
        cache=options.cache if options.HasField("cache") else True,
        profile=options.profile,
        all_tactics=options.all_tactics,
        root_goals=options.root_goals,
        declarations=options.declarations,
    )


# google.protobuf.Duration's own bounds (duration.proto).
_MAX_DURATION_SECONDS = 315_576_000_000


def _timeout_s(options: pb.VerifyOptions) -> float:
    if not options.HasField("timeout"):
        return 0.0
    return seconds_of(options.timeout, "options.timeout")


def seconds_of(duration, field: str) -> float:
    """A request's google.protobuf.Duration in seconds; INVALID_ARGUMENT naming
    `field` when it is not a valid Duration (sign mismatch, out of range)."""
    seconds, nanos = duration.seconds, duration.nanos
    if (
        abs(seconds) > _MAX_DURATION_SECONDS
        or abs(nanos) > 999_999_999
        or (seconds and nanos and (seconds < 0) != (nanos < 0))
    ):
        raise RequestError(
            f"{field} is not a valid Duration (seconds={seconds}, nanos={nanos})", field=field
        )
    return seconds + nanos / 1e9


def position_to_pb(position: Position | None) -> pb.Position | None:
    if position is None:
        return None
    return pb.Position(line=max(0, position.line), column=max(0, position.column))


def message_to_pb(message: Message) -> pb.Message:
    out = pb.Message(
        severity=int(message.severity), text=message.text, start=position_to_pb(message.start)
    )
    if message.end is not None:
        out.end.CopyFrom(position_to_pb(message.end))
    return out


def sorry_to_pb(sorry: SorryInfo) -> pb.Sorry:
    out = pb.Sorry(goal=sorry.goal)
    if sorry.start is not None:
        out.start.CopyFrom(position_to_pb(sorry.start))
    if sorry.end is not None:
        out.end.CopyFrom(position_to_pb(sorry.end))
    return out


def tactic_to_pb(tactic: TacticInfo) -> pb.Tactic:
    out = pb.Tactic(text=tactic.text, goals=tactic.goals, used_constants=tactic.used_constants)
    if tactic.start is not None:
        out.start.CopyFrom(position_to_pb(tactic.start))
    if tactic.end is not None:
        out.end.CopyFrom(position_to_pb(tactic.end))
    return out


def identity_to_pb(identity: VerifierIdentity | None) -> pb.VerifierIdentity | None:
    if identity is None:
        return None
    return pb.VerifierIdentity(
        kind=identity.kind,
        lean_version=identity.lean_version,
        repl_revision=identity.repl_revision,
        project_revision=identity.project_revision,
        description=identity.description,
        warning=identity.warning,
    )


def result_to_pb(result: VerifyResult) -> pb.Result:
    """The wire Result. Built field by field in place (issue 38 item 6: one per
    snippet, on the event loop): no intermediate Duration, Timings, Reuse or
    Checks objects to copy in, and repeated fields passed only when not empty;
    the bytes are those of the keyword-built message (tests/edge/test_convert.py)."""
    out = pb.Result(id=result.id, status=int(result.status), error=result.error)
    if result.messages:
        out.messages.extend([message_to_pb(m) for m in result.messages])
    if result.sorries:
        out.sorries.extend([sorry_to_pb(s) for s in result.sorries])
    timings, wire = result.timings, out.timings
    _set_duration(wire.queue, timings.queue_s)
    _set_duration(wire.header, timings.header_s)
    _set_duration(wire.body, timings.body_s)
    _set_duration(wire.total, timings.total_s)
    _set_duration(wire.boot, timings.boot_s)
    reuse, wire = result.reuse, out.reuse
    wire.SetInParent()
    wire.warm_header = reuse.warm_header
    wire.reused_prefix_chars = reuse.reused_prefix_chars
    wire.worker = reuse.worker
    wire.attempts = reuse.attempts
    wire.cache_source = reuse.cache_source
    wire.original_run = reuse.original_run
    if result.infotree is not None:
        out.infotree_json = json.dumps(result.infotree, ensure_ascii=False)
    if result.axioms:
        out.axioms.extend(result.axioms)
    if result.tactics:
        out.tactics.extend([tactic_to_pb(t) for t in result.tactics])
    if result.root_goals:
        out.root_goals.extend([sorry_to_pb(s) for s in result.root_goals])
    if result.declarations is not None:
        out.declarations_json = json.dumps(result.declarations, ensure_ascii=False)
    identity = identity_to_pb(result.verifier)
    if identity is not None:
        out.verifier.CopyFrom(identity)
    if result.retry_after_s is not None:
        out.retry_after.CopyFrom(duration_of(result.retry_after_s))
    if result.reference is not None:
        out.reference.CopyFrom(reference_to_pb(result.reference))
    if result.judge is not None:
        out.judge.CopyFrom(judge_to_pb(result.judge))
    checks, wire = checks_of(result, STANDARD_AXIOMS), out.checks
    wire.SetInParent()
    wire.policy = checks.policy
    wire.axioms = int(checks.axioms)
    wire.statement = int(checks.statement)
    wire.judge = int(checks.judge)
    return out


def _set_duration(out, seconds: float) -> None:
    """`out` (a Duration field, marked present) = `seconds`, as Duration.FromNanoseconds sets it."""
    nanos = round(seconds * 1e9)
    whole, part = nanos // 1_000_000_000, nanos % 1_000_000_000
    if whole < 0 and part > 0:  # FromNanoseconds' normalisation: the signs agree
        whole, part = whole + 1, part - 1_000_000_000
    out.SetInParent()
    out.seconds = whole
    out.nanos = part


def snippet_options(snippet: pb.Snippet, options: VerifyOptions) -> VerifyOptions:
    """The batch's or stream's options with this snippet's own reference."""
    return (
        dataclasses.replace(options, reference=snippet.reference) if snippet.reference else options
    )


def reference_to_pb(check: ReferenceCheck) -> pb.ReferenceCheck:
    return pb.ReferenceCheck(
        passed=check.passed,
        reason=int(check.reason),
        declaration=check.declaration,
        detail=check.detail,
        declarations=check.declarations,
        cached_reference=check.cached_reference,
    )


def judge_to_pb(check: JudgeCheck) -> pb.JudgeCheck:
    return pb.JudgeCheck(
        level=int(check.level),
        judge=check.judge,
        detail=check.detail,
        elapsed=duration_of(check.elapsed_s),
    )


# The words of a REJECTED result whose snippet never ran; the retry hint
# travels in Result.retry_after (VerifyResult.retry_after_s), not in the text.
def overloaded_error_text(exc) -> str:
    """`RESOURCE_EXHAUSTED: <why>` for an OverloadedError refusing one stream snippet."""
    return f"RESOURCE_EXHAUSTED: {exc.message}"


def session_result_to_pb(ran, response_type):
    """services.sessions.SessionResult -> OpenSessionResponse or RunInSessionResponse."""
    out = response_type(
        session=ran.session,
        result=result_to_pb(ran.result),
        replayed_commands=ran.replayed_commands,
        profile=ran.profile,
    )
    if ran.env is not None:
        out.env = ran.env
    return out


SHUTTING_DOWN_TEXT = (
    "server shutting down: the snippet was accepted but not finished; it is safe to resend it"
)


# Room kept for the fields fit_result leaves and for the note it adds.
_FIT_RESERVE = 4096


def fit_result(out: pb.Result, limit: int) -> pb.Result:
    """Bounds one serialized result to `limit` bytes, in place.

    The verdict (status) stays: it was decided on the whole REPL reply. The
    infotree (and the command options' tactics, root goals and declarations)
    is dropped, messages and sorries are kept in order while they
    fit (the first one that does not fit is cut), the rest dropped, and
    `error` says how large the result was, the limit, and what was kept.
    """
    size = out.ByteSize()
    if size <= limit:
        return out
    budget = max(limit - _FIT_RESERVE, 256)
    had_infotree = bool(out.infotree_json)
    out.infotree_json = ""
    # The command options' answers go with the infotree: extras, not the verdict.
    extras = [name for name in ("tactics", "root_goals") if len(getattr(out, name))]
    extras += ["declarations"] if out.declarations_json else []
    del out.tactics[:]
    del out.root_goals[:]
    out.declarations_json = ""
    messages, sorries = list(out.messages), list(out.sorries)
    del out.messages[:]
    del out.sorries[:]
    used = out.ByteSize()
    kept_messages = kept_sorries = 0
    for items, field, text_attr in (
        (messages, out.messages, "text"),
        (sorries, out.sorries, "goal"),
    ):
        for item in items:
            cost = item.ByteSize() + 8
            if used + cost > budget:
                room = budget - used - 64
                if room > 64:
                    cut = (
                        getattr(item, text_attr)
                        .encode("utf-8")[:room]
                        .decode("utf-8", errors="ignore")
                    )
                    setattr(item, text_attr, cut + " … [cut: result too large]")
                    field.append(item)
                    used = out.ByteSize()
                    if items is messages:
                        kept_messages += 1
                    else:
                        kept_sorries += 1
                break
            field.append(item)
            used += cost
            if items is messages:
                kept_messages += 1
            else:
                kept_sorries += 1
        if used + 64 > budget:
            break
    note = (
        f"RESOURCE_EXHAUSTED: result of {size} bytes is over the limit of {limit} bytes; "
        f"kept {kept_messages} of {len(messages)} messages and {kept_sorries} of {len(sorries)} sorries"
        + (", dropped the infotree" if had_infotree else "")
        + "".join(f", dropped the {name.replace('_', ' ')}" for name in extras)
    )
    out.error = note if not out.error else f"{note}; {out.error[:1000]}"
    return out


def fit_batch(results: list[pb.Result], limit: int) -> list[pb.Result]:
    """Bounds a unary response: results over a fair share of `limit` are cut to it."""
    sizes = [r.ByteSize() for r in results]
    if sum(sizes) + 16 * len(results) <= limit:
        return results
    share = max((limit - _FIT_RESERVE) // len(results) - 16, 1024)
    return [fit_result(r, share) if size > share else r for r, size in zip(results, sizes)]
