"""The Verifier gRPC servicer: protobuf at the door, internal types inside."""

from __future__ import annotations

import asyncio
import itertools
import logging

import grpc
import lz4.frame

from .. import __version__
from ..errors import NotFoundError, RequestError
from ..results import Position, VerifyResult
from ..services.extract import ExtractService
from ..services.ports import Verifier
from ..services.resolve import deadline_in
from ..v1 import verifier_pb2 as pb
from ..v1 import verifier_pb2_grpc as pb_grpc
from . import convert, rewards
from .errors import duration_of, maps_errors
from .identity import CallerIdentity
from .interceptors.lenient import LenientRegistrar
from .stream import Shutdown, StreamCall, shutdown_result

log = logging.getLogger("leanrpc.edge")


def _deadline(context: grpc.aio.ServicerContext) -> float | None:
    return deadline_in(context.time_remaining())


class VerifierServicer(pb_grpc.VerifierServicer):
    def __init__(
        self,
        verify: Verifier,
        extract: ExtractService,
        *,
        sandbox_description: str = "",
        native: bool = False,
        identity: CallerIdentity | None = None,
    ) -> None:
        self._verify = verify
        self._extract = extract
        self._config = verify.config
        self._sandbox = sandbox_description
        self._native = native
        self._shutdown = Shutdown()
        self._stream_numbers = itertools.count(1)
        # Who a caller is (edge/identity.py): every RPC, sessions included, passes it down.
        self._identity = identity or CallerIdentity.for_server(self._config.server)
        # A result (stream) or a whole response (unary) must fit in one gRPC
        # message; larger ones are cut by convert.fit_result.
        self._max_result_bytes = self._config.server.max_message_mb * 2**20 - 64 * 1024

    @maps_errors
    async def Verify(self, request: pb.VerifyRequest, context):
        snippets = list(request.snippets)
        if not snippets:
            raise RequestError("the batch is empty: send at least one snippet", field="snippets")
        limit = self._config.server.max_snippets_per_batch
        if len(snippets) > limit:
            raise RequestError(
                f"the batch has {len(snippets)} snippets, over the limit of {limit}; split it or use VerifyStream",
                field="snippets",
            )
        options = convert.options_from_pb(request.options if request.HasField("options") else None)
        client_id = self._client_identity(context)
        deadline = _deadline(context)
        stream_id = f"batch-{next(self._stream_numbers)}"
        resolved = []
        for index, snippet in enumerate(snippets):
            try:
                resolved.append(
                    self._verify.resolver.resolve(
                        snippet.id or str(index),
                        snippet.code,
                        convert.snippet_options(snippet, options),
                        client_id=client_id,
                        stream_id=stream_id,
                        deadline=deadline,
                    )
                )
            except RequestError as exc:
                # Keep the subclass (an unknown session is NOT_FOUND, not INVALID_ARGUMENT).
                kind = NotFoundError if isinstance(exc, NotFoundError) else RequestError
                raise kind(
                    f"snippet {index} ({snippet.id or 'no id'}): {exc.message}",
                    field=exc.field or f"snippets[{index}]",
                ) from exc
        self._verify.admission(len(snippets))
        if len(resolved) == 1:
            results = [await self._one_until_shutdown(resolved[0], snippets[0].id or "0")]
        else:
            tasks = [asyncio.ensure_future(self._verify.run(one)) for one in resolved]
            try:
                results = await self._gather_until_shutdown(
                    tasks, [s.id or str(i) for i, s in enumerate(snippets)]
                )
            except BaseException:
                for task in tasks:
                    task.cancel()
                raise
        answers = [convert.result_to_pb(r) for r in results]
        return pb.VerifyResponse(results=convert.fit_batch(answers, self._max_result_bytes))

    async def _one_until_shutdown(self, request, snippet_id: str) -> VerifyResult:
        """One snippet run in the call's own task (issue 28: no task, gather or
        wait per call); at the shutdown deadline the call's task is cancelled
        and the snippet says "server shutting down"."""
        passed = self._shutdown.passed()
        if passed.done():
            return shutdown_result(snippet_id)
        task = asyncio.current_task()

        def stop(_passed) -> None:
            task.cancel()

        passed.add_done_callback(stop)
        try:
            return await self._verify.run(request)
        except asyncio.CancelledError:
            if not passed.done():
                raise  # the client went away
            task.uncancel()
            return shutdown_result(snippet_id)
        finally:
            passed.remove_done_callback(stop)

    async def _gather_until_shutdown(
        self, tasks: list[asyncio.Task], ids: list[str]
    ) -> list[VerifyResult]:
        """All results; after the shutdown deadline the unfinished ones say "server shutting down"."""
        everything = asyncio.ensure_future(asyncio.gather(*tasks))
        await asyncio.wait(
            [everything, self._shutdown.passed()], return_when=asyncio.FIRST_COMPLETED
        )
        if everything.done():
            return everything.result()
        everything.cancel()
        results = []
        for task, snippet_id in zip(tasks, ids):
            if task.done() and not task.cancelled() and task.exception() is None:
                results.append(task.result())
            else:
                task.cancel()
                results.append(shutdown_result(snippet_id))
        return results

    async def VerifyStream(self, request_iterator, context):
        call = StreamCall(
            self._verify,
            context,
            limit=self._config.server.max_stream_in_flight,
            max_result_bytes=self._max_result_bytes,
            client_id=self._client_identity(context),
            stream_id=f"stream-{next(self._stream_numbers)}",
            shutdown=self._shutdown,
            deadline=_deadline(context),
        )
        async for response in call.responses(request_iterator):
            yield response

    @maps_errors
    async def ScoreFormalization(self, request: pb.ScoreFormalizationRequest, context):
        """The composite gated reward (edge/rewards.py; formalize/reward.py scores)."""
        return await rewards.score_formalization(
            self._verify,
            request,
            client_id=self._client_identity(context),
            stream_id=f"reward-{next(self._stream_numbers)}",
            deadline=_deadline(context),
        )

    def begin_shutdown(self, grace: float) -> None:
        """Called by App.stop before the gRPC server stops (edge/stream.py)."""
        self._shutdown.begin(grace)

    def _client_identity(self, context) -> str:
        # A bearer header counts only when the auth interceptor checked it.
        return self._identity.of_call(context)

    @maps_errors
    async def Extract(self, request: pb.ExtractRequest, context):
        options = convert.options_from_pb(
            request.options if request.HasField("options") else None, default_infotree="original"
        )
        resolved = self._verify.resolver.resolve(
            "extract",
            request.code,
            options,
            deadline=_deadline(context),
            client_id=self._client_identity(context),
        )
        result, declarations, replays = await self._extract.extract(resolved, replay=request.replay)
        response = pb.ExtractResponse(result=convert.result_to_pb(result))
        found = pb.ExtractedDeclarations(declarations=[_declaration_to_pb(d) for d in declarations])
        for declaration, replay in zip(found.declarations, replays):
            _replay_to_pb(declaration, replay)
        if request.lz4:
            response.compressed = lz4.frame.compress(found.SerializeToString())
        else:
            response.declarations.CopyFrom(found)
        return response

    @maps_errors
    async def GetServerInfo(self, request, context):
        snapshot = self._verify.info()
        info = pb.GetServerInfoResponse(
            version=__version__,
            workers=snapshot.size,
            worker_states=snapshot.worker_states,
            queue_depth=snapshot.queue_depth,
            queue_limit=snapshot.queue_limit,
            serving=snapshot.serving,
            not_serving_reason=snapshot.not_serving_reason,
            native_core=self._native,
            sandbox=self._sandbox,
        )
        identity = convert.identity_to_pb(snapshot.identity)
        if identity is not None:
            info.verifier.CopyFrom(identity)
        for name, profile_identity in snapshot.profiles.items():
            profile = info.profiles.add(name=name)
            found = convert.identity_to_pb(profile_identity)
            if found is not None:
                profile.verifier.CopyFrom(found)
        return info

    # ---- sessions (docs/REUSE.md) ----

    @maps_errors
    async def OpenSession(self, request: pb.OpenSessionRequest, context):
        options = convert.options_from_pb(request.options if request.HasField("options") else None)
        sessions = self._verify.sessions
        sessions.check_name(request.name)
        resolved = self._verify.resolver.resolve(
            request.name,
            request.code,
            sessions.options_of(options),
            deadline=_deadline(context),
            client_id=self._client_identity(context),
            command="the session's code",
        )
        ran = await sessions.open(request.name, resolved)
        return convert.session_result_to_pb(ran, pb.OpenSessionResponse)

    @maps_errors
    async def RunInSession(self, request: pb.RunInSessionRequest, context):
        options = convert.options_from_pb(request.options if request.HasField("options") else None)
        env = request.env if request.HasField("env") else None
        sessions = self._verify.sessions
        resolved = self._verify.resolver.resolve(
            "",
            request.code,
            sessions.options_of(options),
            deadline=_deadline(context),
            client_id=self._client_identity(context),
            command="the session command",
        )
        ran = await sessions.run(request.session, resolved, env)
        return convert.session_result_to_pb(ran, pb.RunInSessionResponse)

    @maps_errors
    async def CloseSession(self, request: pb.CloseSessionRequest, context):
        closed = self._verify.sessions.close(
            request.session, client_id=self._client_identity(context)
        )
        return pb.CloseSessionResponse(closed=closed)


