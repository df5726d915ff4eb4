"""The Prover gRPC servicer: protobuf at the door, services.prover inside.

Owns: request/response conversion for StartProof, RunTactic, Expand and
ReleaseStates, and the Expand stream's rule that a bad pair is a REJECTED
result (the stream goes on; a request with several `tactics` gets one result
per tactic, each with its `index`) while a bad unary call is a status code
(edge.errors' one table). Times are google.protobuf.Duration on the wire
and float seconds inside: a negative or invalid request Duration is
INVALID_ARGUMENT naming the field. Every request is resolved once, here, by
the doors' one resolver (services.resolve, through the Prover's
`resolve_start` / `resolve_expand`), with its `Caller` (identity, deadline).
Quotas and ownership count against the caller's identity (edge/identity.py:
the checked token, else the peer host; with auth off a made-up bearer is no
new identity). May import: errors, results, services (the Prover,
services.requests' Caller), v1, edge.convert, edge.errors (the one table,
also for a pair's REJECTED text), edge.identity, edge.streaming (the Expand
stream runs on the shared stream machinery: permits, the in-flight cap
server.max_stream_in_flight, one answer per accepted pair also at
shutdown, the size bound of each reply).
"""

from __future__ import annotations

import grpc

from ..errors import LeanServiceError, RequestError
from ..services.prover import ProverService, TacticOutcome
from ..services.requests import Caller
from ..v1 import prover_pb2 as pb
from ..v1 import prover_pb2_grpc as pb_grpc
from ..v1 import verifier_pb2 as vpb
from . import convert
from .errors import answers_errors, duration_of, in_band, maps_errors
from .identity import CallerIdentity
from .interceptors.lenient import LenientRegistrar
from .streaming import Answer, Many, Run, Shutdown, StreamCall

__all__ = ["ProverServicer", "add_prover_to_server", "fit_tactic_result", "outcome_to_pb"]


def _seconds(request, name: str) -> float:
    """The request's Duration field `name` in seconds (0.0 when unset: the
    server default); INVALID_ARGUMENT naming the field when it is not a
    valid Duration. Its range (negative, over the limit) is the resolver's."""
    if not request.HasField(name):
        return 0.0
    return convert.seconds_of(getattr(request, name), name)


def _position(pair) -> vpb.Position | None:
    return None if pair is None else vpb.Position(line=max(0, pair[0]), column=max(0, pair[1]))


def outcome_to_pb(out: TacticOutcome) -> pb.TacticResult:
    msg = pb.TacticResult(
        request_id=out.request_id,
        parent_state_id=out.parent_state_id,
        tactic=out.tactic,
        status=int(out.status),
        state_id=out.state_id,
        goals=out.goals,
        messages=[convert.message_to_pb(m) for m in out.messages],
        error=out.error,
        repl_status=out.repl_status,
        elapsed=duration_of(out.elapsed_s),
        proof_text=out.proof_text,
        rebuilt=out.rebuilt,
        worker=out.worker,
    )
    if out.verification is not None:
        msg.verification.CopyFrom(convert.result_to_pb(out.verification))
    for state in out.opened:
        _state_to_pb(msg.opened.add(), state)
    return msg


def _state_to_pb(entry: pb.ProofGoalState, state) -> None:
    entry.state_id = state.state_id
    entry.goals.extend(state.goals)
    if state.start is not None:
        entry.start.CopyFrom(_position(state.start))
    if state.end is not None:
        entry.end.CopyFrom(_position(state.end))


