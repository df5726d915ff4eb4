"""The Prover gRPC servicer: protobuf at the door, services.prover inside.

Owns: request/response conversion for StartProof, RunTactic, Expand and
ReleaseStates, and the Expand stream's rule that a bad pair is a REJECTED
result (the stream goes on) while a bad unary call is a status code
(edge.errors' one table). Times are google.protobuf.Duration on the wire
and float seconds inside: a negative or invalid request Duration is
INVALID_ARGUMENT naming the field. Quotas and ownership count against the
caller's identity (edge/identity.py: the checked token, else the peer host;
with auth off a made-up bearer is no new identity). May import: errors,
results, services, v1, edge.convert, edge.errors, edge.identity.
"""

from __future__ import annotations

import asyncio
import time

import grpc

from ..errors import LeanServiceError, RequestError
from ..services.prover import ProverService, TacticOutcome
from ..v1 import prover_pb2 as pb
from ..v1 import prover_pb2_grpc as pb_grpc
from ..v1 import verifier_pb2 as vpb
from . import convert
from .identity import CallerIdentity
from .errors import duration_of, maps_errors, status_for
from .interceptors.lenient import LenientRegistrar

__all__ = ["ProverServicer", "add_prover_to_server", "outcome_to_pb"]


def _deadline(context) -> float | None:
    remaining = context.time_remaining()
    return None if remaining is None else time.monotonic() + remaining


def _seconds(request, name: str) -> float:
    """The request's Duration field `name` in seconds (0.0 when unset: the
    server default); INVALID_ARGUMENT naming the field when it is invalid or
    negative."""
    if not request.HasField(name):
        return 0.0
    seconds = convert.seconds_of(getattr(request, name), name)
    if seconds < 0:
        raise RequestError(f"{name} is negative ({seconds:g} s); leave it unset for the server default", field=name)
    return seconds


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

    def _client(self, context) -> str:
        return self._identity.of_call(context)

    @maps_errors
    async def StartProof(self, request: pb.StartProofRequest, context):
        started = await self._prover.start_proof(
            request.code, timeout_s=_seconds(request, "timeout"), ttl_s=_seconds(request, "ttl"),
            check_axioms=request.check_axioms if request.HasField("check_axioms") else None,
            client_id=self._client(context), deadline=_deadline(context),
        )
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
        out = await self._prover.run_tactic(request.state_id, request.tactic, timeout_s=_seconds(request, "timeout"),
                                            client_id=self._client(context), deadline=_deadline(context))
        return outcome_to_pb(out)

    async def Expand(self, request_iterator, context):
        out: asyncio.Queue = asyncio.Queue()
        running: dict[str, asyncio.Task] = {}
        client = self._client(context)
        done_reading = object()

        def rejected(request: pb.ExpandRequest, error: str) -> pb.TacticResult:
            return pb.TacticResult(request_id=request.request_id, parent_state_id=request.state_id,
                                   tactic=request.tactic, status=pb.PROOF_STATUS_REJECTED, error=error)

        async def expand_one(request: pb.ExpandRequest) -> None:
            try:
                result = outcome_to_pb(await self._prover.run_tactic(
                    request.state_id, request.tactic, timeout_s=_seconds(request, "timeout"), client_id=client,
                    deadline=_deadline(context), request_id=request.request_id,
                ))
            except asyncio.CancelledError:
                result = rejected(request, "CANCELLED: the stream ended before the expansion ran")
            except LeanServiceError as exc:
                # One pair cannot fail the stream: its status code goes into the text.
                result = rejected(request, f"{_code_name(exc)}: {exc.message}")
            except Exception as exc:  # noqa: BLE001 - still one answer per pair
                result = rejected(request, f"INTERNAL: {exc!r}")
            running.pop(request.request_id, None)
            out.put_nowait(result)

        async def read_requests() -> None:
            try:
                async for request in request_iterator:
                    if not request.request_id:
                        out.put_nowait(rejected(request, "INVALID_ARGUMENT: Expand requests need a request_id"))
                    elif request.request_id in running:
                        out.put_nowait(rejected(request, "INVALID_ARGUMENT: duplicate request_id in flight"))
                    else:
                        running[request.request_id] = asyncio.ensure_future(expand_one(request))
            finally:
                out.put_nowait(done_reading)

        reader = asyncio.ensure_future(read_requests())
        finished = False
        try:
            while not (finished and not running and out.empty()):
                item = await out.get()
                if item is done_reading:
                    finished = True
                    await reader
                    continue
                yield item
        finally:
            reader.cancel()
            for task in list(running.values()):
                task.cancel()

    @maps_errors
    async def ReleaseStates(self, request: pb.ReleaseStatesRequest, context):
        if not request.state_ids and not request.proof_ids:
            raise RequestError("name at least one state_id or proof_id to release")
        released, unknown = self._prover.release(request.state_ids, request.proof_ids,
                                                 client_id=self._client(context))
        return pb.ReleaseStatesResponse(released=released, unknown=unknown)


def _code_name(exc: BaseException) -> str:
    return status_for(exc).name


def add_prover_to_server(servicer: ProverServicer, server: grpc.aio.Server) -> None:
    """Registers the Prover with the Verifier's lenient request parsing
    (undecodable requests are INVALID_ARGUMENT, not UNKNOWN)."""
    pb_grpc.add_ProverServicer_to_server(servicer, LenientRegistrar(server))
