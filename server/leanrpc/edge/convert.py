"""Protobuf <-> internal types. The only module besides the servicers that
imports the generated stubs."""

from __future__ import annotations

import json

from ..errors import RequestError
from ..results import Message, Position, SorryInfo, VerifierIdentity, VerifyResult
from ..services.verify import VerifyOptions
from ..v1 import verifier_pb2 as pb

_INFOTREE_NAMES = {
    pb.INFOTREE_MODE_UNSPECIFIED: None,
    pb.INFOTREE_MODE_ORIGINAL: "original",
    pb.INFOTREE_MODE_SUBSTANTIVE: "substantive",
    pb.INFOTREE_MODE_TACTICS: "tactics",
    pb.INFOTREE_MODE_FULL: "full",
}


def options_from_pb(options: pb.VerifyOptions | None, *, default_infotree: str | None = None) -> VerifyOptions:
    if options is None:
        return VerifyOptions(infotree=default_infotree)
    if options.infotree not in _INFOTREE_NAMES:
        raise RequestError(f"unknown infotree mode {options.infotree}")
    infotree = _INFOTREE_NAMES[options.infotree] or default_infotree
    return VerifyOptions(
        timeout_s=options.timeout_s,
        infotree=infotree,
        reuse=options.reuse if options.HasField("reuse") else True,
        check_axioms=options.check_axioms,
        session=options.session,
    )


def position_to_pb(position: Position | None) -> pb.Position | None:
    if position is None:
        return None
    return pb.Position(line=max(0, position.line), column=max(0, position.column))


def message_to_pb(message: Message) -> pb.Message:
    out = pb.Message(severity=int(message.severity), text=message.text, start=position_to_pb(message.start))
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


def identity_to_pb(identity: VerifierIdentity | None) -> pb.VerifierIdentity | None:
    if identity is None:
        return None
    return pb.VerifierIdentity(
        kind=identity.kind,
        lean_version=identity.lean_version,
        repl_revision=identity.repl_revision,
        project_revision=identity.project_revision,
        description=identity.description,
    )


def result_to_pb(result: VerifyResult) -> pb.Result:
    out = pb.Result(
        id=result.id,
        status=int(result.status),
        messages=[message_to_pb(m) for m in result.messages],
        sorries=[sorry_to_pb(s) for s in result.sorries],
        timings=pb.Timings(
            queue_s=result.timings.queue_s,
            header_s=result.timings.header_s,
            body_s=result.timings.body_s,
            total_s=result.timings.total_s,
            boot_s=result.timings.boot_s,
        ),
        reuse=pb.Reuse(
            warm_header=result.reuse.warm_header,
            reused_prefix_chars=result.reuse.reused_prefix_chars,
            worker=result.reuse.worker,
            attempts=result.reuse.attempts,
        ),
        error=result.error,
        infotree_json="" if result.infotree is None else json.dumps(result.infotree, ensure_ascii=False),
        axioms=result.axioms,
    )
    identity = identity_to_pb(result.verifier)
    if identity is not None:
        out.verifier.CopyFrom(identity)
    return out


# A VerifyStream snippet refused because the queue is full comes back REJECTED
# with this error text; clients match the prefix and the hint.
OVERLOADED_PREFIX = "RESOURCE_EXHAUSTED: "


def overloaded_error_text(exc) -> str:
    """`RESOURCE_EXHAUSTED: <why>; retry after <N> ms` for an OverloadedError."""
    return f"{OVERLOADED_PREFIX}{exc.message}; retry after {int(exc.retry_after_s * 1000)} ms"


def session_result_to_pb(ran) -> pb.SessionResponse:
    """services.sessions.SessionResult -> SessionResponse."""
    out = pb.SessionResponse(session=ran.session, result=result_to_pb(ran.result), replayed_commands=ran.replayed_commands)
    if ran.env is not None:
        out.env = ran.env
    return out