class ProverServicer(pb_grpc.ProverServicer):
    def __init__(self, prover: ProverService, identity: CallerIdentity | None = None) -> None:
        self._prover = prover
        self._identity = identity or CallerIdentity.for_server(prover.config.server)
        server = prover.config.server
        self._limit = server.max_stream_in_flight
        self._max_result_bytes = server.max_message_mb * 2**20 - 64 * 1024
        self._shutdown = Shutdown()

    def _caller(self, context) -> Caller:
        return Caller.at_door(self._identity.of_call(context), context.time_remaining())

    @maps_errors
    async def StartProof(self, request: pb.StartProofRequest, context):
        start = self._prover.resolve_start(
            request.code,
            timeout_s=_seconds(request, "timeout"),
            ttl_s=_seconds(request, "ttl"),
            check_axioms=request.check_axioms if request.HasField("check_axioms") else None,
            caller=self._caller(context),
        )
        started = await self._prover.start_proof(start)
        response = pb.StartProofResponse(
            proof_id=started.proof_id,
            messages=[convert.message_to_pb(m) for m in started.messages],
            elapsed=duration_of(started.elapsed_s),
        )
        for state in started.states:
            _state_to_pb(response.states.add(), state)
        identity = convert.identity_to_pb(started.verifier)
        if identity is not None:
            response.verifier.CopyFrom(identity)
        return response

    @maps_errors
    async def RunTactic(self, request: pb.RunTacticRequest, context):
        expand = self._prover.resolve_expand(
            request.state_id,
            (request.tactic,),
            timeout_s=_seconds(request, "timeout"),
            caller=self._caller(context),
        )
        return outcome_to_pb(await self._prover.run_tactic(expand))

    async def Expand(self, request_iterator, context):
        """The shared stream machinery (edge/streaming.py) with Expand's door:
        permits and the in-flight cap (server.max_stream_in_flight), one
        answer per accepted pair also at shutdown, the reply size bound."""
        door = _ExpandDoor(
            self._prover, caller=self._caller(context), max_result_bytes=self._max_result_bytes
        )
        call = StreamCall(door, context, limit=self._limit, shutdown=self._shutdown)
        async for response in call.responses(request_iterator):
            yield response

    def begin_shutdown(self, grace: float) -> None:
        """Called by App.stop before the gRPC server stops (edge/streaming.py)."""
        self._shutdown.begin(grace)

    @maps_errors
    async def ReleaseStates(self, request: pb.ReleaseStatesRequest, context):
        if not request.state_ids and not request.proof_ids:
            raise RequestError("name at least one state_id or proof_id to release")
        released, unknown = self._prover.release(
            request.state_ids, request.proof_ids, client_id=self._identity.of_call(context)
        )
        return pb.ReleaseStatesResponse(released=released, unknown=unknown)


def _rejected(request: pb.ExpandRequest, error: str):
    """The REJECTED answer to a request: one result, or one per tactic of a
    request with `tactics` (each with its index; in one message with
    `pack_results`)."""
    if not request.tactics:
        return pb.TacticResult(
            request_id=request.request_id,
            parent_state_id=request.state_id,
            tactic=request.tactic,
            status=pb.PROOF_STATUS_REJECTED,
            error=error,
        )
    answers = [
        pb.TacticResult(
            request_id=request.request_id,
            parent_state_id=request.state_id,
            tactic=tactic,
            status=pb.PROOF_STATUS_REJECTED,
            error=error,
            index=k,
        )
        for k, tactic in enumerate(request.tactics)
    ]
    return _pack(answers) if request.pack_results else Many(tuple(answers))