def _position(p: Position) -> pb.Position:
    return pb.Position(line=p.line, column=p.column)


def _replay_to_pb(declaration: pb.ExtractedDeclaration, replay) -> None:
    """Fills the replay check's report (services.extract.DeclarationReplay) in."""
    declaration.replay.CopyFrom(
        pb.DeclarationReplay(
            ran=replay.ran,
            start_goals=replay.start_goals,
            start_goals_match=replay.start_goals_match,
            error=replay.error,
            elapsed=duration_of(replay.elapsed_s),
        )
    )
    for step, report in zip(declaration.steps, replay.steps):
        step.replay.CopyFrom(
            pb.StepReplay(
                verdict=int(report.verdict),
                tactic=report.tactic,
                goals_after=report.goals_after,
                error=report.error,
            )
        )


def _declaration_to_pb(declaration) -> pb.ExtractedDeclaration:
    return pb.ExtractedDeclaration(
        name=declaration.name,
        start=_position(declaration.start),
        end=_position(declaration.end),
        steps=[
            pb.TacticStep(
                text=step.text,
                start=_position(step.start),
                end=_position(step.end),
                goals_before=list(step.goals_before),
                goals_after=list(step.goals_after),
                kind=step.kind or "",
            )
            for step in declaration.steps
        ],
    )


# ---- registration -------------------------------------------------------------


def add_verifier_to_server(servicer: pb_grpc.VerifierServicer, server: grpc.aio.Server) -> None:
    """Registers the Verifier so that a request which does not parse (invalid
    UTF-8 in a string field, broken wire format) gets INVALID_ARGUMENT with the
    parser's reason, not gRPC's generic UNKNOWN."""
    pb_grpc.add_VerifierServicer_to_server(servicer, LenientRegistrar(server))