class _ExpandDoor:
    """Expand's StreamDoor: a bad pair is a REJECTED result whose error starts
    with the status code name it would have had as a unary call; the stream
    goes on. A request with `tactics` is answered once per tactic (`Many`),
    each result with its `index`, or with `pack_results` in one message (the
    first result carries the others in `more`); a bad tactic among them is
    REJECTED alone."""

    def __init__(self, prover: ProverService, *, caller: Caller, max_result_bytes: int) -> None:
        self._prover = prover
        self._caller = caller
        self._max_result_bytes = max_result_bytes

    def take(self, request: pb.ExpandRequest):
        if not request.request_id:
            return Answer(_rejected(request, "INVALID_ARGUMENT: Expand requests need a request_id"))
        if request.tactic and request.tactics:
            return Answer(_rejected(request, "INVALID_ARGUMENT: set tactic or tactics, not both"))
        return Run(request.request_id, request)

    @answers_errors(_rejected)
    async def run(self, request: pb.ExpandRequest):
        """The pair resolved once (the doors' one resolver), then run; a failure
        is a REJECTED answer through the one error table (edge.errors)."""
        expand = self._prover.resolve_expand(
            request.state_id,
            request.tactics or (request.tactic,),
            each=bool(request.tactics),
            timeout_s=_seconds(request, "timeout"),
            caller=self._caller,
            request_id=request.request_id,
        )
        outs = await self._prover.expand(expand)
        if not request.tactics:
            return outcome_to_pb(outs[0])
        answers = [self._one_of_many(request, k, out) for k, out in enumerate(outs)]
        return _pack(answers) if request.pack_results and answers else Many(tuple(answers))

    @staticmethod
    def _one_of_many(request: pb.ExpandRequest, index: int, out) -> pb.TacticResult:
        if isinstance(out, LeanServiceError):  # that tactic alone was refused
            result = pb.TacticResult(
                request_id=request.request_id,
                parent_state_id=request.state_id,
                tactic=request.tactics[index],
                status=pb.PROOF_STATUS_REJECTED,
                error=in_band(out),
            )
        else:
            result = outcome_to_pb(out)
        result.index = index
        return result

    def shutting_down(self, request: pb.ExpandRequest):
        return _rejected(request, f"UNAVAILABLE: {SHUTTING_DOWN_TEXT}")

    def cancelled(self, request: pb.ExpandRequest):
        return _rejected(request, "CANCELLED: the stream ended before the expansion ran")

    def duplicate(self, request: pb.ExpandRequest):
        return _rejected(request, "INVALID_ARGUMENT: duplicate request_id in flight")

    def to_wire(self, result: pb.TacticResult) -> pb.TacticResult:
        if len(result.more):
            return fit_packed(result, self._max_result_bytes)
        return fit_tactic_result(result, self._max_result_bytes)


SHUTTING_DOWN_TEXT = (
    "server shutting down: the expansion was accepted but not finished; it is safe to resend it"
)


def _pack(answers: list[pb.TacticResult]) -> pb.TacticResult:
    """One message for a request's results (`pack_results`): the first carries the others in `more`."""
    head = answers[0]
    head.more.extend(answers[1:])
    return head


def fit_packed(head: pb.TacticResult, limit: int) -> pb.TacticResult:
    """Bounds a packed message to `limit` bytes, in place: when it is over,
    each of its results is fitted (fit_tactic_result) to its share."""
    if head.ByteSize() <= limit:
        return head
    rest = []
    for part in head.more:
        copy = pb.TacticResult()
        copy.CopyFrom(part)
        rest.append(copy)
    head.ClearField("more")
    share = max(limit // (1 + len(rest)) - 64, 1024)
    fit_tactic_result(head, share)
    head.more.extend(fit_tactic_result(part, share) for part in rest)
    return head


def fit_tactic_result(out: pb.TacticResult, limit: int) -> pb.TacticResult:
    """Bounds one serialized TacticResult to `limit` bytes, in place: the
    verdict stays; the whole-proof verification is fitted first
    (convert.fit_result), then messages, goals and opened states are dropped
    from the end while it is still too large, and `error` says so."""
    size = out.ByteSize()
    if size <= limit:
        return out
    if out.HasField("verification"):
        convert.fit_result(out.verification, max(limit // 2, 1024))
    dropped = 0
    for field in (out.messages, out.opened, out.goals):
        while len(field) and out.ByteSize() > limit - 512:
            del field[-1]
            dropped += 1
    if out.ByteSize() > limit - 512:
        out.proof_text = out.proof_text.encode("utf-8")[: max(0, limit // 4)].decode(
            "utf-8", errors="ignore"
        )
    note = (
        f"result cut to fit {limit} bytes (was {size}; {dropped} messages, goals or states dropped)"
    )
    out.error = f"{out.error}; {note}" if out.error else note
    return out


def add_prover_to_server(servicer: ProverServicer, server: grpc.aio.Server) -> None:
    """Registers the Prover with the Verifier's lenient request parsing
    (undecodable requests are INVALID_ARGUMENT, not UNKNOWN)."""
    pb_grpc.add_ProverServicer_to_server(servicer, LenientRegistrar(server))
